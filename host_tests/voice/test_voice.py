# Voice engine tests that run on CPython and on the MicroPython unix port (viper path there).

from organs.voice import Speech
from organs.voice.lts import Pronouncer
from organs.voice.text import clauses, number_words, ordinal_words

UNIX_PORT = True


def _render(text, viper=True, block=512):
    """All the samples of a text, as one bytearray (tests only; the organ streams)."""
    job = Speech(text, viper=viper)
    buf = bytearray(block * 2)
    out = bytearray()
    while True:
        n = job.fill(buf)
        if not n:
            break
        assert n <= len(buf) and n % 2 == 0, "fill returned %d for a %d-byte buffer" % (n, len(buf))
        out += buf[:n]
    return out


def _words(text):
    pr = Pronouncer()
    try:
        return [c for c in clauses(text, pr.words)]
    finally:
        pr.close()


def test_speech_is_sound():
    pcm = _render("The light is on.")
    n = len(pcm) // 2
    assert 0.4 * 11025 < n < 3 * 11025, "4 words should last about a second, got %d samples" % n
    peak = 0
    for i in range(0, len(pcm), 2):
        v = pcm[i] | (pcm[i + 1] << 8)
        if v >= 32768:
            v -= 65536
        if abs(v) > peak:
            peak = abs(v)
    assert 2000 < peak <= 32767, "speech peak should be clearly audible, got %d" % peak


def test_duration_grows_with_text():
    a = len(_render("Hi."))
    b = len(_render("Hello there, how are you?"))
    c = len(_render("Hello there, how are you? The kitchen light is on and the door is open."))
    assert a < b < c, "durations should grow with the text: %d %d %d" % (a, b, c)


def test_stop_ends_within_one_block():
    job = Speech("This sentence is long enough to need many blocks of audio to say it all.")
    buf = bytearray(1024)
    assert job.fill(buf) == 1024, "the first block should be full"
    job.stop()
    assert job.fill(buf) == 0, "after stop() the next fill must return 0"
    assert job.fill(buf) == 0, "and stay finished"


def test_unspeakable_text_is_silence_not_error():
    for text in ("", "   ", "\x00\x01\x7f", "\U0001f600\U0001f680", "...!?", b"\xff\xfe\x80"):
        job = Speech(text)
        assert job.fill(bytearray(512)) == 0, "nothing speakable in %r should give silence" % text


def test_odd_and_tiny_buffers():
    job = Speech("OK.")
    total = 0
    buf = bytearray(3)
    while True:
        n = job.fill(buf)
        if not n:
            break
        assert n == 2, "a 3-byte buffer holds one sample, got %d bytes" % n
        total += n
    assert total == len(_render("OK.")), "block size must not change the samples' count"


def test_block_size_does_not_change_samples():
    a = _render("Good morning, seven thirty.", block=512)
    b = _render("Good morning, seven thirty.", block=97)
    assert a == b, "rendering in 97-sample blocks must give the same samples as 512"


def test_numbers_and_times():
    assert number_words(0) == ["zero"], "zero"
    assert number_words(115) == ["one", "hundred", "fifteen"], number_words(115)
    assert number_words(2000005) == ["two", "million", "five"], number_words(2000005)
    assert ordinal_words(21) == ["twenty", "first"], ordinal_words(21)
    assert ordinal_words(12) == ["twelfth"], ordinal_words(12)
    w = _words("At 7:05 pm it was 50% of 3 km.")
    assert w == [
        (
            ["at", "seven", "oh", "five", "pee", "em", "it", "was", "fifty", "percent", "of"]
            + ["three", "kilometers"],
            ".",
        )
    ], w


def test_clauses_and_abbreviations():
    w = _words("Dr. Smith is here, ok? Yes; the 2nd door!")
    assert w == [
        (["doctor", "smith", "is", "here"], ","),
        (["ok"], "?"),
        (["yes"], ","),
        (["the", "second", "door"], "!"),
    ], w


def test_lexicon_and_rules():
    pr = Pronouncer()
    try:
        assert pr.lookup("the") == "Dx", "'the' is a lexicon word: %r" % pr.lookup("the")
        assert pr.lookup("zzzq") is None, "an unknown word is not in the lexicon"
        assert pr.rules("blink") == "blINk", "NRL rules for 'blink': %r" % pr.rules("blink")
        assert pr.rules("battery") == "batRi", "geminates are spoken once: %r" % pr.rules("battery")
        assert pr.pronounce("glorp").count("1") == 1, "rule words get one primary stress"
        assert pr.is_function("the") and not pr.is_function("light"), "function words"
    finally:
        pr.close()


def test_rate_is_checked():
    try:
        Speech("hi", rate=1000)
    except ValueError as e:
        assert "rate" in str(e), "the error should name the rate: %s" % e
    else:
        assert False, "a 1000 Hz rate must be refused"


def test_stop_before_start_and_queued_jobs_are_light():
    import gc

    gc.collect()
    before = gc.mem_alloc() if hasattr(gc, "mem_alloc") else 0
    jobs = [Speech("Queued job number %d is waiting." % i) for i in range(4)]
    gc.collect()
    if hasattr(gc, "mem_alloc"):
        per_job = (gc.mem_alloc() - before) // 4
        assert per_job < 1024, "a queued job should hold little more than its text: %d" % per_job
    jobs[0].stop()
    assert jobs[0].fill(bytearray(512)) == 0, "a job stopped before it started says nothing"
    assert jobs[1].fill(bytearray(512)) == 512, "the others still speak"


def test_money_decimals_and_degrees():
    w = _words("$1,000.50 and 1,234.5 km at 5\u00b0C")
    assert w == [
        (
            ["one", "thousand", "dollars", "and", "fifty", "cents", "and", "one", "thousand"]
            + ["two", "hundred", "thirty", "four", "point", "five", "kilometers", "at", "five"]
            + ["degrees", "celsius"],
            ".",
        )
    ], w


def test_missing_data_file_is_named():
    from organs.voice import speech

    saved = speech.RULES
    speech.RULES = saved + ".missing"
    try:
        Speech("hello")
    except OSError as e:
        assert "rules.txt.missing" in str(e), "the error should name the file: %s" % e
    else:
        assert False, "a missing data file must be refused at construction"
    finally:
        speech.RULES = saved


def test_long_words_are_split_not_cut():
    w = _words("a" + "bc" * 40)
    assert [len(x) for x in w[0][0]] == [30, 30, 21], "81 letters in pieces of 30: %r" % w


def test_no_digital_silence_inside_speech():
    # A stop's closure and a pause carry a faint noise floor (about -66 dBFS), never a run
    # of exact zeros: the recognizer's closure and silence models are trained on real rooms,
    # and all-zero frames (before: 832 zero samples in a row in "a paper cup") score far
    # outside them (broad-set WER 0.493 -> 0.444 with the floor).
    pcm = _render("A paper cup.")
    run = longest = peak = quiet = 0
    for i in range(0, len(pcm), 2):
        v = pcm[i] | (pcm[i + 1] << 8)
        if v >= 32768:
            v -= 65536
        run = run + 1 if v == 0 else 0
        longest = max(longest, run)
        peak = max(peak, abs(v))
        quiet += abs(v) <= 16
    assert longest < 8, "a run of %d zero samples inside the speech" % longest
    # and it stays a floor: the closures are far below the vowels
    assert quiet > 2000 and peak > 100 * 16, "%d samples at the floor, peak %d" % (quiet, peak)
