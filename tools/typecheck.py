# Type-check the device code against the ESP32-C6 MicroPython stubs (mypy), as the test suite does.
"""Usage: python tools/typecheck.py [FILES...]   (default: lib/, master/, organs/, boards/*/main.py)

The stubs come from two PyPI packages (dev extra): `micropython-esp32-esp32-generic-c6-stubs`
(machine, neopixel, network, time, micropython, ... as the C6 firmware has them) and
`micropython-stdlib-stubs` (MicroPython's builtins, sys, os, asyncio, json, struct, used as mypy's
typeshed). The board stubs install as loose .pyi files at the top of site-packages, where mypy
does not look, so this tool links them into a private folder and puts it on MYPYPATH. Settings
live in tools/mypy-device.ini. Exit status is mypy's (0: clean).
"""

import glob
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BOARD_STUBS = "micropython-esp32-esp32-generic-c6-stubs"
STDLIB_STUBS = "micropython-stdlib-stubs"
CONFIG = os.path.join(HERE, "mypy-device.ini")


def device_files():
    files = sorted(glob.glob(os.path.join(ROOT, "lib", "organbus", "*.py")))
    files = [f for f in files if not f.endswith("manifest.py")]  # a build script, not device code
    for pkg in ("master", "organs"):
        found = sorted(glob.glob(os.path.join(ROOT, pkg, "**", "*.py"), recursive=True))
        files += [f for f in found if not f.endswith("manifest.py")]  # build scripts
    files += sorted(glob.glob(os.path.join(ROOT, "boards", "*", "main.py")))
    return files


def _dist_root(name):
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit("typecheck: %s is not installed: pip install -e '.[dev]'" % name)
    return dist, str(dist.locate_file(""))


def stub_dir(cache=None):
    """A folder of links to the board stubs (+ _mpy_shed), for MYPYPATH."""
    dist, base = _dist_root(BOARD_STUBS)
    _, std_base = _dist_root(STDLIB_STUBS)
    # One folder per installation: a second checkout's venv never reuses links into this one.
    key = hashlib.sha1(("%s|%s" % (base, dist.version)).encode()).hexdigest()[:12]
    out = cache or os.path.join(tempfile.gettempdir(), "organbus-stubs-" + key)
    os.makedirs(out, exist_ok=True)
    tops = {str(f).split("/")[0] for f in dist.files or () if ".dist-info" not in str(f)}
    tops = {t for t in tops if t.endswith(".pyi") or os.path.isdir(os.path.join(base, t))}
    links = [(os.path.join(base, t), t) for t in tops]
    links.append((os.path.join(std_base, "_mpy_shed"), "_mpy_shed"))
    for src, name in links:
        dst = os.path.join(out, name)
        if os.path.lexists(dst) and os.readlink(dst) != src:
            os.remove(dst)
        if not os.path.lexists(dst):
            try:
                os.symlink(src, dst)
            except FileExistsError:  # another run made it meanwhile
                pass
    return out, std_base


def run(files=None, cache_dir=None):
    stubs, typeshed = stub_dir()
    env = dict(os.environ, MYPYPATH=os.pathsep.join([stubs, os.path.join(ROOT, "lib"), ROOT]))
    cmd = [sys.executable, "-m", "mypy", "--config-file", CONFIG, "--custom-typeshed-dir", typeshed]
    # Never a .mypy_cache in the working tree; one cache per run, as several runs may overlap.
    tmp = None if cache_dir else tempfile.mkdtemp(prefix="organbus-mypy-")
    cmd += ["--cache-dir", cache_dir or tmp]
    cmd += list(files or device_files())
    try:
        return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = run(argv or None)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
