#!/usr/bin/env python3
# Patches a MicroPython tree's mpy-tool so every frozen native function starts 2-aligned on RV32 (the C6 firmwares freeze native code).
"""Keep frozen native code 2-aligned on RISC-V: a patch to a MicroPython tree's tools/mpy-tool.py.

usage: python tools/mpy_tool_align.py MICROPYTHON_SRC

mpy-tool puts each frozen native or viper function's bytes (machine code, then its prelude) in
the `.text` section with `aligned(2)`. GNU as ignores `.align 1` in a code section when the ISA
has compressed instructions (its RISC-V backend takes 2-byte alignment as given there), so a
function whose bytes have an odd length leaves the next one at an odd address. A call to it
jumps one byte early (jalr clears bit 0) and the CPU stops at an illegal instruction or a bad
store. This pads every native function's bytes to an even length, so the next one stays
2-aligned. Found on the RV32 image (docs/rv32.md); the C6's ESP-IDF toolchain is GNU as too.

Idempotent. Exit 0 when the tree is patched (now or before), 2 with the reason otherwise.
"""

import os
import sys

ANCHOR = "        self.type_sig = type_sig\n"
MARK = "organbus: pad to an even length"
PATCH = (
    "        if len(self.fun_data) & 1:  # %s (GNU as ignores .align 1 in RVC code)\n"
    '            self.fun_data = bytes(self.fun_data) + b"\\x00"\n' % MARK
)


def patch(text):
    """The patched text of mpy-tool.py, or ValueError naming why it cannot be patched."""
    if MARK in text:
        return text
    if text.count(ANCHOR) != 1:
        raise ValueError(
            "found %d lines %r (RawCodeNative.__init__), want 1"
            % (text.count(ANCHOR), ANCHOR.strip())
        )
    return text.replace(ANCHOR, ANCHOR + PATCH)


def main(argv):
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    path = os.path.join(argv[1], "tools", "mpy-tool.py")
    try:
        with open(path) as f:
            text = f.read()
        new = patch(text)
    except (OSError, ValueError) as e:
        print("mpy_tool_align: %s: %s" % (path, e), file=sys.stderr)
        return 2
    if new != text:
        with open(path, "w") as f:
            f.write(new)
        print("mpy_tool_align: patched %s" % path)
    else:
        print("mpy_tool_align: %s is already patched" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
