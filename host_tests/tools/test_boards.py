# Board definitions: the rules every boards/*/board.json keeps, and the checker that enforces them.
import ast
import copy
import json
import os
import re

import pytest

from support import ROOT

import sys

sys.path.append(os.path.join(ROOT, "tools"))
from deploy import base, boards, roles  # noqa: E402

BOARDS = {role: os.path.join(ROOT, "boards", name) for role, name in base.ROLES.items()}
MASTER_FORBIDDEN = {4, 5, 8, 9, 12, 13, 15, 16, 17}  # PROTOCOL.md section 1
C6_STRAPPING = {8, 9, 15}


def load(role):
    with open(os.path.join(BOARDS[role], "board.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("role", sorted(BOARDS))
def test_board_file_keeps_every_rule(role):
    board = load(role)
    assert boards.check_board(board) == [], "boards/%s/board.json: %s" % (
        board.get("name"),
        boards.check_board(board),
    )
    assert board["role"] == role and board["name"] == os.path.basename(BOARDS[role])
    assert board["chip"] == "esp32c6" and board["arch"] == "rv32imc" and board["flash_offset"] == 0
    assert tuple(board["min_micropython"]) >= (1, 28, 0)
    assert isinstance(board["settings"], dict)


@pytest.mark.parametrize("role", sorted(BOARDS))
def test_no_pin_twice_and_every_uart_has_tx_and_rx(role):
    board = load(role)
    seen = {}
    for name, pin in board["pins"].items():
        if pin is None:
            continue
        assert pin not in seen, "GPIO%d is both %s and %s" % (pin, seen[pin], name)
        seen[pin] = name
    assert board["uarts"], "%s has no UART" % role
    for n, u in board["uarts"].items():
        assert isinstance(u.get("tx"), int) and isinstance(u.get("rx"), int), "UART %s: %r" % (n, u)
        assert u["tx"] != u["rx"], "UART %s uses one pin for TX and RX" % n
        assert "uart%s_tx" % n not in board["pins"], "UART %s TX listed twice (pins)" % n
        assert "uart%s_rx" % n not in board["pins"], "UART %s RX listed twice (pins)" % n
        assert u.get("baudrate", 115200) == 115200, "PROTOCOL.md section 1: 115200 8N1"


def test_master_leaves_forbidden_and_strapping_pins_alone():
    board = load("master")
    used = set(boards.board_pins(board))
    assert not used & MASTER_FORBIDDEN, "master uses forbidden GPIO %s" % (used & MASTER_FORBIDDEN)
    assert not used & C6_STRAPPING, "master uses strapping GPIO %s" % (used & C6_STRAPPING)
    assert MASTER_FORBIDDEN <= set(boards.forbidden_pins(board)), "forbidden list incomplete"
    assert set(board["uarts"]) == {"0", "1"}, "the master has two organ ports"


@pytest.mark.parametrize("role", ["led", "speaker"])
def test_organs_keep_usb_console_and_jtag_free(role):
    board = load(role)
    used = set(boards.board_pins(board))
    assert not used & {4, 5, 12, 13, 16, 17}, "%s uses %s" % (role, used & {4, 5, 12, 13, 16, 17})
    onboard = {board["pins"][name] for name in board.get("onboard", ())}
    assert onboard <= {int(p) for p in boards.devkit(board)["onboard_pins"]}, onboard
    assert used & C6_STRAPPING <= onboard, "%s uses strapping pins not wired on the board" % role


def test_speaker_has_max98357_wiring():
    pins = load("speaker")["pins"]
    i2s = [pins.get(k) for k in ("i2s_bclk", "i2s_lrc", "i2s_din")]
    assert all(isinstance(p, int) for p in i2s), "BCLK/LRC/DIN: %r" % i2s
    assert len(set(i2s)) == 3, "BCLK/LRC/DIN share a pin: %r" % i2s
    assert "amp_sd" in pins, "the speaker says where SD goes (null = left on its pull-up)"


def test_led_has_its_light():
    board = load("led")
    assert isinstance(board["pins"]["led"], int)
    assert board["settings"]["led_kind"] in ("ws2812", "gpio")


# -- the checker catches what it must -----------------------------------------------------------


def broken(role, mutate):
    board = copy.deepcopy(load(role))
    mutate(board)
    return boards.check_board(board)


def test_checker_refuses_a_pin_used_twice():
    def m(b):
        b["pins"]["i2s_din"] = b["pins"]["i2s_bclk"]

    problems = broken("speaker", m)
    assert any("used twice" in p for p in problems), problems


def test_checker_refuses_a_uart_without_rx():
    def m(b):
        del b["uarts"]["1"]["rx"]

    assert any("has no RX" in p for p in broken("led", m)), broken("led", m)


@pytest.mark.parametrize("pin", sorted(MASTER_FORBIDDEN))
def test_checker_refuses_forbidden_pins_on_the_master(pin):
    def m(b):
        b["uarts"]["1"]["tx"] = pin

    problems = broken("master", m)
    assert any(("GPIO%d" % pin) in p and "forbidden" in p for p in problems), problems


def test_checker_refuses_a_strapping_pin_on_an_organ():
    def m(b):
        b["pins"]["i2s_din"] = 9

    problems = broken("speaker", m)
    assert any("GPIO9" in p and "strapping" in p for p in problems), problems


def test_checker_refuses_a_speaker_without_din():
    def m(b):
        b["pins"]["i2s_din"] = None

    problems = broken("speaker", m)
    assert any("i2s_din" in p for p in problems), problems


def test_checker_refuses_old_micropython_and_wrong_arch():
    def m(b):
        b["min_micropython"] = [1, 27, 0]
        b["arch"] = "xtensawin"

    problems = broken("led", m)
    assert any("1.28.0" in p for p in problems) and any("arch" in p for p in problems), problems


def test_flash_refuses_a_broken_board_file(tmp_path, monkeypatch):
    bad = load("led")
    bad["pins"]["led"] = 13
    d = tmp_path / "boards" / "led_organ"
    d.mkdir(parents=True)
    (d / "board.json").write_text(json.dumps(bad))
    monkeypatch.setattr(base, "BOARDS", str(tmp_path / "boards"))
    with pytest.raises(base.FlashError, match="GPIO13"):
        boards.load_board("led")


# -- the master's firmware definition -----------------------------------------------------------


def test_master_board_definition_turns_the_uart_repl_off():
    d = BOARDS["master"]
    h = open(os.path.join(d, "mpconfigboard.h")).read()
    assert re.search(r"#define\s+MICROPY_HW_ENABLE_UART_REPL\s+\(?0\)?", h), "UART REPL stays on"
    cmake = open(os.path.join(d, "mpconfigboard.cmake")).read()
    assert "set(IDF_TARGET esp32c6)" in cmake and "MICROPY_FROZEN_MANIFEST" in cmake
    sdk = open(os.path.join(d, "sdkconfig.board")).read()
    assert "CONFIG_ESP_CONSOLE_USB_SERIAL_JTAG=y" in sdk, "console must stay on USB-Serial-JTAG"
    # sys.implementation._build of a BOARD_DIR build is the folder name: the master's main.py
    # turns on its second organ port only for builds listed here.
    assert os.path.basename(d) in load("master")["two_port_builds"]


def _manifest_calls(path):
    tree = ast.parse(open(path).read(), path)
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = [a.value for a in node.args if isinstance(a, ast.Constant)]
            calls.append(
                (
                    node.func.id,
                    args,
                    {k.arg: getattr(k.value, "value", None) for k in node.keywords},
                )
            )
    return calls


def test_manifests_freeze_what_each_board_runs():
    calls = {role: _manifest_calls(os.path.join(d, "manifest.py")) for role, d in BOARDS.items()}
    for role, cs in calls.items():
        names = [c[0] for c in cs]
        assert "include" in names, "%s manifest does not include the port's own manifest" % role
    master = calls["master"]
    assert ("require", ["aiorepl"], {}) in master, "the master freezes aiorepl"
    assert ("include", ["../../master/manifest.py"], {}) in master, "the master's own manifest"
    own = _manifest_calls(os.path.join(ROOT, "master", "manifest.py"))
    pk = [c for c in own if c[0] == "package" and c[1] == ["master"]]
    assert pk, "the master freezes the master package"
    assert any(c[0] == "package" and c[1] == ["organs"] for c in calls["led"]), "led freezes organs"
    # The speaker's organs package stays on the filesystem (voice data files, subpackage).
    assert not any(c[0] == "package" for c in calls["speaker"]), "speaker must not freeze organs"
    # Each manifest names the protocol core: every lib/ module a role imports is frozen.
    for role, cs in calls.items():
        frozen = set()
        for name, args, kw in cs:
            if name == "module":
                frozen.add(args[0])
        need = {d for s, d in roles.role_files(role)["modules"] if "/" not in d}
        assert need <= frozen, "%s manifest misses %s" % (role, need - frozen)


def test_frozen_code_has_no_float_literal_beyond_f32():
    # The C6's floats are f32: freezing a module (mpy-tool.py, a firmware build of these
    # manifests) packs each float constant with struct "<f" and fails on one beyond F32_MAX
    # ("float too large to pack"), where loading the same .mpy reads it as inf. Seen building
    # the RV32 image with the master frozen: plan.py's 1e300 and descriptor.py's f32 overflow.
    import struct

    bad = []
    for top in ("lib/organbus", "master", "organs"):
        for folder, _, names in os.walk(os.path.join(ROOT, top)):
            for name in sorted(n for n in names if n.endswith(".py")):
                path = os.path.join(folder, name)
                for node in ast.walk(ast.parse(open(path).read(), path)):
                    if isinstance(node, ast.Constant) and type(node.value) is float:
                        try:
                            struct.pack("<f", node.value)
                        except OverflowError:
                            bad.append(
                                "%s:%d %r" % (os.path.relpath(path, ROOT), node.lineno, node.value)
                            )
    assert not bad, "float literals a frozen f32 build refuses: %s" % bad


# -- the DevKitC-1 facts live in one file ---------------------------------------------------------


def test_devkit_facts_are_in_one_file_and_each_pin_once_per_board_file():
    facts = {"header_pins", "strapping_pins", "forbidden_pins", "forbidden_why", "onboard_pins"}
    for role in sorted(BOARDS):
        board = load(role)
        assert not facts & set(board), "%s copies devkit facts: %s" % (role, facts & set(board))
        assert board["devkit"] == "esp32c6_devkitc1.json", role
        text = open(os.path.join(BOARDS[role], "board.json")).read()
        for pin, names in boards.board_pins(board).items():
            assert len(names) == 1, "%s: GPIO%d listed as %s" % (role, pin, names)
        assert text.count('"tx"') == len(board["uarts"]), role
    kit = json.load(open(os.path.join(ROOT, "boards", "esp32c6_devkitc1.json")))
    assert set(kit["strapping_pins"]) == {"8", "9", "15"}, kit["strapping_pins"]
    assert {4, 5, 12, 13, 15, 16, 17} == {int(k) for k in kit["forbidden_pins"]}, kit


def test_checker_refuses_a_uart_pin_listed_twice_and_a_missing_devkit():
    def twice(b):
        b["pins"]["uart1_tx"] = b["uarts"]["1"]["tx"]

    assert any("listed in pins too" in p for p in broken("led", twice)), broken("led", twice)

    def nokit(b):
        b["devkit"] = "no-such-kit.json"

    assert any("no-such-kit.json" in p for p in broken("led", nokit)), broken("led", nokit)
