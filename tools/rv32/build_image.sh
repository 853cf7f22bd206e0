#!/bin/sh
# Builds the RV32 test image (MicroPython v1.28.0, qemu port, VIRT_RV32, no Zba as on the C6) and its mpy-cross.
#
# usage: tools/rv32/build_image.sh [--board] SRC [OUT]
#   --board  also freeze the tree's protocol core and master (manifest_board.py), as the C6
#        master's firmware does: a bench image (tools/bench.py rv32 then measures the code as a
#        board runs it), not a test image (the tests would run the frozen copy, not the tree)
#   SRC  a MicroPython v1.28.0 source tree with lib/micropython-lib at
#        8380c7bb8f9e5e5260e9539156742925e00366b2 (the port freezes unittest from it)
#   OUT  the folder for firmware.elf and mpy-cross (default: where tools/rv32/run.py looks:
#        $ORGANBUS_RV32_IMAGE, an .elf or a folder, else ~/.cache/organbus-rv32)
# Needs (Debian): gcc-riscv64-unknown-elf binutils-riscv64-unknown-elf picolibc-riscv64-unknown-elf,
# and qemu-system-misc to run it. About a minute on two cores. See docs/rv32.md.
set -eu
here=$(cd "$(dirname "$0")" && pwd)

die() { echo "build_image.sh: $*" >&2; exit 2; }

manifest=$here/manifest.py
frozen=""
if [ "${1:-}" = --board ]; then
    shift
    manifest=$here/manifest_board.py
    frozen=" frozen: organbus master ($(git -C "$here" describe --always --dirty 2>/dev/null || echo tree))"
    [ $# -ge 2 ] || die "--board needs OUT: a bench image must not take the test image's place"
fi
[ $# -ge 1 ] || die "usage: tools/rv32/build_image.sh [--board] SRC [OUT]"
src=$(cd "$1" 2>/dev/null && pwd) || die "no source tree at $1"
if [ $# -ge 2 ]; then
    elf=$2/firmware.elf
elif [ -n "${ORGANBUS_RV32_IMAGE:-}" ] && [ "${ORGANBUS_RV32_IMAGE%.elf}" != "$ORGANBUS_RV32_IMAGE" ]; then
    elf=$ORGANBUS_RV32_IMAGE
elif [ -n "${ORGANBUS_RV32_IMAGE:-}" ]; then
    elf=$ORGANBUS_RV32_IMAGE/firmware.elf
else
    elf=$HOME/.cache/organbus-rv32/firmware.elf
fi
out=$(dirname "$elf")
heap=${ORGANBUS_RV32_HEAP:-1048576}  # .mpy code loads into it; a board runs code from flash

[ -f "$src/py/mpconfig.h" ] && [ -d "$src/ports/qemu" ] || die "$src is not a MicroPython tree"
ver=$(sed -n "s/^#define MICROPY_VERSION_\(MAJOR\|MINOR\|MICRO\) \([0-9]*\)\$/\2/p" "$src/py/mpconfig.h" | tr "\n" .)
[ "$ver" = "1.28.0." ] || die "$src is MicroPython ${ver%?}, this image needs v1.28.0"
[ -f "$src/lib/micropython-lib/python-stdlib/unittest/unittest/__init__.py" ] ||
    die "$src/lib/micropython-lib is empty: put micropython-lib 8380c7bb at that path"
command -v riscv64-unknown-elf-gcc >/dev/null ||
    die "no riscv64-unknown-elf-gcc: apt-get install gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf"

mkdir -p "$out"
jobs=${ORGANBUS_RV32_JOBS:-2}

# The matching cross-compiler first: its .mpy format is the firmware's.
make -s -C "$src/mpy-cross" -j"$jobs" >/dev/null

# The port hard-codes the Zba emitter on and asyncio off; the C6 has no Zba and runs asyncio.
# Make both defines overridable from the command line (v1.28.0 already guards the Zba one).
cfg=$src/ports/qemu/mpconfigport.h
for name in MICROPY_EMIT_RV32_ZBA MICROPY_PY_ASYNCIO; do
    grep -q "ifndef $name\$" "$cfg" && continue
    awk -v n="$name" '$1 == "#define" && $2 == n { print "#ifndef " n; print; print "#endif"; next } { print }' \
        "$cfg" >"$cfg.new" && mv "$cfg.new" "$cfg"
done

# Frozen native code must stay 2-aligned: mpy-tool's aligned(2) is lost in RVC code (tools/mpy_tool_align.py).
python3 "$here/../mpy_tool_align.py" "$src" >/dev/null || die "cannot patch $src/tools/mpy-tool.py"

rm -rf "$src/ports/qemu/build-organbus-c6"  # a fresh build: the make flags are not tracked as dependencies
# Debian's GCC 12 ships no rv32imac_zicsr multilib; with the 2.2 ISA spec rv32imac keeps the CSR
# instructions and links against the rv32imac/ilp32 picolibc. -O2 and computed goto as the esp32 port.
make -s -C "$src/ports/qemu" BOARD=VIRT_RV32 BUILD=build-organbus-c6 \
    "RV32_ARCH=rv32imac -misa-spec=2.2" MPY_CROSS_FLAGS=-march=rv32imc \
    MICROPY_HEAP_SIZE="$heap" COPT="-O2 -DNDEBUG" \
    CFLAGS_EXTRA="-DMICROPY_EMIT_RV32_ZBA=0 -DMICROPY_OPT_COMPUTED_GOTO=1 -DMICROPY_PY_ASYNCIO=1" \
    FROZEN_MANIFEST="$manifest" -j"$jobs" >/dev/null

cp "$src/ports/qemu/build-organbus-c6/firmware.elf" "$elf"
cp "$src/mpy-cross/build/mpy-cross" "$out/mpy-cross"
printf 'micropython v1.28.0 qemu VIRT_RV32 rv32imc no-zba -O2 asyncio heap=%s%s\n' "$heap" "$frozen" >"$out/IMAGE"
echo "$elf"
