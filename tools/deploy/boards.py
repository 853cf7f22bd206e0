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
