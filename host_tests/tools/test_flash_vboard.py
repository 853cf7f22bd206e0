# tools/flash.py against a virtual board (tools/vboard.py) through the real mpremote.
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time


from support import ROOT, free_port

sys.path.append(os.path.join(ROOT, "tools"))
from deploy import base, install, roles, verify  # noqa: E402
from vboard import VirtualBoard  # noqa: E402

FLASH = os.path.join(ROOT, "tools", "flash.py")


def run_flash(*args, timeout=180):
    # A generous watch window: flash.py stops watching as soon as it has seen what it waits for.
    cmd = [sys.executable, FLASH] + list(args) + ["--verify-seconds", "30"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def mpremote(port, *args, timeout=60):
    return subprocess.run(
        [base._exe("mpremote"), "connect", port] + list(args),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def landed(root):
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            full = os.path.join(d, n)
            out[os.path.relpath(full, root).replace(os.sep, "/")] = full
    return out


def json_after(text, marker):
    for line in text.splitlines():
        if marker in line:
            return json.loads(line.split(marker, 1)[1])
    raise AssertionError("no %r line in:\n%s" % (marker, text))


def led_descriptor():
    sys.path[:0] = [os.path.join(ROOT, "tools", "shim"), os.path.join(ROOT, "lib"), ROOT]
    from organs.led import led_descriptor as make

    return make()


# -- the virtual board itself ---------------------------------------------------------------------


def test_vboard_speaks_the_raw_repl_mpremote_expects(tmp_path):
    with VirtualBoard(tmp_path / "flash") as vb:
        r = mpremote(vb.port, "exec", "import sys; print('hello', sys.path)")
        assert r.returncode == 0 and "hello ['', '.frozen', '/lib']" in r.stdout, (
            r.stdout + r.stderr
        )
        assert vb.boots == 2, "mpremote soft-resets on connect: a fresh process (%d)" % vb.boots
        # Errors travel on the raw REPL's error channel: mpremote exits 1 with the traceback.
        r = mpremote(vb.port, "resume", "exec", "1/0")
        assert r.returncode == 1 and "ZeroDivisionError" in r.stdout + r.stderr, r.stdout + r.stderr
        # Files land in the flash folder, which is "/" on the board.
        r = mpremote(
            vb.port,
            "resume",
            "fs",
            "mkdir",
            ":lib",
            "+",
            "exec",
            "open('/lib/x.txt','w').write('42')",
        )
        assert r.returncode == 0, r.stderr
        assert (tmp_path / "flash" / "lib" / "x.txt").read_text() == "42"
        # A running main.py is interrupted by Ctrl-C, as on a board.
        (tmp_path / "flash" / "main.py").write_text(
            "import time\nwhile True:\n    time.sleep(0.1)\n"
        )
        r = mpremote(
            vb.port, "resume", "exec", "print('soft')", "+", "soft-reset", "+", "exec", "print(2+2)"
        )
        assert r.returncode == 0 and "4" in r.stdout, r.stdout + r.stderr
        r = mpremote(vb.port, "exec", "print('after a running main.py')")
        assert r.returncode == 0 and "after a running main.py" in r.stdout, r.stdout + r.stderr


def test_a_ctrl_c_while_the_board_boots_never_reboots_it(tmp_path):
    # mpremote's first bytes are "\r\x03" (interrupt whatever runs). Sent while the board still
    # boots, the host holds the Ctrl-C and turns it into SIGINT at the board's first busy mark;
    # by then the board may have left boot.py/main.py behind. The KeyboardInterrupt used to land
    # outside any handler and end the interpreter: an extra boot, the flaky "a fresh process (3)".
    for i in range(8):
        with VirtualBoard(tmp_path / ("flash%d" % i)) as vb:
            fd = os.open(vb.port, os.O_RDWR | os.O_NOCTTY)
            try:
                os.write(fd, b"\r\x03")
                out = b""
                end = time.monotonic() + 30
                while time.monotonic() < end and out.count(b">>> ") < 2:
                    r, _, _ = select.select([fd], [], [], 0.2)
                    if r:
                        out += os.read(fd, 4096)
                time.sleep(0.3)  # a late interrupt would have ended the process by now
                out += os.read(fd, 4096) if select.select([fd], [], [], 0.1)[0] else b""
            finally:
                os.close(fd)
            assert b"interpreter exited" not in out, out[-300:]
            assert vb.boots == 1, "trial %d: %d boots: %r" % (i, vb.boots, out[-300:])


def test_mip_installs_the_protocol_core_from_the_working_copy(tmp_path):
    with VirtualBoard(tmp_path / "flash") as vb:
        r = mpremote(vb.port, "mip", "install", os.path.join(ROOT, "package.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    with open(os.path.join(ROOT, "package.json")) as f:
        urls = json.load(f)["urls"]
    core = os.path.join(ROOT, "lib", "organbus")
    lib = sorted(
        "organbus/" + n for n in os.listdir(core) if n.endswith(".py") and n != "manifest.py"
    )
    assert sorted(dest for dest, _ in urls) == lib, "package.json must list every lib/organbus/*.py"
    for dest, src in urls:
        got = (tmp_path / "flash" / "lib" / dest).read_bytes()
        assert got == open(os.path.join(ROOT, src), "rb").read(), dest


# -- deploying ------------------------------------------------------------------------------------


def test_deploy_led_lands_c6_mpy_files_and_removes_stale_ones(tmp_path):
    fl = tmp_path / "flash"
    (fl / "lib" / "organs").mkdir(parents=True)
    (fl / "lib" / "organbus").mkdir(parents=True)
    (fl / "lib" / "organbus" / "frame.py").write_text(
        "raise ImportError('stale source shadows frame.mpy')\n"
    )
    (fl / "lib" / "organs" / "gone.mpy").write_bytes(b"M\x06\x00\x1f")
    (fl / "lib" / "keepme.txt").write_text("not ours")
    with VirtualBoard(fl) as vb:
        r = run_flash("led", "--port", vb.port)
    assert r.returncode == 0, r.stdout + r.stderr
    files = roles.role_files("led")
    expected = {"main.py", "board.json", "settings.json", "lib/keepme.txt"}
    expected |= {"lib/" + d[:-3] + ".mpy" for _, d in files["modules"]}
    got = landed(fl)
    assert set(got) == expected, sorted(set(got) ^ expected)
    native = []
    for name, path in got.items():
        if name.endswith(".mpy"):
            ver, sub, arch, bits = install.mpy_header(path)
            assert ver == 6 and bits <= 31, "%s is not for a 32-bit board: %r" % (name, (ver, bits))
            assert arch in (None, "rv32imc"), "%s has %s native code" % (name, arch)
            native += [name] if arch else []
    assert "lib/organbus/crc16.mpy" in native, (
        "the viper CRC must be rv32imc machine code: %s" % native
    )
    src = os.path.join(ROOT, "boards", "led_organ")
    assert open(got["main.py"], "rb").read() == open(os.path.join(src, "main.py"), "rb").read()
    assert json.load(open(got["board.json"])) == json.load(open(os.path.join(src, "board.json")))
    assert "cannot run here" in r.stdout and "skipped" in r.stdout, r.stdout


def test_deployed_led_runs_and_its_descriptor_comes_out_of_its_uart(tmp_path):
    uart = free_port()
    with VirtualBoard(tmp_path / "flash", uarts={1: "listen:127.0.0.1:%d" % uart}) as vb:
        r = run_flash(
            "led", "--port", vb.port, "--arch", "x64", "--uart-port", "socket://127.0.0.1:%d" % uart
        )
    assert r.returncode == 0, r.stdout + r.stderr
    want = led_descriptor()
    assert json_after(r.stdout, "descriptor (built on the board): ") == want, r.stdout
    assert json_after(r.stdout, "descriptor (read off the UART): ") == want, r.stdout
    assert json_after(r.stdout, "console: ") == {"event": "boot", "module_id": "LED_001"}
    crc = landed(tmp_path / "flash")["lib/organbus/crc16.mpy"]
    assert install.mpy_header(crc)[2] == "x64", "--arch x64: the viper CRC is x64 machine code here"


def test_deployed_master_answers_status_with_its_token(tmp_path):
    http = free_port()
    with VirtualBoard(tmp_path / "flash", http=("127.0.0.1", http)) as vb:
        r = run_flash("master", "--port", vb.port, "--arch", "x64", "--token", "s3cret-token")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json_after(r.stdout, "console: ")["event"] == "boot", r.stdout
    status = json_after(r.stdout, "status: ")
    assert status["protocol"] == 3 and "organs" in status, status
    cfg = json.load(open(tmp_path / "flash" / "config.json"))
    assert cfg == {"http": {"token": "s3cret-token"}}, cfg
    assert "s3cret-token" not in r.stdout, "the token was printed"
    leaked = subprocess.run(
        ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True
    )
    assert "config.json" not in leaked.stdout, "a config.json appeared in the working tree"


def test_mount_runs_the_role_from_the_working_tree(tmp_path):
    uart = free_port()
    with VirtualBoard(tmp_path / "flash", uarts={1: "listen:127.0.0.1:%d" % uart}) as vb:
        p = subprocess.Popen(
            [sys.executable, FLASH, "led", "--port", vb.port, "--mount"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        out = b""
        frames = []
        try:
            end = time.monotonic() + 60
            while time.monotonic() < end and b'"LED_001"}' not in out:
                r, _, _ = select.select([p.stdout], [], [], 0.5)
                if r:
                    chunk = os.read(p.stdout.fileno(), 4096)
                    if not chunk:
                        break
                    out += chunk
            assert b'{"event": "boot", "module_id": "LED_001"}' in out, out.decode()
            with socket.create_connection(("127.0.0.1", uart), timeout=5) as s:
                s.settimeout(0.5)
                raw = b""
                end = time.monotonic() + 6
                while time.monotonic() < end and not any(t == 1 for t, _ in frames):
                    try:
                        raw += s.recv(1024)
                    except socket.timeout:
                        pass
                    frames = verify._decode_frames(raw)
        finally:
            p.terminate()
            p.wait(10)
    assert not any(n.endswith(".mpy") for n in landed(tmp_path / "flash")), "mount copies no code"
    descs = [payload for t, payload in frames if t == 1]
    assert descs and verify.describe(descs[0]) == led_descriptor(), frames


def test_vboard_command_line_serves_a_port_until_interrupted(tmp_path):
    p = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "tools", "vboard.py"), "--flash", str(tmp_path / "f")],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        line = p.stdout.readline()
        info = json.loads(line)
        assert info["chip"] == "esp32c6" and info["port"].startswith("/dev/"), line
        r = mpremote(info["port"], "exec", "import vboard_device; print(vboard_device.CHIP)")
        assert r.returncode == 0 and r.stdout.strip() == "esp32c6", r.stdout + r.stderr
    finally:
        p.send_signal(signal.SIGINT)
        assert p.wait(10) == 0, "vboard.py did not stop cleanly on Ctrl-C"


def test_deployed_speaker_carries_its_voice_data_and_offers_what_it_has(tmp_path):
    uart = free_port()
    with VirtualBoard(tmp_path / "flash", uarts={1: "listen:127.0.0.1:%d" % uart}) as vb:
        r = run_flash(
            "speaker",
            "--port",
            vb.port,
            "--arch",
            "x64",
            "--uart-port",
            "socket://127.0.0.1:%d" % uart,
        )
    assert r.returncode == 0, r.stdout + r.stderr
    got = landed(tmp_path / "flash")
    for src, dest in roles.role_files("speaker")["data"]:
        assert open(got["lib/" + dest], "rb").read() == open(src, "rb").read(), dest
    built = json_after(r.stdout, "descriptor (built on the board): ")
    wire = json_after(r.stdout, "descriptor (read off the UART): ")
    assert built == wire, "the organ sent another descriptor than its code builds"
    names = [c["name"] for c in wire["capabilities"]]
    assert wire["module_type"] == "speaker" and "chime" in names, names
    voice = any(d.startswith("organs/voice/") for _, d in roles.role_files("speaker")["modules"])
    assert ("speak" in names) == voice, "speak offered %s, voice deployed %s" % (names, voice)


def test_firmware_flow_calls_esptool_then_waits_for_the_repl(tmp_path):
    # esptool cannot write a virtual board: a stand-in `esptool` module records its arguments
    # (python -m esptool finds it first on PYTHONPATH); everything after it is real.
    fake = tmp_path / "fake" / "esptool"
    fake.mkdir(parents=True)
    log = tmp_path / "esptool.log"
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text(
        "import sys\nopen(%r, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n" % str(log)
    )
    fw = tmp_path / "fw.bin"
    fw.write_bytes(bytes([0xE9, 3, 2, 0x20, 0, 0, 0, 0, 0xEE, 0, 0, 0, 13, 0, 0, 0]) + bytes(64))
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "fake"))
    with VirtualBoard(tmp_path / "flash") as vb:
        r = subprocess.run(
            [sys.executable, FLASH, "led", "--port", vb.port, "--firmware", str(fw), "--no-verify"],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=ROOT,
            env=env,
        )
    assert r.returncode == 0, r.stdout + r.stderr
    calls = log.read_text().splitlines()
    assert calls == [
        "--chip esp32c6 --port %s erase-flash" % vb.port,
        "--chip esp32c6 --port %s --baud 460800 write-flash 0 %s" % (vb.port, fw),
    ], calls
    assert "wait for the MicroPython REPL" in r.stdout, r.stdout
    assert (tmp_path / "flash" / "main.py").exists(), "the deploy did not follow the firmware"
