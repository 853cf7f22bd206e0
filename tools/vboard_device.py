# Console of a virtual board (runs on the MicroPython unix port): friendly REPL, raw REPL, raw paste.
#
# tools/vboard.py starts one process of this per boot, stdin/stdout piped to a pseudo-terminal.
# It behaves as shared/runtime/pyexec.c does on an ESP32 (what mpremote is written against):
# - the flash folder is mounted at "/" (vfs.VfsPosix), sys.path is ['', '.frozen', '/lib'];
# - boot: boot.py always, main.py only when booting into the friendly REPL;
# - raw REPL: "\x01" enters it ("raw REPL; CTRL-B to exit\r\n>"), code ends with "\x04", the board
#   answers "OK", stdout, "\x04", error text, "\x04", ">"; "\x05A\x01" starts raw paste with
#   flow control (window size u16 little-endian, "\x01" per window consumed, "\x04" ends);
#   "\x04" on an empty line is a soft reset;
# - soft reset prints "MPY: soft reboot\r\n" and exits; the host starts a fresh process (fresh heap,
#   fresh sys.modules) in the mode given by ORGANBUS_VBOARD_MODE ("raw" or "friendly").
# The host turns a Ctrl-C that arrives while code runs into SIGINT (KeyboardInterrupt here), as a
# board's UART/USB interrupt character does; to know when code runs, this side writes "\x00B"
# (busy) and "\x00I" (idle) on stderr, which the host never shows. `micropython.kbd_intr(-1)`
# (mpremote's mount protocol sends raw bytes) turns that off on a board; here it writes "\x00k"
# ("\x00K" for back on) so the host passes 0x03 through as data.
import io
import os
import sys
import vfs

CHIP = os.getenv("ORGANBUS_VBOARD_CHIP") or "esp32c6"
FLASH = os.getenv("ORGANBUS_VBOARD_FLASH") or "."
BOARD_NAME = "organbus virtual board (MicroPython unix port) standing in for " + CHIP.upper()

EXIT_SOFT_RAW = 64  # exit status: soft reset, come back in the raw REPL
EXIT_SOFT_FRIENDLY = 65  # exit status: soft reset, come back in the friendly REPL (runs main.py)

_stdin = sys.stdin.buffer
_stdout = sys.stdout.buffer
_stderr = sys.stderr.buffer
_globals = {"__name__": "__main__"}
_PASTE_WINDOW = 512


class _MicroPython:
    """`micropython` with kbd_intr() told to the host (the unix port would die of SIGINT)."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def kbd_intr(self, c):
        _stderr.write(b"\x00K" if c == 3 else b"\x00k")


def _out(b):
    _stdout.write(b)


def _busy(flag):
    _stderr.write(b"\x00B" if flag else b"\x00I")


def _getc():
    # KeyboardInterrupt here is the host's SIGINT that crossed paths with the end of a program.
    try:
        b = _stdin.read(1)
    except KeyboardInterrupt:
        return 3
    if not b:
        raise SystemExit(0)  # the host went away
    return b[0]


def _exception_text(e):
    # Drop the frame of this file from the traceback, so it reads as the board's would.
    s = io.StringIO()
    sys.print_exception(e, s)
    lines = s.getvalue().split("\n")
    keep = [ln for ln in lines if __file__ not in ln or not ln.startswith("  File ")]
    return "\n".join(keep).encode()


def _execute(src, name, mode, mark=True):
    """Compile and run. Returns (reset, error text): reset is True when the code asked for a soft
    reset (SystemExit); the error text goes after stdout's end marker in the raw REPL."""
    if mark:
        _busy(True)
    try:
        exec(compile(src, name, mode), _globals)
    except SystemExit:
        return True, b""
    except BaseException as e:  # noqa: B036 (KeyboardInterrupt is reported, like pyexec)
        return False, _exception_text(e)
    finally:
        if mark:
            _busy(False)
    return False, b""


def _execute_friendly(src, name, mode, mark=True):
    reset, err = _execute(src, name, mode, mark)
    _out(err)
    return reset


def _run_file(path):
    try:
        with open(path) as f:
            src = f.read()
    except OSError:
        return None
    return _execute_friendly(src, path, "exec", False)


def _soft_reset(raw):
    _out(b"MPY: soft reboot\r\n")
    sys.exit(EXIT_SOFT_RAW if raw else EXIT_SOFT_FRIENDLY)


def _banner():
    v = sys.implementation.version
    _out(
        b'MicroPython v%d.%d.%d on vboard; %s\r\nType "help()" for more information.\r\n'
        % (v[0], v[1], v[2], BOARD_NAME.encode())
    )


def _raw_paste():
    # The host sends at most one window ahead; "\x01" grants another window.
    _out(b"R\x01" + bytes((_PASTE_WINDOW & 0xFF, _PASTE_WINDOW >> 8)) + b"\x01")
    buf = bytearray()
    remain = _PASTE_WINDOW
    while True:
        c = _getc()
        if c == 4 or c == 3:
            _out(b"\x04")
            if c == 3:
                _out(b"\x04KeyboardInterrupt\r\n\x04")
                return None
            break
        buf.append(c)
        remain -= 1
        if remain == 0:
            _out(b"\x01")
            remain = _PASTE_WINDOW
    reset, err = _execute(bytes(buf), "<stdin>", "exec")
    _out(b"\x04")
    _out(err)
    _out(b"\x04")
    return reset


def raw_repl():
    """Returns when the host leaves with Ctrl-B; soft resets exit the process."""
    while True:
        _out(b"raw REPL; CTRL-B to exit\r\n")
        reset_banner = False
        while not reset_banner:
            _out(b">")
            line = bytearray()
            while True:
                c = _getc()
                if c == 1:
                    if len(line) == 2 and line[0] == 5:
                        if line[1] == ord("A"):
                            if _raw_paste():
                                _soft_reset(True)
                            line = None
                        else:
                            _out(b"R\x00")
                            line = None
                    else:
                        reset_banner = True
                    break
                if c == 2:
                    _out(b"\r\n")
                    return
                if c == 3:
                    line = bytearray()
                elif c == 4:
                    _out(b"OK")
                    if not line:
                        _out(b"\r\n")
                        _soft_reset(True)
                    reset, err = _execute(bytes(line), "<stdin>", "exec")
                    _out(b"\x04")
                    _out(err)
                    _out(b"\x04")
                    if reset:
                        _soft_reset(True)
                    line = None
                    break
                else:
                    line.append(c)


def _readline(prompt):
    """Friendly-REPL line editor: returns the line, or a control code (int) that ends input."""
    _out(prompt)
    line = bytearray()
    while True:
        c = _getc()
        if c in (1, 2, 3, 4, 5):
            if c == 4 and line:
                continue
            return c
        if c == 13 or c == 10:
            _out(b"\r\n")
            return bytes(line)
        if c in (8, 127):
            if line:
                line = line[:-1]
                _out(b"\x08 \x08")
        elif c == 27:
            _getc()  # drop the two bytes of an arrow key's escape sequence
            _getc()
        elif c >= 32 or c == 9:
            line.append(c)
            _out(bytes((c,)))


def _paste_mode():
    _out(b"\r\npaste mode; Ctrl-C to cancel, Ctrl-D to finish\r\n=== ")
    buf = bytearray()
    while True:
        c = _getc()
        if c == 3:
            _out(b"\r\n")
            return
        if c == 4:
            _out(b"\r\n")
            break
        buf.append(c)
        if c == 13:
            _out(b"\r\n=== ")
        elif c != 10:
            _out(bytes((c,)))
    src = bytes(buf).replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if _execute_friendly(src, "<stdin>", "exec"):
        _soft_reset(False)


def friendly_repl():
    """Returns when the host asks for the raw REPL (Ctrl-A); soft resets exit the process."""
    _banner()
    while True:
        r = _readline(b">>> ")
        if r == 1:
            _out(b"\r\n")
            return
        if r == 2:
            _out(b"\r\n")
            _banner()
            continue
        if r == 3:
            _out(b"\r\n")
            continue
        if r == 4:
            _out(b"\r\n")
            _soft_reset(False)
        if r == 5:
            _paste_mode()
            continue
        src = r
        if src.rstrip().endswith(b":"):
            while True:
                more = _readline(b"... ")
                if isinstance(more, int):
                    src = b"" if more == 3 else src
                    break
                if not more.strip():
                    break
                src += b"\n" + more
        if src.strip():
            if _execute_friendly(src + b"\n", "<stdin>", "single"):
                _soft_reset(False)


def _mount_flash():
    vfs.umount("/")
    vfs.mount(vfs.VfsPosix(FLASH), "/")
    os.chdir("/")
    sys.path[:] = ["", ".frozen", "/lib"]


def main():
    # Firmware start-up: the host holds back a Ctrl-C until the first busy/idle mark, as a board
    # only takes its interrupt character once MicroPython runs.
    # Simulated hardware is part of this "firmware": import it before the flash becomes "/".
    for name in (os.getenv("ORGANBUS_VBOARD_PRELOAD") or "").split(","):
        if name:
            __import__(name)
    import micropython

    sys.modules["micropython"] = _MicroPython(micropython)
    _mount_flash()
    raw = os.getenv("ORGANBUS_VBOARD_MODE") == "raw"
    boot = True
    # Every step below sits inside the one try: the host turns a Ctrl-C into SIGINT from what it
    # last heard (busy or idle), so the KeyboardInterrupt may land just after the program it was
    # meant for has ended, anywhere up to the REPL's next read. It must never end the board
    # (an uncaught KeyboardInterrupt exits the unix port: a reboot mpremote did not ask for).
    while True:
        try:
            if boot:
                boot = False
                _busy(True)  # boot.py and main.py: a Ctrl-C interrupts them
                try:
                    if _run_file("boot.py"):
                        _soft_reset(raw)
                    if not raw and _run_file("main.py"):
                        _soft_reset(False)
                finally:
                    _busy(False)
            if raw:
                raw_repl()
            else:
                friendly_repl()
        except KeyboardInterrupt:
            continue  # an interrupt that crossed paths with the end of a program: same REPL again
        raw = not raw
