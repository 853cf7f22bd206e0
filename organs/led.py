# LED organ (PROTOCOL.md section 9): led_on, led_off, led_blink on a Pin or a WS2812 given in.
from micropython import const

from organbus import log as eventlog
from organbus.ticks import ticks_add, ticks_diff
from organs.runtime import Organ

MODULE_ID = "LED_001"
MODULE_TYPE = "led"
HW_VERSION = const(0x0100)
FW_VERSION = const(0x0100)
BLINK_MAX_MS = const(40000)  # 20 blinks of 2000 ms
IDLE_MS = const(60000)  # what poll() answers when no blink runs: nothing due


def led_descriptor(module_id=MODULE_ID, hw_version=HW_VERSION, fw_version=FW_VERSION):
    """The LED organ's contract, exactly section 9."""
    return {
        "module_id": module_id,
        "module_type": MODULE_TYPE,
        "hw_version": hw_version,
        "fw_version": fw_version,
        "capabilities": [
            {
                "name": "led_on",
                "description": "Turn the light on.",
                "exec_type": "immediate",
                "resource_group": "led",
                "max_duration_ms": 0,
                "params": [],
            },
            {
                "name": "led_off",
                "description": "Turn the light off.",
                "exec_type": "immediate",
                "resource_group": "led",
                "max_duration_ms": 0,
                "params": [],
            },
            {
                "name": "led_blink",
                "description": "Blink the light a number of times.",
                "exec_type": "continuous",
                "resource_group": "led",
                "max_duration_ms": BLINK_MAX_MS,
                "params": [
                    {"name": "count", "type": "int", "min": 1, "max": 20, "unit": ""},
                    {"name": "period_ms", "type": "int", "min": 100, "max": 2000, "unit": "ms"},
                ],
            },
        ],
    }


class Light:
    """One light: a machine.Pin (active-high or active-low) or a neopixel.NeoPixel (all pixels).

    `color` is the WS2812's on colour as an (r, g, b) tuple; the off colour is black.
    """

    def __init__(self, pin=None, active_low=False, pixels=None, color=(32, 32, 32)):
        if (pin is None) == (pixels is None):
            raise ValueError("a Light needs exactly one of pin or pixels")
        self._pin = pin
        self._low = 1 if active_low else 0
        self._pixels = pixels
        self._color = tuple(color)
        self._black = (0,) * len(self._color)
        self.on = False
        self.set(False)

    def set(self, on):
        on = self.on = True if on else False
        if self._pixels is not None:
            self._pixels.fill(self._color if on else self._black)
            self._pixels.write()
        else:
            self._pin.value(on ^ self._low)


class LedOrgan:
    """The LED organ: its contract, its abilities and the blink timer, around an Organ.

    A blink is `count` periods of `period_ms`: on for the first half (period_ms // 2), off for
    the rest; it ends off, count * period_ms after it started, with EVENT status 0.
    led_on or led_off during a blink stops it (EVENT status 1) and then takes effect; a new
    led_blink during a blink stops the old one (EVENT status 1) and starts afresh.
    """

    def __init__(self, light, module_id=MODULE_ID, log=eventlog.write):
        self.light = light
        self._blinking = False
        self._phase = 0  # 0 .. 2*count-1: even phases on, odd phases off
        self._phases = 0
        self._on_ms = 0
        self._off_ms = 0
        self._next = 0
        self.organ = Organ(
            led_descriptor(module_id),
            {"led_on": self.led_on, "led_off": self.led_off, "led_blink": self.led_blink},
            poll=self.poll,
            log=log,
        )

    def _stop_blink(self):
        if self._blinking:
            self._blinking = False
            self.organ.finish("led_blink", 1)

    def led_on(self, values, text, now):
        if self._blinking:
            self._stop_blink()
        self.light.set(True)
        return 0

    def led_off(self, values, text, now):
        if self._blinking:
            self._stop_blink()
        self.light.set(False)
        return 0

    def led_blink(self, values, text, now):
        self._stop_blink()
        count, period = values[0], values[1]
        self._phases = 2 * count
        self._on_ms = period // 2
        self._off_ms = period - self._on_ms
        self._phase = 0
        self._blinking = True
        self.light.set(True)
        self._next = ticks_add(now, self._on_ms)
        return 0

    @property
    def blinking(self):
        return self._blinking

    def poll(self, now):
        """Advance the blink; returns ms until the next change (IDLE_MS when not blinking)."""
        if not self._blinking:
            return IDLE_MS
        while ticks_diff(now, self._next) >= 0:
            self._phase += 1
            if self._phase >= self._phases:
                self._blinking = False  # the last phase was off: the light is off already
                self.organ.finish("led_blink", 0)
                return IDLE_MS
            on = not (self._phase & 1)
            self.light.set(on)
            # Step from the schedule, not from `now`, so a late poll does not stretch the blink.
            self._next = ticks_add(self._next, self._on_ms if on else self._off_ms)
        return ticks_diff(self._next, now)
