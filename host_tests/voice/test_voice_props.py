# Voice properties on CPython: any text is safe, CPython and the unix port agree, data is fresh.
import os
import subprocess
import sys
import wave

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from organs.voice import Speech, flash, klatt
from organs.voice import speech as speech_mod
from organs.voice import text as text_mod
from support import ROOT, mpy_cross_exe, run_micropython

sys.path.insert(0, os.path.join(ROOT, "tools"))
import voice_data  # noqa: E402

VOICE = os.path.join(ROOT, "organs", "voice")


def _utf8_upto_240():
    # mostly speakable characters plus controls, marks, symbols and emoji
    alphabet = st.one_of(
        st.characters(min_codepoint=32, max_codepoint=126),
        st.characters(min_codepoint=0, max_codepoint=31),
        st.sampled_from("0123456789.,:;!?%$&+-'\"/@#*<>=€£°éÅñ—…“”"),
        st.characters(min_codepoint=0x80, max_codepoint=0x10FFFF, exclude_categories=("Cs",)),
    )
    return (
        st.text(alphabet=alphabet, max_size=240)
        .map(lambda s: s.encode()[:240])
        .map(lambda b: b.decode("utf-8", "ignore"))
    )


class _Counting(klatt.Synth):
    """The real frame parameters and coefficients, without the (slow) pure sample loop."""

    def render(self, buf, off, n):
        self.samples = getattr(self, "samples", 0) + n


def _run_frames(text):
    """Frames for the whole text; fails on any error the job or the normalizer swallowed."""
    seen = []
    speech_mod._report, saved_r = seen.append, speech_mod._report
    text_mod.dropped, saved_d = (lambda tok, e: seen.append((tok, e))), text_mod.dropped
    try:
        n = _frames_of(text)
    finally:
        speech_mod._report, text_mod.dropped = saved_r, saved_d
    assert not seen, "errors swallowed while speaking %r: %r" % (text, seen)
    return n


def _frames_of(text):
    job = Speech(text)
    job._start()  # what the first fill() does; then swap in the counting synthesizer
    job._syn.__class__ = _Counting
    buf = bytearray(1024)
    total = 0
    while True:
        n = job.fill(buf)
        assert n % 2 == 0 and 0 <= n <= len(buf), n
        if not n:
            return total
        total += n


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_utf8_upto_240())
def test_any_utf8_gives_sound_or_silence(text):
    assert len(text.encode()) <= 240
    n = _run_frames(text)
    assert n >= 0, "fill() must keep returning byte counts"
    # the same text as raw UTF-8 bytes behaves the same
    assert _run_frames(text.encode()) == n, "bytes and str input must give the same length"


def test_invalid_utf8_and_control_text_renders_real_samples():
    for text in (b"\xff\xfe ok \xc3", "\x00\x07 beep\r\n\t1 2 3 \U0001f916!", "€5 at 20° é"):
        job = Speech(text, viper=False)
        buf = bytearray(4096)
        total = 0
        while True:
            n = job.fill(buf)
            if not n:
                break
            total += n
        assert total > 0, "%r has speakable words and should make sound" % (text,)


def _say_unix(text, path):
    r = run_micropython(["tools/say.py", text, "-o", path], timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    with wave.open(path, "rb") as w:
        return w.readframes(w.getnframes())


def _say_cpython(text, path):
    r = subprocess.run(
        [sys.executable, "tools/say.py", text, "-o", path, "--pure"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    with wave.open(path, "rb") as w:
        assert w.getframerate() == 11025 and w.getsampwidth() == 2 and w.getnchannels() == 1
        return w.readframes(w.getnframes())


def test_cpython_equals_unix_port_viper(tmp_path):
    # one synthesizer source (klatt.py): viper on the unix port, the same lines as Python here.
    # The third text has phrase-final fricatives whose AV goes below 0 dB (a signed value the
    # viper frame code must read back with its sign on 64-bit ports).
    for text in (
        "Sorry, the 3rd window is open! Shall I close it? 12.5 degrees.",
        "Hello, is the red light on? It is 7:30, 50% done.",
        "The fan is off.",
    ):
        a = _say_cpython(text, str(tmp_path / "cpython.wav"))
        b = _say_unix(text, str(tmp_path / "unix.wav"))
        assert len(a) > 11025, "%r should last over half a second" % text
        assert a == b, "%r: CPython and unix port (viper) samples differ" % text


def test_data_files_are_built_from_their_sources(tmp_path):
    words = tmp_path / "words.dat"
    voice_data.build_words(str(words))
    with open(os.path.join(VOICE, "words.dat"), "rb") as f:
        assert f.read() == words.read_bytes(), "words.dat is stale: run tools/voice_data.py --words"
    ph = tmp_path / "phonemes.dat"
    voice_data.build_phonemes(str(ph))
    with open(os.path.join(VOICE, "phonemes.dat"), "rb") as f:
        assert f.read() == ph.read_bytes(), "phonemes.dat is stale: run tools/voice_data.py --words"


def test_lexicon_is_sorted_fixed_records():
    with open(os.path.join(VOICE, "lexicon.dat"), "rb") as f:
        data = f.read()
    assert len(data) % flash.REC == 0, "lexicon.dat must be whole records"
    keys = [data[i : i + flash.REC].split(b" ")[0] for i in range(0, len(data), flash.REC)]
    assert keys == sorted(keys), "lexicon.dat must be sorted for the binary search"
    assert len(keys) == len(set(keys)), "lexicon keys must be unique"
    assert all(data[i + flash.REC - 1] == 10 for i in range(0, len(data), flash.REC))


def test_voice_compiles_for_rv32(tmp_path):
    for name in sorted(os.listdir(VOICE)):
        if name.endswith(".py"):
            out = tmp_path / (name[:-3] + ".mpy")
            r = subprocess.run(
                [mpy_cross_exe(), "-march=rv32imc", "-o", str(out), os.path.join(VOICE, name)],
                capture_output=True,
                text=True,
            )
            assert r.returncode == 0, "%s: %s" % (name, r.stderr)


def test_bench_reads_the_meter_and_says_when_it_is_absent(monkeypatch):
    import bench_voice

    out = (
        "engine    WER 0.224  PER 0.437  (30 sentences)\n"
        "espeak-ng WER 0.712  PER 0.672  (through 11025 Hz)\n"
        "ratio     WER 0.31  PER 0.65  (engine / espeak-ng; below 1 is better)\n"
        "flite slt WER 0.156  PER 0.459  (through 11025 Hz)\n"
        "vs flite  WER 1.44  PER 0.95  (engine / flite; below 1 is better)\n"
    )
    fig = bench_voice.parse_meter(out)
    assert fig == {
        "engine_wer": 0.224,
        "engine_per": 0.437,
        "espeak_wer": 0.712,
        "espeak_per": 0.672,
        "ratio_wer": 0.31,
        "ratio_per": 0.65,
        "flite_wer": 0.156,
        "flite_per": 0.459,
        "vs_flite_wer": 1.44,
        "vs_flite_per": 0.95,
    }, fig
    monkeypatch.setattr(bench_voice, "METER", "/nonexistent/speech_meter.py")
    fig, why = bench_voice.measure_wer()
    assert fig is None and "not here" in why and "/nonexistent" in why, why
    monkeypatch.setenv("ORGANBUS_RV32_IMAGE", "/nonexistent/firmware.elf")
    r, why = bench_voice.measure_rv32()
    assert r is None and "no RV32 image at /nonexistent/firmware.elf" in why, why


def test_diphthong_holds_then_glides():
    # the track function (viper on a board, the same lines here): first target held for
    # SEG_HOLD frames, then a straight glide
    from array import array

    seg = array("i", [0] * klatt.NSEG)
    seg[3:9] = array("i", [700, 1200, 2500, 400, 1900, 2500])
    seg[klatt.SEG_N], seg[klatt.SEG_HOLD], seg[klatt.SEG_NA] = 10, 4, 1
    an = array("h", [0, 110])
    fp = array("i", [0] * klatt.NFP)
    f2 = []
    for k in range(10):
        klatt._track(fp, seg, k, an, k)
        f2.append(fp[5])
    assert f2[:5] == [1200] * 5, "held for the first 4 frames (and the glide starts at 0): %r" % f2
    assert f2[5:] == [1200 + 700 * k // 6 for k in range(1, 6)], "then a straight glide: %r" % f2
    assert fp[0] == 110, "one anchor: a level pitch"
