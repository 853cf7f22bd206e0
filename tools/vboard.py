# A virtual board: a MicroPython unix-port process behind a pseudo-terminal, a folder as its flash.
"""Virtual board for deploying and testing without hardware.

    python tools/vboard.py --flash DIR [--chip esp32c6] [--uart 1=listen:127.0.0.1:7001]

prints `{"port": "/dev/pts/N", ...}` on one line and serves until Ctrl-C. The pseudo-terminal
behaves like a board's USB console: friendly REPL, raw REPL with raw paste, soft reset
("MPY: soft reboot"), Ctrl-C interrupting a running program, boot.py and main.py run at boot. So
`mpremote connect /dev/pts/N ...` and `tools/flash.py ROLE --port /dev/pts/N` drive it as they
would an ESP32. The console side runs in tools/vboard_device.py on the unix port; `machine` is the
simulated one from tools/simhw (UART over loopback TCP via --uart, as in tools/sim.py).

What is not a board: the interpreter is the host's unix port (64-bit, native arch x64), so
`.mpy` files with native code for the board's arch (viper, e.g. the CRC) cannot run here;
tools/flash.py says so and offers `--arch x64`. The board identity (chip) is announced by the
module `vboard_device` (`vboard_device.CHIP`), never by faking `sys.implementation`.
"""

import argparse
import errno
import json
import os
import select
import signal
import subprocess
import sys
import termios
import threading
import time
import tty

import toolpath  # the tree, lib/ and tools/ on sys.path
from vbody import launch

SIMHW = launch.SIMHW
EXIT_SOFT_RAW = 64
EXIT_SOFT_FRIENDLY = 65
EXIT_MACHINE_RESET = 75  # tools/simhw/machine.py: machine.reset()
HARDWARE_MODULES = ("machine", "neopixel", "network")  # built into a board's firmware
BACKLOG_MAX = 32768  # console bytes kept while nobody reads the port; older ones are dropped


def _die_with_parent():
    # Linux: the board process ends when the tool that started it does, even on a crash; and it
    # takes SIGINT (its Ctrl-C) even if this tool was started with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class VirtualBoard:
    """One virtual board. `start()` returns the pty path; `stop()` ends the board process."""

    def __init__(
        self, flash, chip="esp32c6", uarts=None, env=None, heapsize=None, log=None, http=None
    ):
        self.flash = os.path.abspath(flash)
        self.chip = chip
        self.uarts = dict(uarts or {})  # {1: "listen:127.0.0.1:7001"}
        self.http = http  # ("127.0.0.1", port): where a master serves its HTTP API
        self.extra_env = dict(env or {})
        self.heapsize = heapsize
        self.log = log  # file object that gets a copy of everything the board prints
        self.boots = 0
        self._proc = None
        self._busy = False
        self._kbd_intr = True  # Ctrl-C is an interrupt unless the program turned that off
        self._booting = False
        self._held_intr = 0
        self._stop = threading.Event()
        self._thread = None
        self._pending_in = b""
        self._backlog = bytearray()

    # -- process ----------------------------------------------------------------------------
    def _env(self, mode):
        env = launch.sim_env(self.uarts, path=":".join([".frozen", SIMHW, toolpath.TOOLS]))
        preload = [n for n in HARDWARE_MODULES if os.path.exists(os.path.join(SIMHW, n + ".py"))]
        env.update(
            ORGANBUS_VBOARD_CHIP=self.chip,
            ORGANBUS_VBOARD_FLASH=self.flash,
            ORGANBUS_VBOARD_MODE=mode,
            ORGANBUS_VBOARD_PRELOAD=",".join(preload),
        )
        env.update(self.extra_env)
        return env

    def _spawn(self, mode):
        cmd = [launch.micropython_exe()]
        if self.heapsize:
            cmd += ["-X", "heapsize=%s" % self.heapsize]
        cmd += ["-c", "import vboard_device\nvboard_device.main()"]
        self._busy = False
        self._kbd_intr = True
        self._booting = True  # until the first busy/idle mark: a Ctrl-C then waits for it
        self._held_intr = 0
        self._proc = subprocess.Popen(
            cmd,
            stdin=self._in_r,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self._env(mode),
            cwd=self.flash,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
        self.boots += 1
        for f in (self._proc.stdout, self._proc.stderr):
            os.set_blocking(f.fileno(), False)

    def start(self):
        os.makedirs(self.flash, exist_ok=True)
        # what differs on a host reaches the board as its own settings, beside /board.json
        with open(os.path.join(self.flash, "settings.json"), "w") as f:
            json.dump(launch.host_settings(self.uarts, self.http), f)
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)
        attrs = termios.tcgetattr(self._slave)
        attrs[4] = attrs[5] = termios.B115200
        termios.tcsetattr(self._slave, termios.TCSANOW, attrs)
        os.set_blocking(self._master, False)
        self.port = os.ttyname(self._slave)
        # stdin survives soft resets: bytes the host sent during a reboot are not lost.
        self._in_r, self._in_w = os.pipe()
        os.set_blocking(self._in_w, False)
        self._spawn("friendly")
        self._thread = threading.Thread(target=self._pump, name="vboard", daemon=True)
        self._thread.start()
        return self.port

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(5)
        if self._proc and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        for fd in (self._master, self._slave, self._in_r, self._in_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- relay ------------------------------------------------------------------------------
    def _to_host(self, data):
        if self.log:
            self.log.write(data.decode("utf-8", "replace"))
            self.log.flush()
        self._backlog += data
        if len(self._backlog) > BACKLOG_MAX:  # nobody reading: drop the oldest, as a USB CDC does
            del self._backlog[: len(self._backlog) - BACKLOG_MAX]
        self._flush_host()

    def _flush_host(self):
        while self._backlog:
            try:
                n = os.write(self._master, self._backlog)
            except BlockingIOError:
                return
            except OSError as e:
                if e.errno == errno.EIO:
                    return
                raise
            del self._backlog[:n]

    def _from_host(self, data):
        # Ctrl-C while code runs is an interrupt (SIGINT), not a byte for stdin.
        out = bytearray()
        for b in data:
            if b == 3 and self._kbd_intr and self._booting:
                self._held_intr += 1
            elif b == 3 and self._kbd_intr and self._busy and self._proc.poll() is None:
                self._proc.send_signal(signal.SIGINT)
            else:
                out.append(b)
        self._pending_in += bytes(out)
        self._flush_child()

    def _flush_child(self):
        while self._pending_in:
            try:
                n = os.write(self._in_w, self._pending_in)
            except BlockingIOError:
                if (
                    len(self._pending_in) > 65536
                ):  # the program does not read: the rx buffer overflows
                    self._pending_in = self._pending_in[-65536:]
                return
            self._pending_in = self._pending_in[n:]

    def _stderr(self, data, state):
        # "\x00B"/"\x00I" are busy/idle marks, "\x00k"/"\x00K" interrupt char off/on;
        # anything else is console output (errors).
        buf = state.get("carry", b"") + data
        out = bytearray()
        i = 0
        while i < len(buf):
            if buf[i] == 0:
                if i + 1 >= len(buf):
                    break
                mark = buf[i + 1]
                i += 2
                if mark in b"kK":
                    self._kbd_intr = mark == ord("K")
                    continue
                self._busy = mark == ord("B")
                if self._booting:
                    self._booting = False
                    if self._held_intr:
                        self._held_intr = 0
                        self._from_host(b"\x03")
            else:
                out.append(buf[i])
                i += 1
        state["carry"] = buf[i:]
        if out:
            self._to_host(bytes(out))

    def _pump(self):
        state = {}
        while not self._stop.is_set():
            proc = self._proc
            fds = [self._master, proc.stdout.fileno(), proc.stderr.fileno()]
            wfds = []
            if self._pending_in:
                wfds.append(self._in_w)
            if self._backlog:
                wfds.append(self._master)
            r, w, _ = select.select(fds, wfds, [], 0.1)
            if self._in_w in w:
                self._flush_child()
            if self._master in w:
                self._flush_host()
            eof = False
            for fd in r:
                try:
                    data = os.read(fd, 4096)
                except BlockingIOError:
                    continue
                except OSError as e:
                    if e.errno == errno.EIO:  # no host has the pty open
                        time.sleep(0.05)
                        continue
                    raise
                if fd == self._master:
                    self._from_host(data)
                elif fd == proc.stdout.fileno():
                    if data:
                        self._to_host(data)
                    else:
                        eof = True
                else:
                    self._stderr(data, state)
            if eof or proc.poll() is not None:
                self._reboot(proc, state)

    def _reboot(self, proc, state):
        try:
            rest = proc.stdout.read() or b""
        except (BlockingIOError, ValueError):
            rest = b""
        if rest:
            self._to_host(rest)
        code = proc.wait()
        try:
            err = proc.stderr.read() or b""
        except (BlockingIOError, ValueError):
            err = b""
        self._stderr(err, state)
        state.clear()
        proc.stdout.close()
        proc.stderr.close()
        if self._stop.is_set():
            return
        if code == EXIT_SOFT_RAW:
            self._spawn("raw")
        elif code == EXIT_SOFT_FRIENDLY:
            self._spawn("friendly")
        else:
            # machine.reset() or a crash of the interpreter: a hard reset into main.py.
            if code != EXIT_MACHINE_RESET:
                self._to_host(
                    b"\r\nvboard: interpreter exited with status %d; resetting\r\n" % code
                )
                time.sleep(0.5)
            self._spawn("friendly")


def parse_uart(spec):
    n, sep, addr = spec.partition("=")
    if not sep or not n.isdigit() or not addr.startswith(("listen:", "connect:")):
        raise argparse.ArgumentTypeError("--uart takes N=listen:HOST:PORT or N=connect:HOST:PORT")
    return int(n), addr


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--flash", required=True, help="folder that is the board's flash (mounted at /)"
    )
    ap.add_argument("--chip", default="esp32c6", help="chip the virtual board stands in for")
    ap.add_argument("--uart", action="append", type=parse_uart, default=[], metavar="N=ADDR")
    ap.add_argument("--http", metavar="HOST:PORT", help="master: serve HTTP here (loopback)")
    ap.add_argument("--heapsize", help="MicroPython heap, e.g. 64k (the unix port's -X heapsize)")
    ap.add_argument("--link", help="also make this path a symlink to the pty")
    ap.add_argument("--log", help="append everything the board prints to this file")
    args = ap.parse_args(argv)
    # Stop on Ctrl-C or SIGTERM even when started from a shell that ignores SIGINT (background).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    log = open(args.log, "a") if args.log else None
    try:
        http = launch.parse_hostport(args.http) if args.http else None
    except ValueError as e:
        ap.error(str(e))
    board = VirtualBoard(
        args.flash, args.chip, dict(args.uart), heapsize=args.heapsize, log=log, http=http
    )
    port = board.start()
    if args.link:
        if os.path.islink(args.link):
            os.unlink(args.link)
        os.symlink(port, args.link)
    print(json.dumps({"port": port, "flash": board.flash, "chip": args.chip}), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        board.stop()
        if args.link and os.path.islink(args.link):
            os.unlink(args.link)
    return 0


if __name__ == "__main__":
    sys.exit(main())
