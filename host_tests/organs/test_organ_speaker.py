# Speaker organ and audio path: honest descriptor, synthesized chime, job queue, EVENTs, stop, mute.
import asyncio
import math

from organbus import frame
from organbus.command import decode_event, encode_command
from organbus.descriptor import decode_descriptor
from organs.audio import CHIME_MS, AudioOut, Chime
from organs.speaker import SpeakerOrgan

UNIX_PORT = True

RATE = 11025
CHIME_ROW = ("chime", "Play a short attention chime.", "continuous", "audio", 2000, [])
SPEAK_ROW = (
    "speak",
    "Say the text out loud.",
    "continuous",
    "audio",
    30000,
    [("text", "string", 1, 240, "")],
)
ANNOUNCE_ROW = (
    "announce",
    "Play an attention chime, then say the text.",
    "continuous",
    "audio",
    30000,
    [("text", "string", 1, 240, "")],
)


def _sleep0():
    return asyncio.sleep(0)


class FakeWriter:
    """Stands in for asyncio.StreamWriter(i2s): keeps the PCM, yields on every drain."""

    def __init__(self):
        self.pcm = bytearray()

    def write(self, buf):
        self.pcm.extend(buf)

    async def drain(self):
        await asyncio.sleep(0.001)  # a DMA buffer takes a while


class FakeSpeech:
    made = []

    def __init__(self, text, rate=11025):
        FakeSpeech.made.append((text, rate))
        self.left = 100
        self.stopped = False

    def stop(self):
        self.stopped = True

    def fill(self, buf):
        if self.stopped or not self.left:
            return 0
        k = min(self.left, len(buf) // 2)
        for i in range(k):
            buf[2 * i] = 0xE8  # 1000, little-endian
            buf[2 * i + 1] = 0x03
        self.left -= k
        return 2 * k


class FakeVoice:
    Speech = FakeSpeech


class Rig:
    def __init__(self, voice=None, slots=4, mute=None):
        self.writer = FakeWriter()
        self.audio = AudioOut(None, block=512, slots=slots, writer=self.writer, mute=mute)
        self.lines = []
        self.spk = SpeakerOrgan(self.audio, RATE, voice=voice, log=self.lines.append)
        self.organ = self.spk.organ
        assert self.organ.start(0), self.organ.refusal
        self.sent = []
        self.dec = frame.Decoder(self._on)
        self.organ.feed(frame.ACK_FRAME, 0)

    def _on(self, ftype, payload, n):
        self.sent.append((ftype, bytes(payload[:n])))

    def drain(self):
        while True:
            f = self.organ.pop()
            if f is None:
                return
            self.dec.feed(f, 0)

    def command(self, name, text=None):
        before = len(self.sent)
        self.organ.feed(frame.encode(frame.COMMAND, encode_command(name, (), text)), 0)
        self.drain()
        r = [p for (ty, p) in self.sent[before:] if ty == frame.COMMAND_RESP]
        assert len(r) == 1, self.sent[before:]
        return r[0][0]

    def events(self):
        self.drain()
        return [decode_event(p) for (ty, p) in self.sent if ty == frame.EVENT]

    def play(self, until_events, stop_after_bytes=-1):
        """Runs the audio task until `until_events` EVENTs went out (or 3 s)."""

        async def main():
            task = asyncio.create_task(self.audio.run())
            for _ in range(3000):
                await asyncio.sleep(0.001)
                if 0 <= stop_after_bytes <= len(self.writer.pcm):
                    self.audio.stop()
                    stop_after_bytes_done[0] = True
                if len(self.events()) >= until_events:
                    break
            task.cancel()

        stop_after_bytes_done = [False]
        asyncio.run(main())
        return self.events()


def _rows(organ):
    d = decode_descriptor(organ.descriptor_frame[5:-3])
    assert d["module_id"] == "SPK_001" and d["module_type"] == "speaker", d
    out = []
    for c in d["capabilities"]:
        params = [(p["name"], p["type"], p["min"], p["max"], p["unit"]) for p in c["params"]]
        out.append(
            (
                c["name"],
                c["description"],
                c["exec_type"],
                c["resource_group"],
                c["max_duration_ms"],
                params,
            )
        )
    return out


def _samples(pcm):
    out = []
    for i in range(0, len(pcm) - 1, 2):
        v = pcm[i] | (pcm[i + 1] << 8)
        out.append(v - 65536 if v & 0x8000 else v)
    return out


def _render(job, block=1024):
    buf = bytearray(block)
    pcm = bytearray()
    while True:
        n = job.fill(buf)
        if not n:
            return pcm
        assert 0 < n <= block and n % 2 == 0, "fill returns a whole number of samples: %d" % n
        pcm.extend(buf[:n])


def _crossing_hz(s, rate):
    ups = sum(1 for i in range(1, len(s)) if s[i - 1] < 0 <= s[i])
    return ups * rate / len(s)


# -- contract ------------------------------------------------------------------------------------


def test_without_voice_the_descriptor_holds_chime_alone():
    r = Rig()
    assert _rows(r.organ) == [CHIME_ROW], _rows(r.organ)
    assert r.command("speak", "hello") == 1, "no voice: speak is an unknown name"
    assert r.command("announce", "hello") == 1, "no voice: announce is an unknown name"


def test_with_voice_the_descriptor_is_section_9():
    r = Rig(voice=FakeVoice)
    assert _rows(r.organ) == [SPEAK_ROW, ANNOUNCE_ROW, CHIME_ROW], _rows(r.organ)


# -- chime ---------------------------------------------------------------------------------------


def test_chime_is_audible_for_its_whole_length():
    s = _samples(_render(Chime(RATE)))
    assert len(s) == RATE * CHIME_MS // 1000 - 1 or len(s) == RATE * CHIME_MS // 1000, len(s)
    peak = max(abs(x) for x in s)
    assert 8000 < peak <= 16000, "peak %d: about -6 dBFS, never clipping" % peak
    win = RATE // 20  # 50 ms windows
    for w in range(0, len(s) - win + 1, win):
        rms = math.sqrt(sum(x * x for x in s[w : w + win]) / win)
        assert rms > 800, "window at %d ms is near silence (rms %d)" % (w * 1000 // RATE, rms)


def test_chime_is_two_notes_falling():
    s = _samples(_render(Chime(RATE)))
    first = _crossing_hz(s[: RATE // 5], RATE)
    second = _crossing_hz(s[RATE * 3 // 10 : RATE * 6 // 10], RATE)
    assert abs(first - 1319) < 40, "first note near E6: %.0f Hz" % first
    assert abs(second - 1047) < 40, "second note near C6: %.0f Hz" % second


def test_chime_ends_quietly_and_follows_the_rate():
    s = _samples(_render(Chime(16000), block=64))
    assert abs(len(s) - 16000 * CHIME_MS // 1000) <= 1, len(s)
    assert max(abs(x) for x in s[-8:]) < 300, "fades out, no click: %r" % s[-8:]


def test_chime_stop_ends_it():
    c = Chime(RATE)
    buf = bytearray(256)
    assert c.fill(buf) == 256, "plays"
    c.stop()
    assert c.fill(buf) == 0, "stopped: the next fill returns 0"


# -- audio task ----------------------------------------------------------------------------------


def test_chime_command_plays_then_event_done():
    r = Rig()
    assert r.command("chime") == 0, "chime started"
    assert r.events() == [], "no EVENT before it played"
    ev = r.play(1)
    assert ev == [(1, "chime", 0)], ev
    assert len(r.writer.pcm) == 2 * len(_samples(_render(Chime(RATE)))), len(r.writer.pcm)
    assert r.audio.played == len(r.writer.pcm), (r.audio.played, len(r.writer.pcm))


def test_jobs_queue_and_play_in_order():
    r = Rig(voice=FakeVoice)
    assert r.command("chime") == 0 and r.command("speak", "one") == 0, "both queued"
    ev = r.play(2)
    assert ev == [(1, "chime", 0), (1, "speak", 0)], ev
    s = _samples(r.writer.pcm)
    chime_n = len(_samples(_render(Chime(RATE))))
    assert s[chime_n:] == [1000] * 100, "the speech follows the chime"


def test_queue_full_answers_one():
    r = Rig(slots=2)
    assert [r.command("chime") for _ in range(3)] == [0, 0, 1], "third chime: queue full"


def test_stop_cuts_the_job_with_status_one():
    r = Rig()
    r.command("chime")
    r.command("chime")
    ev = r.play(2, stop_after_bytes=1024)
    assert sorted(ev) == [(1, "chime", 1), (1, "chime", 1)], ev
    assert 1024 <= len(r.writer.pcm) < 4096, "cut within a block: %d bytes" % len(r.writer.pcm)


def test_speak_text_is_truncated_to_240_bytes():
    FakeSpeech.made = []
    r = Rig(voice=FakeVoice)
    assert r.command("speak", "\u00e9" * 125) == 0, "250-byte text accepted, truncated"
    assert FakeSpeech.made == [("\u00e9" * 120, RATE)], FakeSpeech.made[0][0][-3:]
    assert r.command("speak", "") == 1, "empty text is below the declared min"


def test_announce_is_chime_pause_then_speech():
    FakeSpeech.made = []
    r = Rig(voice=FakeVoice)
    assert r.command("announce", "Look here.") == 0, "announce started"
    ev = r.play(1)
    assert ev == [(1, "announce", 0)], ev
    s = _samples(r.writer.pcm)
    chime_n = len(_samples(_render(Chime(RATE))))
    gap = RATE * 150 // 1000
    assert max(abs(x) for x in s[:chime_n]) > 8000, "chime first"
    assert s[chime_n : chime_n + gap] == [0] * gap, "then 150 ms of silence"
    assert s[chime_n + gap :] == [1000] * 100, "then the speech"
    assert FakeSpeech.made == [("Look here.", RATE)], FakeSpeech.made


def test_job_that_fails_reports_status_one():
    class Broken(FakeSpeech):
        def fill(self, buf):
            raise ValueError("synth fell over")

    class V:
        Speech = Broken

    r = Rig(voice=V)
    assert r.command("speak", "x") == 0, "queued"
    assert r.play(1) == [(1, "speak", 1)], r.events()
    assert any("synth fell over" in x for x in r.lines), r.lines


def test_amplifier_is_unmuted_only_while_playing():
    states = []
    r = Rig(mute=states.append)
    assert states == [True], "muted at start: %r" % states
    r.command("chime")
    r.play(1)
    assert states == [True, False, True], "unmuted for the job, muted after: %r" % states


def test_event_waits_until_the_audio_has_played():
    from organbus.ticks import (
        ticks_diff,
        ticks_ms,
    )  # every interpreter has these (time.time: not all)

    r = Rig()
    r.audio._rate = RATE  # keep the play clock, as on a board
    r.command("chime")
    t0 = ticks_ms()
    assert r.play(1) == [(1, "chime", 0)], r.events()
    took = ticks_diff(ticks_ms(), t0) / 1000
    assert 0.65 <= took < 1.5, "EVENT after the chime has played (0.7 s), took %.3f s" % took


def test_chime_viper_and_pure_paths_give_the_same_samples():
    from organs.audio import _tone_pure

    fast = _render(Chime(RATE))
    pure = _render(Chime(RATE, tone=_tone_pure))
    assert len(fast) == len(pure) and fast == pure, "sample-exact on this interpreter"
