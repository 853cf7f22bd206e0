# LED organ board entry point: reads board.json, builds the UART and the light, runs the LED organ.
import json
import time

import machine

from organs import runtime
from organs.led import LedOrgan, Light


def board_config():
    """board.json next to this file (the board's root: /board.json), else /board.json."""
    try:
        here = __file__.rsplit("/", 1)[0] + "/" if "/" in __file__ else ""
    except NameError:
        here = "/"
    for path in (here + "board.json", "/board.json"):
        try:
            f = open(path)
        except OSError:
            continue
        try:
            return json.load(f)
        except ValueError as e:
            raise ValueError("%s is not valid JSON (%s)" % (path, e))
        finally:
            f.close()
    raise OSError("board.json not found next to main.py nor at /board.json")


def refuse(e):
    """The board cannot start: say why, as a lifecycle event line."""
    if isinstance(e, KeyError):
        why = "board.json: missing key %s" % e
    else:
        why = "%s: %s" % (type(e).__name__, e)
    print('{"event": "refused", "reason": %s}' % json.dumps(why))


def make_uart(cfg):
    uid, u = sorted(cfg["uarts"].items())[0]
    return machine.UART(
        int(uid),
        baudrate=u.get("baudrate", 115200),
        tx=u["tx"],
        rx=u["rx"],
        rxbuf=u.get("rxbuf", 1024),
        timeout=0,
    )


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


def poll_ms(cfg):
    """How the UART tasks wait (organs.runtime.Link): settings.poll_ms, else 1 ms polling on a
    board (allocation-free; the esp32 port wakes on its 10 ms tick either way) and the IO wait
    in simulation (a host wakes at once on bytes, so the paced cable runs at wire speed)."""
    return cfg.get("settings", {}).get("poll_ms", 0 if getattr(machine, "SIM", None) else 1)


def repl_task(names):
    """On a board with aiorepl installed, a REPL beside the organ (mpremote in, inspect `organ`)."""
    if getattr(machine, "SIM", None):
        return ()
    try:
        import aiorepl
    except ImportError:
        return ()
    return (aiorepl.task(names),)


def main():
    try:
        cfg = board_config()
        organ = LedOrgan(
            make_light(cfg), module_id=cfg.get("settings", {}).get("module_id", "LED_001")
        )
        uart = make_uart(cfg)
    except (OSError, ValueError, KeyError, TypeError, ImportError) as e:
        refuse(e)
        return
    tasks = repl_task({"organ": organ.organ, "led": organ})
    try:
        runtime.run(organ.organ, uart, tasks=tasks, poll_ms=poll_ms(cfg))
    except Exception as e:  # a crash: say why, then reset and announce afresh
        print('{"event": "crash", "reason": %s}' % json.dumps("%s: %s" % (type(e).__name__, e)))
        time.sleep_ms(1000)
        machine.reset()


main()
