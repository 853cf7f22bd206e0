# The voice inside the speaker organ process (unix port, simulated I2S): speak, announce, queue.
import os
import time
import wave

from organbus import frame
from organbus.command import decode_event, encode_command
from organbus.descriptor import decode_descriptor
from organs.audio import Chime
from organs.voice import Speech
from board_rig import DirectBoard

RATE = 11025


def _render(job):
    buf = bytearray(1024)
    out = bytearray()
    while True:
        n = job.fill(buf)
        if not n:
            return bytes(out)
        out += buf[:n]


class SpeakerBoard(DirectBoard):
    """boards/speaker_organ/main.py on the unix port, UART on this test's socket, takes of the
    simulated I2S as WAV files in a folder."""

    def __init__(self):
        DirectBoard.__init__(self, "speaker_organ", wav_dir=True, timeout=30)

    def command(self, name, text=None):
        return DirectBoard.command(self, encode_command(name, (), text))

    def event(self):
        return decode_event(self.wait(frame.EVENT), -1)

    def takes(self):
        out = []
        for name in sorted(os.listdir(self.wav)):
            with wave.open(os.path.join(self.wav, name), "rb") as w:
                assert w.getframerate() == RATE and w.getsampwidth() == 2
                out.append(w.readframes(w.getnframes()))
        return out

    def close(self):
        try:
            return self.stop()
        finally:
            self.remove()


def test_speaker_organ_speaks_announces_and_queues_speech():
    short = "Hi."
    long = "Hello there, the kitchen light is on."
    first, second = "The door is open.", "The fan is off."
    b = SpeakerBoard()
    try:
        d = decode_descriptor(b.wait(frame.DESCRIPTOR))
        names = [c["name"] for c in d["capabilities"]]
        assert "speak" in names and "announce" in names, "voice installed: %r" % names

        assert b.command("speak", short) == 0, "speak started"
        assert b.event() == (1, "speak", 0), "speak completed"
        time.sleep(0.4)  # a gap: the next audio is a new take
        assert b.command("speak", long) == 0
        assert b.event() == (1, "speak", 0)
        time.sleep(0.4)
        assert b.command("announce", short) == 0, "announce started"
        assert b.event() == (1, "announce", 0)
        time.sleep(0.4)
        # a plan's two speech steps arrive back to back: the second waits for the first
        assert b.command("speak", first) == 0
        assert b.command("speak", second) == 0, "the second speech job is queued"
        assert b.event() == (1, "speak", 0) and b.event() == (1, "speak", 0)
        time.sleep(0.3)
        takes = b.takes()
    finally:
        lines, err = b.close()
    assert len(takes) == 4, "four takes expected, got %d (%s)" % (len(takes), err[-500:])
    t_short, t_long, t_ann, t_two = takes
    assert t_short == _render(Speech(short)), "the organ plays the voice's own samples"
    assert len(t_short) < len(t_long), "duration grows with the text"
    assert t_long == _render(Speech(long))
    chime = _render(Chime(RATE))
    assert t_ann.startswith(chime), "announce starts with the chime"
    assert t_ann.endswith(_render(Speech(short))), "and ends with the speech"
    a, c = _render(Speech(first)), _render(Speech(second))
    assert t_two == a + c, "two speech steps play one after the other, whole and in order"
