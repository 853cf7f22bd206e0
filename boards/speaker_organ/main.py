# Speaker organ board entry point: reads board.json, builds the UART and the I2S amplifier, runs the organ.
import json
import time

import machine

from organs import runtime
from organs.audio import AudioOut
from organs.speaker import SpeakerOrgan


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


def make_audio(cfg):
    pins, s = cfg["pins"], cfg.get("settings", {})
    i2s = machine.I2S(
        s.get("i2s_id", 0),
        sck=machine.Pin(pins["i2s_bclk"]),
        ws=machine.Pin(pins["i2s_lrc"]),
        sd=machine.Pin(pins["i2s_din"]),
        mode=machine.I2S.TX,
        bits=16,
        format=machine.I2S.MONO,
        rate=s.get("rate", 11025),
        ibuf=s.get("ibuf", 8192),
    )
    mute = None
    if pins.get("amp_sd") is not None:
        # MAX98357 SD: high plays, low shuts the amplifier down (silent between jobs).
        sd = machine.Pin(pins["amp_sd"], machine.Pin.OUT, value=0)

        def mute(on):
            sd.value(0 if on else 1)

    return AudioOut(i2s, block=s.get("block", 1024), mute=mute, rate=s.get("rate", 11025))


def load_voice():
    """organs.voice when it is installed (speak and announce are offered only then)."""
    try:
        import organs.voice as voice

        return voice
    except Exception as e:  # missing, or broken (MemoryError, a lexicon file): chime alone
        why = "%s: %s" % (type(e).__name__, e)
        print('{"event": "voice", "installed": false, "reason": %s}' % json.dumps(why))
        return None


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
        s = cfg.get("settings", {})
        audio = make_audio(cfg)
        organ = SpeakerOrgan(
            audio,
            rate=s.get("rate", 11025),
            voice=load_voice(),
            module_id=s.get("module_id", "SPK_001"),
        )
        uart = make_uart(cfg)
    except (OSError, ValueError, KeyError, TypeError) as e:
        refuse(e)
        return
    tasks = (audio.run(),) + repl_task({"organ": organ.organ, "speaker": organ, "audio": audio})
    try:
        runtime.run(organ.organ, uart, tasks=tasks, poll_ms=poll_ms(cfg))
    except Exception as e:  # a crash: say why, then reset and announce afresh
        print('{"event": "crash", "reason": %s}' % json.dumps("%s: %s" % (type(e).__name__, e)))
        time.sleep_ms(1000)
        machine.reset()


main()
