# The device code type-checks against the ESP32-C6 MicroPython stubs (tools/typecheck.py, mypy).
import os
import sys

from support import ROOT

sys.path.append(os.path.join(ROOT, "tools"))
import typecheck  # noqa: E402


def test_device_code_type_checks_against_the_c6_stubs():
    files = typecheck.device_files()
    assert any(f.endswith(os.path.join("boards", "c6_master", "main.py")) for f in files), files
    p = typecheck.run()
    assert p.returncode == 0, "mypy found problems in the device code:\n" + p.stdout + p.stderr
    assert "Success: no issues found in %d source files" % len(files) in p.stdout, p.stdout


def test_a_typo_in_a_machine_call_is_caught(tmp_path):
    bad = tmp_path / "bad_board.py"
    bad.write_text(
        "import machine\n"
        "uart = machine.UART(1, baudrat=115200, tx=18, rx=19)\n"
        "led = machine.Pin(8, machine.Pin.OUTT)\n"
        "i2s = machine.I2S(0, sck=machine.Pin(21), ws=machine.Pin(22), sd=machine.Pin(23),\n"
        "                  mode=machine.I2S.TX, bits=16, format=machine.I2S.MONO, rate=11025,\n"
        "                  ibuf=8192)\n"
    )
    p = typecheck.run([str(bad)])
    assert p.returncode == 1, p.stdout
    assert 'Unexpected keyword argument "baudrat"' in p.stdout, p.stdout
    assert '"OUTT"' in p.stdout, p.stdout
    assert ":4:" not in p.stdout, "a correct I2S call was flagged:\n" + p.stdout
