# Speaker audio path: one task owns the I2S TX stream and plays queued jobs (16-bit mono PCM blocks).
import sys
from array import array

import micropython
from micropython import const

from organbus import log as eventlog
from organbus.ticks import ticks_add, ticks_diff, ticks_us

try:
    import asyncio

    _sleep_ms = asyncio.sleep_ms
except AttributeError:  # CPython

    def _sleep_ms(ms):
        return asyncio.sleep(ms / 1000)


# An audio job: fill(buf) writes 16-bit little-endian mono samples into buf (a bytearray whose
# length is a multiple of 64) and returns how many bytes it wrote, 0 when it has finished;
# stop() makes the next fill return 0. Chime, Silence, Sequence and organs.voice.Speech are jobs.

_CHUNK = const(32)  # samples per envelope step
_FADE = const(256)  # samples of linear fade at the end of the chime
_SINE_BITS = const(8)


def _sine_table():
    import math

    t = array("h", bytes(2 << _SINE_BITS))
    n = 1 << _SINE_BITS
    for i in range(n):
        t[i] = int(math.floor(32767 * math.sin(2 * math.pi * i / n) + 0.5))
    return t


_SINE = _sine_table()


def _tone_pure(buf, start, count, table, phase, inc, amp):
    """The reference path: the same samples as the viper _tone on every interpreter."""
    for i in range(start, start + count):
        v = (table[(phase >> 16) & 255] * amp) >> 15
        buf[2 * i] = v & 0xFF
        buf[2 * i + 1] = (v >> 8) & 0xFF
        phase = (phase + inc) & 0xFFFFFF
    return phase


if sys.implementation.name == "micropython":

    @micropython.viper
    def _tone(
        buf: ptr16, start: int, count: int, table: ptr16, phase: int, inc: int, amp: int
    ) -> int:
        # phase is 8.16 fixed point into the 256-entry table; samples are table * amp >> 15.
        i = 0
        while i < count:
            s = int(table[(phase >> 16) & 255])
            if s & 0x8000:
                s -= 0x10000
            buf[start + i] = ((s * amp) >> 15) & 0xFFFF
            phase = (phase + inc) & 0xFFFFFF
            i += 1
        return phase

else:
    _tone = _tone_pure


# The chime: two struck notes, E6 then C6 (a falling major third), each decaying.
# (frequency Hz, length ms, amplitude left at the note's end in 1/1000)
CHIME_NOTES = ((1319, 250, 400), (1047, 450, 100))
CHIME_MS = 700
CHIME_PEAK = 16000  # about -6 dBFS


class Chime:
    """The speaker's attention chime, synthesized block by block (no stored recording)."""

    def __init__(self, rate=11025, peak=CHIME_PEAK, tone=None):
        self.rate = rate
        self._tone = tone or _tone
        self._peak = peak
        self._notes = []
        for freq, ms, end in CHIME_NOTES:
            n = rate * ms // 1000
            inc = (freq << 24) // rate
            # Q15 factor per _CHUNK samples that leaves end/1000 of the amplitude at the end.
            decay = int(32768 * (end / 1000) ** (_CHUNK / n))
            self._notes.append((n, inc, decay))
        self.samples = sum(n for n, _, _ in self._notes)
        self._note = 0
        self._pos = 0
        self._env = 32767
        self._phase = 0
        self._stopped = False

    def stop(self):
        self._stopped = True

    def fill(self, buf):
        if self._stopped:
            return 0
        room = len(buf) >> 1
        done = 0
        notes = self._notes
        while done < room and self._note < len(notes):
            n, inc, decay = notes[self._note]
            k = _CHUNK - (self._pos % _CHUNK)
            if k > n - self._pos:
                k = n - self._pos
            if k > room - done:
                k = room - done
            amp = (self._env * self._peak) >> 15
            left = n - self._pos
            if self._note == len(notes) - 1 and left < _FADE:
                amp = amp * left // _FADE
            self._phase = self._tone(buf, done, k, _SINE, self._phase, inc, amp)
            done += k
            self._pos += k
            if self._pos % _CHUNK == 0:
                self._env = (self._env * decay) >> 15
            if self._pos >= n:
                self._note += 1
                self._pos = 0
                self._env = 32767
        return done << 1


class Silence:
    """`ms` of silence (a pause between jobs of a sequence)."""

    def __init__(self, rate=11025, ms=100):
        self._left = rate * ms // 1000
        self._stopped = False

    def stop(self):
        self._stopped = True

    def fill(self, buf):
        if self._stopped or self._left <= 0:
            return 0
        k = len(buf) >> 1
        if k > self._left:
            k = self._left
        for i in range(k << 1):
            buf[i] = 0
        self._left -= k
        return k << 1


class Sequence:
    """Jobs played one after the other as one job (announce: chime, pause, speech)."""

    def __init__(self, jobs):
        self._jobs = jobs
        self._i = 0

    def stop(self):
        for j in self._jobs:
            j.stop()

    def fill(self, buf):
        while self._i < len(self._jobs):
            n = self._jobs[self._i].fill(buf)
            if n > 0:
                return n
            self._i += 1
        return 0


def _asyncio_mode(i2s):
    # machine.I2S writes block until the first POLLOUT poll switches it to asyncio mode;
    # poll it once so writes through the StreamWriter return at once with what fits.
    try:
        import select

        p = select.poll()
        p.register(i2s, select.POLLOUT)
        p.poll(0)
        p.unregister(i2s)
    except Exception:
        pass  # a stream without poll support (a test double) is non-blocking already


class AudioOut:
    """The one owner of the I2S TX stream: plays queued jobs in order through a StreamWriter.

    submit(job, name) -> False when the queue is full (the organ answers 1). When a job ends,
    on_done(name, status) is called: 0 when it played out, 1 when stopped or failed.
    With `rate` given, "played out" means heard: the stream's DMA buffer still holds audio
    when the last write returns, so the task keeps a play clock (the time the written audio
    ends) and waits for it before reporting; without `rate` (a test writer) it reports at once.
    mute(bool), if given, drives the amplifier's SD pin: unmuted while jobs play.
    """

    def __init__(
        self,
        i2s,
        block=1024,
        slots=4,
        mute=None,
        poll_ms=10,
        writer=None,
        rate=None,
        log=eventlog.write,
    ):
        if block % 64:
            raise ValueError("block must be a multiple of 64 bytes")
        self._i2s = i2s
        self._buf = bytearray(block)
        self._mv = memoryview(self._buf)
        self._jobs = [None] * slots
        self._names = [None] * slots
        self._head = 0
        self._n = 0
        self._mute = mute
        self._writer = writer
        self._cut = False
        self._rate = rate
        self._end_us = ticks_us()  # when the audio written so far has played
        self.log = log
        self.poll_ms = poll_ms
        self.on_done = None
        self.played = 0  # bytes written to the stream
        if mute is not None:
            mute(True)

    def submit(self, job, name):
        slots = len(self._jobs)
        if self._n >= slots:
            return False
        i = (self._head + self._n) % slots
        self._jobs[i] = job
        self._names[i] = name
        self._n += 1
        return True

    def busy(self):
        return self._n > 0

    def stop(self):
        """Stop the playing job (within one block) and drop the queued ones (status 1 each)."""
        while self._n > 1:
            i = (self._head + self._n - 1) % len(self._jobs)
            name = self._names[i]
            self._jobs[i] = self._names[i] = None
            self._n -= 1
            if self.on_done is not None:
                self.on_done(name, 1)
        if self._n:
            self._cut = True
            self._jobs[self._head].stop()

    def _clock(self, n):
        # The written audio ends n/2 samples after the later of now and the previous end.
        now = ticks_us()
        start = self._end_us if ticks_diff(self._end_us, now) > 0 else now
        self._end_us = ticks_add(start, (n >> 1) * 1000000 // self._rate)

    async def run(self):
        sw = self._writer
        if sw is None:
            _asyncio_mode(self._i2s)
            sw = asyncio.StreamWriter(self._i2s)
        buf, mv, size = self._buf, self._mv, len(self._buf)
        while True:
            if not self._n:
                await _sleep_ms(self.poll_ms)
                continue
            job, name = self._jobs[self._head], self._names[self._head]
            self._cut = False
            if self._mute is not None:
                self._mute(False)
            status = 0
            try:
                while True:
                    n = job.fill(buf)
                    if n <= 0:
                        break
                    sw.write(buf if n == size else mv[:n])
                    await sw.drain()
                    self.played += n
                    if self._rate:
                        self._clock(n)
            except Exception as e:
                status = 1
                why = "%s: %s" % (type(e).__name__, e)
                self.log(eventlog.line("audio_error", (("name", name), ("error", why))))
            if self._cut:
                status = 1
            if self._rate:
                left = ticks_diff(self._end_us, ticks_us()) // 1000
                if left > 0:
                    await _sleep_ms(left)
            self._jobs[self._head] = self._names[self._head] = None
            self._head = (self._head + 1) % len(self._jobs)
            self._n -= 1
            if not self._n and self._mute is not None:
                self._mute(True)
            if self.on_done is not None:
                self.on_done(name, status)
