# Board checks: a role's boards/<board>/board.json read and held to the board rules.
import json
import os

from deploy import base
from deploy.base import CHIP_ARCH, FlashError, ROLES, ROOT


def board_dir(role):
    if role not in ROLES:
        raise FlashError("unknown role %r: choose one of %s" % (role, ", ".join(ROLES)))
    return os.path.join(base.BOARDS, ROLES[role])  # base.BOARDS: tests swap it


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


DEVKITS = os.path.join(ROOT, "boards")  # where the development-board fact files are


def devkit(board):
    """The development board's facts a board file refers to ("devkit": a file in boards/):
    header, strapping, forbidden and on-board pins, each with why. Raises FlashError."""
    name = board.get("devkit")
    if not name:
        raise FlashError("board file %r names no devkit (the pin facts file)" % board.get("name"))
    path = os.path.join(DEVKITS, name)
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise FlashError("cannot read the devkit facts %s: %s" % (os.path.relpath(path, ROOT), e))


def forbidden_pins(board, facts=None):
    """{GPIO: why} a board of this role must leave alone: the devkit's forbidden pins, and for
    the master its strapping pins too (PROTOCOL.md section 1)."""
    facts = facts or devkit(board)
    out = {int(k): v for k, v in facts.get("forbidden_pins", {}).items()}
    if board.get("role") == "master":
        for k, v in facts.get("strapping_pins", {}).items():
            out.setdefault(int(k), v + ": the master leaves strapping pins alone")
    return out


def board_pins(board):
    """{pin number: [names]} over `pins` and `uarts` (a UART's pins are named uartN_tx/rx)."""
    uses = {}
    for name, pin in board.get("pins", {}).items():
        if pin is not None:
            uses.setdefault(pin, []).append(name)
    for n, u in board.get("uarts", {}).items():
        for end in ("tx", "rx"):
            pin = u.get(end)
            name = "uart%s_%s" % (n, end)
            if pin is not None:
                uses.setdefault(pin, []).append(name)
    return uses


def check_board(board):
    """Every rule a board file must keep; returns the problems (empty: fine)."""
    p = []
    for key in ("name", "role", "devkit", "chip", "arch", "flash_offset", "min_micropython"):
        if key not in board:
            p.append("missing key %r" % key)
    for key in ("uarts", "pins"):
        if key not in board:
            p.append("missing key %r" % key)
    if p:
        return p
    try:
        facts = devkit(board)
    except FlashError as e:
        return [str(e)]
    role, chip = board["role"], board["chip"]
    if role not in ROLES:
        p.append("role %r is not one of %s" % (role, ", ".join(ROLES)))
    if chip != facts.get("chip"):
        p.append("chip %r is not the devkit's %r" % (chip, facts.get("chip")))
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
            if "uart%s_%s" % (n, end) in board["pins"]:
                p.append("UART %s %s is listed in pins too: a UART's pins live in uarts" % (n, end))
    uses = board_pins(board)
    header = set(facts.get("header_pins", ()))
    forbidden = forbidden_pins(board, facts)
    strapping = {int(k) for k in facts.get("strapping_pins", {})}
    onboard_facts = {int(k) for k in facts.get("onboard_pins", {})}
    onboard = set()
    for name in board.get("onboard", ()):
        pin = board["pins"].get(name)
        if pin not in onboard_facts:
            p.append("pin %r (GPIO%s) is not an on-board part of the devkit" % (name, pin))
        else:
            onboard.add(pin)
    for pin, names in sorted(uses.items(), key=lambda kv: str(kv[0])):
        label = "GPIO%s (%s)" % (pin, ", ".join(names))
        if not isinstance(pin, int) or pin < 0:
            p.append("%s is not a GPIO number" % label)
            continue
        if len(names) > 1:
            p.append("%s is used twice" % label)
        if pin not in header:
            p.append("%s is not on the board's header" % label)
        if pin in forbidden:
            p.append("%s is forbidden: %s" % (label, forbidden[pin]))
        elif pin in strapping and pin not in onboard:
            p.append("%s is a strapping pin" % label)
    if role == "speaker":
        for name in ("i2s_bclk", "i2s_lrc", "i2s_din"):
            if not isinstance(board["pins"].get(name), int):
                p.append("the speaker has no %s pin (MAX98357 %s)" % (name, name[4:].upper()))
    if role == "led" and not isinstance(board["pins"].get("led"), int):
        p.append("the LED organ has no led pin")
    return p
