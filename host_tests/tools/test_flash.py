# tools/flash.py without a board: dry runs, firmware and port errors, board checks, role files.
import json
import os
import subprocess
import sys

import pytest

from support import ROOT, mpy_cross_exe

sys.path.append(os.path.join(ROOT, "tools"))
from deploy import base, boards, cli, firmware, install, probe, roles, verify  # noqa: E402

FLASH = os.path.join(ROOT, "tools", "flash.py")
C6_BOARD = {"name": "led_organ", "chip": "esp32c6", "min_micropython": [1, 28, 0]}
MPY_63 = (6, 3)


def run_flash(*args, env=None, timeout=60):
    return subprocess.run(
        [sys.executable, FLASH] + list(args),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=dict(os.environ, **(env or {})),
    )


def fake_image(path, chip_id=13):
    """The first 16 bytes of an ESP image header (magic 0xE9, chip id at 12..13) and padding."""
    head = bytes([0xE9, 3, 2, 0x20, 0, 0, 0, 0, 0xEE, 0, 0, 0, chip_id, 0, 0, 0])
    path.write_bytes(head + bytes(4096))
    return str(path)


def info(**kw):
    base = {
        "version": (1, 28, 0),
        "mpy": 6 | 3 << 8 | 11 << 10,  # v6.3, RV32IMC
        "machine": "Generic ESP32C6 module with ESP32C6",
        "build": "ESP32_GENERIC_C6",
        "platform": "esp32",
        "virtual": None,
        "mem_free": 200000,
        "has": {},
        "modules": [],
    }
    base.update(kw)
    return base


# -- dry run --------------------------------------------------------------------------------------


def test_dry_run_shows_esptool_and_mpremote_commands_and_touches_nothing(tmp_path):
    port = str(tmp_path / "no-such-port")
    r = run_flash("led", "--port", port, "--firmware", "fw.bin", "--dry-run")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "esptool --chip esp32c6 --port %s erase-flash" % port in out, out
    assert "--baud 460800 write-flash 0 fw.bin" in out, out
    assert "mpremote connect %s exec" % port in out, out
    assert "mpremote connect %s resume exec '<prepare>' + fs cp" % port in out, out
    assert ":/main.py" in out and ":/board.json" in out, out
    assert "mpy-cross -march=rv32imc" in out, out
    assert out.count("[dry-run]") >= 6, out
    assert not os.path.exists(port), "a dry run created the port path"
    assert "Traceback" not in r.stderr


def test_dry_run_lists_exactly_the_role_files():
    r = run_flash("led", "--port", "/dev/null-port", "--dry-run")
    assert r.returncode == 0, r.stderr
    compiled = [ln for ln in r.stdout.splitlines() if ln.startswith("   mpy-cross -march")]
    names = sorted(ln.split(" -s ")[1].split()[0] for ln in compiled)
    expected = sorted(d for _, d in roles.role_files("led")["modules"])
    assert names == expected, names
    assert not any(n.startswith("master/") or n in ("menu.py", "plan.py") for n in names), names


def test_dry_run_hides_wifi_secrets(tmp_path):
    r = run_flash(
        "master",
        "--port",
        "/dev/null-port",
        "--dry-run",
        env={"ORGANBUS_WIFI_SSID": "HomeNet", "ORGANBUS_WIFI_PASSWORD": "hunter2-secret"},
    )
    assert r.returncode == 0, r.stderr
    assert "hunter2-secret" not in r.stdout + r.stderr, "the password was printed"
    assert "<config.json: wifi>" in r.stdout and ":/config.json" in r.stdout, r.stdout


# -- firmware and port errors ---------------------------------------------------------------------


def test_firmware_against_a_missing_port_is_one_clear_error(tmp_path):
    fw = fake_image(tmp_path / "fw.bin")
    r = run_flash("led", "--port", str(tmp_path / "ttyACM9"), "--firmware", fw)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr, r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("flash.py: error: port "), r.stderr
    assert "does not exist" in err[0] and "--port" in err[0], err


def test_esptool_failing_on_a_port_is_reported_without_traceback(tmp_path):
    fw = fake_image(tmp_path / "fw.bin")
    notaport = tmp_path / "notaport"
    notaport.write_text("")
    r = run_flash("led", "--port", str(notaport), "--firmware", fw, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert "flash.py: error: esptool failed" in r.stderr, r.stderr
    assert "erase-flash" in r.stdout, "the esptool command is shown"


def test_firmware_for_another_chip_is_refused(tmp_path):
    fw = fake_image(tmp_path / "s3.bin", chip_id=9)
    with pytest.raises(base.FlashError, match="firmware for esp32s3 but this board is an esp32c6"):
        firmware.check_firmware_file(fw, "esp32c6")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"hello" * 10)
    with pytest.raises(base.FlashError, match="not an ESP firmware image"):
        firmware.check_firmware_file(str(junk), "esp32c6")
    with pytest.raises(base.FlashError, match="cannot read firmware"):
        firmware.check_firmware_file(str(tmp_path / "missing.bin"), "esp32c6")


def test_esptool_uses_v5_spelling_chip_and_offset_from_the_board():
    board = boards.load_board("speaker")
    erase, write = firmware.esptool_cmds(board, "/dev/ttyACM0", "fw.bin", 460800)
    assert erase[-3:] == ["--port", "/dev/ttyACM0", "erase-flash"], erase
    assert write[write.index("--chip") + 1] == "esp32c6"
    assert write[-3:] == ["write-flash", "0", "fw.bin"], write


# -- board checks ---------------------------------------------------------------------------------


def test_a_good_c6_passes():
    notes, runnable = probe.check_probe(info(), C6_BOARD, "rv32imc", "led", MPY_63)
    assert runnable and notes == [], notes


def test_wrong_chip_says_which_and_what_to_do():
    i = info(machine="Generic ESP32S3 module with ESP32S3", mpy=6 | 3 << 8 | 10 << 10)
    with pytest.raises(base.FlashError) as e:
        probe.check_probe(i, C6_BOARD, "rv32imc", "led", MPY_63)
    msg = str(e.value)
    assert "esp32s3" in msg and "esp32c6" in msg and "--firmware" in msg, msg


def test_old_micropython_is_refused_with_the_minimum():
    with pytest.raises(base.FlashError) as e:
        probe.check_probe(info(version=(1, 27, 0)), C6_BOARD, "rv32imc", "led", MPY_63)
    msg = str(e.value)
    assert "1.27.0" in msg and "1.28.0" in msg and "PROTOCOL.md" in msg and "--firmware" in msg


def test_mpy_version_and_arch_mismatches_are_refused():
    with pytest.raises(base.FlashError, match=r"loads \.mpy v5"):
        probe.check_probe(info(mpy=5 | 11 << 10), C6_BOARD, "rv32imc", "led", MPY_63)
    with pytest.raises(base.FlashError, match="native code is xtensawin"):
        probe.check_probe(info(mpy=6 | 3 << 8 | 10 << 10), C6_BOARD, "rv32imc", "led", MPY_63)
    with pytest.raises(base.FlashError, match="--arch x64"):
        probe.check_probe(info(mpy=6 | 3 << 8 | 2 << 10), C6_BOARD, "rv32imc", "led", MPY_63)


def test_a_virtual_board_gets_the_real_files_and_an_honest_note():
    i = info(
        machine="linux [GCC] version", platform="linux", virtual="esp32c6", mpy=6 | 3 << 8 | 2 << 10
    )
    notes, runnable = probe.check_probe(i, C6_BOARD, "rv32imc", "led", MPY_63)
    assert not runnable, "rv32imc native code cannot run on the x64 unix port"
    assert any("cannot run here" in n and "--arch x64" in n for n in notes), notes
    notes, runnable = probe.check_probe(i, C6_BOARD, "x64", "led", MPY_63)
    assert runnable and notes == [], notes


def test_stock_firmware_master_is_told_it_runs_one_port():
    board = boards.load_board("master")
    notes, _ = probe.check_probe(info(), board, "rv32imc", "master", MPY_63)
    assert any("ONE organ port" in n for n in notes), notes
    notes, _ = probe.check_probe(info(build="c6_master"), board, "rv32imc", "master", MPY_63)
    assert any("two organ ports" in n for n in notes), notes


def test_missing_firmware_modules():
    with pytest.raises(base.FlashError, match="no module 'neopixel'"):
        probe.check_externals(info(has={"neopixel": False}), {"neopixel": True})
    notes = probe.check_externals(info(has={"aiorepl": False}), {"aiorepl": False})
    assert notes and "mip install aiorepl" in notes[0], notes


def test_frozen_modules_are_not_copied():
    files = roles.role_files("master")
    frozen = install.frozen_in(info(modules=["organbus/frame", "master/app", "sys"]), files)
    assert sorted(frozen) == ["master/app.py", "organbus/frame.py"], frozen
    plan = install.compile_plan(files, "rv32imc", "/stage", frozen)
    dests = [d for _, _, _, d in plan]
    assert "/lib/organbus/frame.mpy" not in dests and "/lib/master/bus/body.mpy" in dests, dests


# -- which files a role needs ---------------------------------------------------------------------


def _closed(role):
    files = roles.role_files(role)
    dests = {d for _, d in files["modules"]}
    for src, dest in files["modules"]:
        modname = dest[:-3].replace("/", ".").replace(".__init__", "")
        for name, cond in roles._imports(src, modname):
            r = roles._resolve(name)
            if r:
                assert r[1] in dests, "%s imports %s, which is not deployed" % (dest, name)
    return dests


def test_role_files_follow_the_imports():
    led, speaker, master = _closed("led"), _closed("speaker"), _closed("master")
    core = {
        "organbus/" + m + ".py" for m in ("__init__", "crc16", "frame", "descriptor", "command")
    }
    for role, d in (("led", led), ("speaker", speaker), ("master", master)):
        assert core <= d, "%s lacks the core: %s" % (role, core - d)
    assert "organs/led.py" in led and not any(x.startswith("master/") for x in led)
    assert "organs/speaker.py" in speaker and "organs/led.py" not in speaker
    assert "master/app.py" in master and not any(x.startswith("organs/") for x in master)
    assert "organbus/menu.py" in master and "organbus/menu.py" not in led
    links = {"master/links/httpd.py", "master/links/mcp.py", "master/links/bodyproto.py"}
    assert links <= master, "the master's HTTP links would not be deployed: %s" % (links - master)
    net = {"master/net/__init__.py", "master/net/http.py"}
    assert net <= master, "the master's HTTP client would not be deployed: %s" % (net - master)


def test_voice_data_files_travel_with_the_speaker():
    if not os.path.isdir(os.path.join(ROOT, "organs", "voice")):
        pytest.skip("no voice engine in this tree")
    files = roles.role_files("speaker")
    data = {d for _, d in files["data"]}
    on_disk = {
        "organs/voice/" + f
        for f in os.listdir(os.path.join(ROOT, "organs", "voice"))
        if not f.endswith((".py", ".md")) and not f.startswith((".", "__"))
    }
    assert on_disk <= data, on_disk - data


def test_compiled_files_carry_the_c6_header(tmp_path):
    out = tmp_path / "crc16.mpy"
    r = subprocess.run(
        [
            mpy_cross_exe(),
            "-march=rv32imc",
            "-o",
            str(out),
            os.path.join(ROOT, "lib", "organbus", "crc16.py"),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    ver, sub, arch, bits = install.mpy_header(str(out))
    assert (ver, sub, arch, bits) == (6, 3, "rv32imc", 31), (ver, sub, arch, bits)
    assert base.mpy_cross_version() == MPY_63


def test_config_comes_from_options_or_environment(monkeypatch):
    args = cli.parse_args(["master", "--port", "p", "--token", "t0k"])
    monkeypatch.setenv("ORGANBUS_WIFI_SSID", "Net")
    monkeypatch.setenv("ORGANBUS_WIFI_PASSWORD", "pw")
    cfg = install.config_json(args)
    assert cfg == {"wifi": {"ssid": "Net", "password": "pw"}, "http": {"token": "t0k"}}, cfg
    monkeypatch.delenv("ORGANBUS_WIFI_SSID")
    assert install.config_json(cli.parse_args(["master", "--port", "p"])) is None
    path = install._write_config(cfg)
    try:
        assert oct(os.stat(path).st_mode & 0o777) == "0o600"
        assert not path.startswith(ROOT), "secrets must not be written into the working tree"
        assert json.load(open(path)) == cfg
    finally:
        os.remove(path)


def test_a_port_without_micropython_is_one_clear_error(tmp_path):
    notaport = tmp_path / "ttyS-not-a-board"
    notaport.write_text("")
    r = run_flash("led", "--port", str(notaport))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr, r.stderr
    assert "no MicroPython REPL answered on %s" % notaport in r.stderr, r.stderr
    assert "--firmware" in r.stderr, r.stderr


def test_master_address_comes_from_its_event_lines():
    assert verify._master_address([{"event": "boot"}]) == (None, None)
    sim = [{"event": "http", "host": "127.0.0.1", "port": 8080}]
    assert verify._master_address(sim) == ("127.0.0.1", 8080)
    board = [{"event": "http", "host": "0.0.0.0", "port": 80}]
    assert verify._master_address(board) == (None, 80), "0.0.0.0 is not an address to call"
    board.append({"event": "wifi", "connected": True, "ip": "192.168.1.40"})
    assert verify._master_address(board) == ("192.168.1.40", 80)


@pytest.mark.parametrize("role", ["master", "led", "speaker"])
def test_every_role_has_a_complete_dry_run(role):
    r = run_flash(role, "--port", "/dev/ttyACM7", "--firmware", "fw.bin", "--dry-run")
    assert r.returncode == 0 and not r.stderr, r.stderr
    board = boards.load_board(role)
    out = r.stdout
    assert "boards/%s/main.py" % board["name"] in out, out
    files = roles.role_files(role, board)
    for _, dest in files["modules"]:
        assert " -s %s " % dest in out, "%s is not compiled in the dry run" % dest
    for _, dest in files["data"]:
        assert dest in out, "%s is not copied in the dry run" % dest
    assert "soft-reset into main.py" in out, out


def test_master_options_are_refused_for_an_organ():
    r = run_flash("led", "--port", "/dev/ttyACM7", "--wifi-ssid", "Net", "--dry-run")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "are for the master" in r.stderr, r.stderr
