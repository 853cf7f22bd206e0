# Speaker organ board entry point: builds the I2S amplifier and voice; organs/board.py runs it.
import json

import machine

from organs import board
from organs.audio import AudioOut
from organs.speaker import SpeakerOrgan


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


def build(cfg):
    s = cfg.get("settings", {})
    audio = make_audio(cfg)
    speaker = SpeakerOrgan(
        audio,
        rate=s.get("rate", 11025),
        voice=load_voice(),
        module_id=s.get("module_id", "SPK_001"),
    )
    return (
        speaker.organ,
        (audio.run(),),
        {"organ": speaker.organ, "speaker": speaker, "audio": audio},
    )


board.main(machine, build, globals().get("__file__", ""))
