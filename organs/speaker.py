# Speaker organ (PROTOCOL.md section 9): chime, and speak/announce only with a voice engine installed.
from micropython import const

from organbus import log as eventlog
from organs.audio import Chime, Sequence, Silence
from organs.runtime import Organ

MODULE_ID = "SPK_001"
MODULE_TYPE = "speaker"
HW_VERSION = const(0x0100)
FW_VERSION = const(0x0100)
ANNOUNCE_GAP_MS = const(150)


def _ability(name, description, max_duration_ms, params=()):
    return {
        "name": name,
        "description": description,
        "exec_type": "continuous",
        "resource_group": "audio",
        "max_duration_ms": max_duration_ms,
        "params": [dict(p) for p in params],  # each ability owns its param dicts
    }


def speaker_descriptor(
    voice=False, module_id=MODULE_ID, hw_version=HW_VERSION, fw_version=FW_VERSION
):
    """The speaker's contract: section 9, honest about the voice (without one: chime alone)."""
    caps = []
    if voice:
        text = {"name": "text", "type": "string", "min": 1, "max": 240, "unit": ""}
        caps.append(_ability("speak", "Say the text out loud.", 30000, [text]))
        caps.append(
            _ability("announce", "Play an attention chime, then say the text.", 30000, [text])
        )
    caps.append(_ability("chime", "Play a short attention chime.", 2000))
    return {
        "module_id": module_id,
        "module_type": MODULE_TYPE,
        "hw_version": hw_version,
        "fw_version": fw_version,
        "capabilities": caps,
    }


class SpeakerOrgan:
    """The speaker organ around an Organ and an AudioOut.

    `voice` is the voice engine module (organs.voice) or None; with it the organ offers speak
    and announce, each playing voice.Speech(text, rate) as an audio job. Jobs queue in the
    audio task: a command answers 0 when its job is queued, 1 when the queue is full or the
    job cannot be made; EVENT done follows when the job has played (status 0) or was cut (1).
    """

    def __init__(self, audio, rate=11025, voice=None, module_id=MODULE_ID, log=eventlog.write):
        self.audio = audio
        self.rate = rate
        self.voice = voice
        handlers = {"chime": self.chime}
        if voice is not None:
            handlers["speak"] = self.speak
            handlers["announce"] = self.announce
        self.organ = Organ(speaker_descriptor(voice is not None, module_id), handlers, log=log)
        audio.on_done = self.organ.finish
        audio.log = log

    def chime(self, values, text, now):
        return 0 if self.audio.submit(Chime(self.rate), "chime") else 1

    def speak(self, values, text, now):
        return 0 if self.audio.submit(self.voice.Speech(text, self.rate), "speak") else 1

    def announce(self, values, text, now):
        job = Sequence(
            [
                Chime(self.rate),
                Silence(self.rate, ANNOUNCE_GAP_MS),
                self.voice.Speech(text, self.rate),
            ]
        )
        return 0 if self.audio.submit(job, "announce") else 1
