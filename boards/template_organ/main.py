# Button organ board entry point (the organ template): the pin from board.json; organs/board.py runs it.
import machine

from organs import board
from organs.template import ButtonOrgan


def build(cfg):
    pin = machine.Pin(cfg["pins"]["button"], machine.Pin.IN, machine.Pin.PULL_UP)
    button = ButtonOrgan(pin, module_id=cfg.get("settings", {}).get("module_id", "BTN_001"))
    return button.organ, (), {"organ": button.organ, "button": button}


board.main(machine, build, globals().get("__file__", ""))
