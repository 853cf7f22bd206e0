# LED organ board entry point: builds the light from board.json; organs/board.py runs it.
import machine

from organs import board
from organs.led import LedOrgan, Light


def make_light(cfg):
    s = cfg.get("settings", {})
    kind = s.get("led_kind", "gpio")
    if kind not in ("gpio", "ws2812"):
        raise ValueError("settings.led_kind %r is not 'gpio' or 'ws2812'" % kind)
    if kind == "ws2812":
        import neopixel

        pin = machine.Pin(cfg["pins"]["led"], machine.Pin.OUT)
        pixels = neopixel.NeoPixel(pin, s.get("ws2812_count", 1))
        return Light(pixels=pixels, color=s.get("ws2812_color", (32, 32, 32)))
    low = bool(s.get("active_low", False))
    # Born dark: an active-low LED's pin starts high, never a flash of light at boot.
    pin = machine.Pin(cfg["pins"]["led"], machine.Pin.OUT, value=1 if low else 0)
    return Light(pin=pin, active_low=low)


def build(cfg):
    led = LedOrgan(make_light(cfg), module_id=cfg.get("settings", {}).get("module_id", "LED_001"))
    return led.organ, (), {"organ": led.organ, "led": led}


board.main(machine, build, globals().get("__file__", ""))
