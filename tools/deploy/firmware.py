# The firmware step: an ESP image checked for its chip, written with esptool, the REPL awaited.
import sys
import time

from deploy.base import FlashError, IMAGE_CHIP_IDS


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
