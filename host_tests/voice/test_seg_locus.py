# Formant transitions by place of articulation (locus equations in organs/voice/speech.py).
from organs.voice import Speech
from organs.voice import phonemes as P
from organs.voice import prosody

UNIX_PORT = True


def _plan(text):
    job = Speech(text)
    job._start()
    cl = job._next_clause()
    assert cl is not None, "nothing planned for %r" % text
    return job, cl


def _codes(cl):
    return "".join("_" if c == prosody._SIL else P.CODES[c] for c in cl.ph[: cl.n])


def _f2_f3(text, a, b):
    """F2, F3 at the boundary of the first phoneme pair (a, b) of `text`'s plan."""
    job, cl = _plan(text)
    try:
        s = _codes(cl)
        i = s.find(a + b)
        assert i >= 0, "%r planned as %r, no %r" % (text, s, a + b)
        out = [0, 0, 0]
        job._boundary(cl, i, i + 1, out, 0)
        return out[1], out[2]
    finally:
        job.stop()


def _f2_target(code):
    return P.get(P.index(code), P.F2)


def test_nasal_place_sets_the_vowel_onset():
    # "no" and "mow" share the vowel: /n/ (alveolar) starts it from above, /m/ (labial) from below
    n2, _ = _f2_f3("no", "n", "o")
    m2, _ = _f2_f3("mow", "m", "o")
    v2 = _f2_target("o")
    assert m2 < v2 < n2, "F2 onsets /m/ %d, vowel %d, /n/ %d" % (m2, v2, n2)
    assert n2 - m2 >= 300, "the two nasals' transitions must differ clearly: %d vs %d" % (n2, m2)


def test_stop_place_sets_the_transition_both_ways():
    # vowel -> stop (the offset) obeys the same loci as stop -> vowel (the onset)
    p2, _ = _f2_f3("pop", "p", "A")
    t2, _ = _f2_f3("top", "t", "A")
    pe, _ = _f2_f3("top", "A", "p")
    te, _ = _f2_f3("pot", "A", "t")
    assert p2 < t2 and pe < te, "labial %d/%d below alveolar %d/%d" % (p2, pe, t2, te)
    assert p2 == pe and t2 == te, "a vowel's start and end targets are the same here"


def test_velar_locus_follows_the_vowel():
    # no fixed velar locus: F2 close above the vowel's, F3 just above F2 (the velar pinch)
    fi2, fi3 = _f2_f3("key", "k", "i")
    fu2, fu3 = _f2_f3("coo", "k", "u")
    assert fi2 > _f2_target("i") and fu2 > _f2_target("u"), (fi2, fu2)
    assert fi2 - fu2 >= 500, "front and back vowels give far apart velar onsets: %d %d" % (fi2, fu2)
    assert 0 < fi3 - fi2 <= 1000 and 0 < fu3 - fu2 <= 1000, (fi2, fi3, fu2, fu3)


def test_glides_keep_the_weighted_boundary():
    # the locus rule is for stops, nasals and fricatives only: /l/ before a vowel is unchanged
    l2, _ = _f2_f3("low", "l", "o")
    lo, vo = _f2_target("l"), _f2_target("o")
    assert min(lo, vo) <= l2 <= max(lo, vo), (lo, l2, vo)
