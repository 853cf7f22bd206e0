# Every device file compiles for the ESP32-C6 (mpy-cross -march=rv32imc): viper type errors and syntax
# the board lacks are caught on the host. Files are found at collection time, so new ones are covered.
import glob
import os
import re
import subprocess

import pytest

from support import ROOT, mpy_cross_exe


def device_files():
    found = []
    for top in ("lib", "master", "organs"):
        found += glob.glob(os.path.join(ROOT, top, "**", "*.py"), recursive=True)
    found += glob.glob(os.path.join(ROOT, "boards", "*", "main.py"))
    return sorted(os.path.relpath(p, ROOT) for p in found if not p.endswith("manifest.py"))


FILES = device_files()


def test_core_files_are_found():
    for name in ("crc16.py", "frame.py", "descriptor.py", "command.py"):
        rel = os.path.join("lib", "organbus", name)
        assert rel in FILES, "%s must be among the device files" % rel


@pytest.mark.parametrize("rel", FILES)
def test_compiles_for_rv32imc(rel, tmp_path):
    out = tmp_path / "out.mpy"
    r = subprocess.run(
        [mpy_cross_exe(), "-march=rv32imc", "-o", str(out), rel],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, "mpy-cross -march=rv32imc %s failed:\n%s%s" % (
        rel,
        r.stdout,
        r.stderr,
    )
    assert out.stat().st_size > 0, "%s compiled to an empty .mpy" % rel


IMPORTS_MACHINE = re.compile(r"^\s*(import\s+machine\b|from\s+machine\s+import\b)", re.M)


@pytest.mark.parametrize("rel", [f for f in FILES if not f.startswith("boards" + os.sep)])
def test_device_code_does_not_import_machine(rel):
    # only board entry points import machine; everything else takes hardware objects as arguments
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        text = f.read()
    m = IMPORTS_MACHINE.search(text)
    assert m is None, "%s imports machine (%r): pass the hardware object in instead" % (
        rel,
        m.group(0).strip() if m else "",
    )
