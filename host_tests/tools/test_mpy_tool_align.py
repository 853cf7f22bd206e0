# tools/mpy_tool_align.py: frozen native code kept 2-aligned on RV32, and the assembler behaviour that makes it needed.
import os
import shutil
import subprocess
import sys

import pytest

from support import ROOT

sys.path.append(os.path.join(ROOT, "tools"))
import mpy_tool_align  # noqa: E402

# The shape of mpy-tool v1.28's RawCodeNative.__init__ around the anchor (not its code: a stand-in
# class that keeps fun_data as RawCode does).
TOOL = """
class RawCodeNative:
    def __init__(self, fun_data, type_sig):
        self.fun_data = fun_data
        self.type_sig = type_sig
        self.fun_data_attributes = "aligned(2)"
"""

GCC = "riscv64-unknown-elf-gcc"
NM = "riscv64-unknown-elf-nm"

# Three native functions' bytes as mpy-tool freezes them, each with its proto-function in .rodata.
FROZEN_C = """
typedef unsigned char byte;
typedef struct { int kind; const void *fun_data; const void *prelude; } proto_t;
#define TEXT __attribute__((section(".text,\\"ax\\",@progbits # "))) __attribute__ ((aligned (2)))
static const byte fun_data_a[%(n)d] TEXT = {0x82, 0x80};
static const proto_t proto_a = {1, fun_data_a, &fun_data_a[72]};
static const byte fun_data_b[%(n)d] TEXT = {0x82, 0x80};
static const proto_t proto_b = {1, fun_data_b, &fun_data_b[72]};
static const byte fun_data_c[%(n)d] TEXT = {0x82, 0x80};
static const proto_t proto_c = {1, fun_data_c, &fun_data_c[72]};
const proto_t *const children[] = {&proto_a, &proto_b, &proto_c};
"""


def _addresses(tmp_path, size):
    src = tmp_path / ("frozen_%d.c" % size)
    obj = tmp_path / ("frozen_%d.o" % size)
    src.write_text(FROZEN_C % {"n": size})
    # as the qemu port and ESP-IDF compile frozen_content.c: RVC on (rv32imac, as the C6), a
    # section per object (so gcc leaves each array's alignment to the assembler)
    flags = ["-O2", "-march=rv32imac", "-misa-spec=2.2", "-mabi=ilp32"]
    flags += ["-ffunction-sections", "-fdata-sections"]
    subprocess.run([GCC, *flags, "-c", str(src), "-o", str(obj)], check=True)
    out = subprocess.run([NM, str(obj)], check=True, capture_output=True, text=True).stdout
    return {
        line.split()[2]: int(line.split()[0], 16)
        for line in out.splitlines()
        if "fun_data_" in line
    }


def _toolchain():
    if not (shutil.which(GCC) and shutil.which(NM)):
        pytest.skip("no %s: apt-get install gcc-riscv64-unknown-elf (.ci/run installs it)" % GCC)


def test_the_assembler_leaves_native_functions_odd_after_ones_of_odd_length(tmp_path):
    _toolchain()
    at = sorted(_addresses(tmp_path, 77).values())
    assert len(at) == 3 and at[0] % 2 == 0
    assert [b - a for a, b in zip(at, at[1:])] == [77, 77]  # aligned(2) was not honoured
    assert at[1] % 2 == 1


def test_even_lengths_keep_every_native_function_2_aligned(tmp_path):
    _toolchain()
    at = _addresses(tmp_path, 78)  # what the patched mpy-tool makes of 77 bytes
    assert len(at) == 3 and all(a % 2 == 0 for a in at.values()), at


def _make(text):
    ns = {}
    exec(text, ns)
    return ns["RawCodeNative"]


def test_patched_tool_pads_odd_native_code_to_an_even_length():
    patched = mpy_tool_align.patch(TOOL)
    cls = _make(patched)
    odd = cls(b"\x01" * 77, None)
    assert odd.fun_data == b"\x01" * 77 + b"\x00"
    even = cls(bytearray(b"\x02" * 76), None)
    assert even.fun_data == b"\x02" * 76  # even code is left as it is
    assert _make(TOOL)(b"\x01" * 77, None).fun_data == b"\x01" * 77  # the stand-in unpatched


def test_patch_is_idempotent_and_refuses_a_tool_it_does_not_know():
    once = mpy_tool_align.patch(TOOL)
    assert mpy_tool_align.patch(once) == once
    with pytest.raises(ValueError, match="found 0 lines 'self.type_sig = type_sig'"):
        mpy_tool_align.patch("class RawCodeNative:\n    pass\n")
    with pytest.raises(ValueError, match="found 2 lines"):
        mpy_tool_align.patch(TOOL + TOOL)


def test_command_patches_a_tree_once_and_names_a_missing_tool(tmp_path, capsys):
    (tmp_path / "tools").mkdir()
    path = tmp_path / "tools" / "mpy-tool.py"
    path.write_text(TOOL)
    assert mpy_tool_align.main(["mpy_tool_align.py", str(tmp_path)]) == 0
    assert "patched" in capsys.readouterr().out
    assert mpy_tool_align.MARK in path.read_text()
    assert mpy_tool_align.main(["mpy_tool_align.py", str(tmp_path)]) == 0
    assert "already patched" in capsys.readouterr().out
    assert mpy_tool_align.main(["mpy_tool_align.py", str(tmp_path / "none")]) == 2
    assert "none/tools/mpy-tool.py" in capsys.readouterr().err


def test_every_build_of_frozen_native_code_applies_it():
    with open(os.path.join(ROOT, "tools", "rv32", "build_image.sh")) as f:
        assert "mpy_tool_align.py" in f.read()
    with open(os.path.join(ROOT, "boards", "c6_master", "README.md")) as f:
        assert "tools/mpy_tool_align.py" in f.read()
    for organ in ("led_organ", "speaker_organ", "template_organ"):
        with open(os.path.join(ROOT, "boards", organ, "manifest.py")) as f:
            assert "tools/mpy_tool_align.py" in f.read(), organ
