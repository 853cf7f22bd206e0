# The synthesizer's sources by place of articulation: burst spectra and the nasal zero.
import math
from array import array

from organs.voice import klatt
from organs.voice import phonemes as P

RATE = 11025


def _render(setup, frames=24):
    """Samples of `frames` frames of a Synth whose fp[] `setup` fills (pure path)."""
    syn = klatt.Synth(RATE, viper=False)
    setup(syn.fp)
    buf = bytearray(2 * klatt.FRAME)
    out = array("h")
    for _ in range(frames):
        syn.frame()
        syn.render(buf, 0, klatt.FRAME)
        out.extend(array("h", bytes(buf)))
    return out[4 * klatt.FRAME :]  # past the filters' start


def _power(x, lo, hi, step=50):
    """Mean power of x (Hann window) at the frequencies lo, lo + step, .. < hi (Goertzel)."""
    n = len(x)
    xw = [v * (0.5 - 0.5 * math.cos(2 * math.pi * i / n)) for i, v in enumerate(x)]
    total = 0.0
    k = 0
    f = lo
    while f < hi:
        w = 2 * math.cos(2 * math.pi * f / RATE)
        s1 = s2 = 0.0
        for v in xw:
            s1, s2 = v + w * s1 - s2, s1
        total += s1 * s1 + s2 * s2 - w * s1 * s2
        k += 1
        f += step
    return total / k


def _burst(code):
    p = P.index(code)
    assert p >= 0, code

    def setup(fp):
        fp[klatt.F0] = 100
        fp[klatt.AF] = P.get(p, P.AF)
        for j in range(3):
            fp[klatt.FR + j] = P.get(p, P.F1 + j)
            fp[klatt.BW + j] = P.get(p, P.B1 + j)
        fp[klatt.FR + 3], fp[klatt.FR + 4] = 3300, 3850
        fp[klatt.BW + 3], fp[klatt.BW + 4] = 250, 200
        fp[klatt.FNP] = fp[klatt.FNZ] = 270
        for j in range(5):
            fp[klatt.PAR + j] = P.get(p, P.A2 + j)
        fp[klatt.F5P] = 4400

    return _render(setup)


def _db(a, b):
    return 10 * math.log10(a / b)


def test_alveolar_burst_is_high():
    x = _burst("t")
    mid, high = _power(x, 1500, 3000), _power(x, 3000, 5400)
    assert _db(high, mid) > 6, "/t/ burst: 3-5.4 kHz only %.1f dB above 1.5-3 kHz" % _db(high, mid)


def test_velar_burst_is_compact_mid():
    x = _burst("k")
    low, mid, high = _power(x, 300, 1200), _power(x, 1500, 3000), _power(x, 3000, 5400)
    assert _db(mid, high) > 3, "/k/ burst: 1.5-3 kHz only %.1f dB above 3-5.4 kHz" % _db(mid, high)
    assert _db(mid, low) > 3, "/k/ burst: 1.5-3 kHz only %.1f dB above 0.3-1.2 kHz" % _db(mid, low)


def test_labial_burst_is_flat_and_weaker_than_alveolar():
    x = _burst("p")
    bands = [_power(x, lo, lo + 1000) for lo in (500, 1500, 2500, 3500)]
    spread = _db(max(bands), min(bands))
    assert spread < 6, "/p/ burst is not flat: bands differ by %.1f dB" % spread
    t = _burst("t")
    assert _db(_power(t, 500, 5400), _power(x, 500, 5400)) > 6, "/p/ burst as loud as /t/'s"


def _voiced(fnz):
    def setup(fp):
        fp[klatt.F0] = 100
        fp[klatt.AV] = 58
        for j, (f, b) in enumerate(((270, 60), (1300, 180), (2400, 180), (3300, 250), (3850, 200))):
            fp[klatt.FR + j] = f
            fp[klatt.BW + j] = b
        fp[klatt.FNP] = 270
        fp[klatt.FNZ] = fnz

    return _render(setup)


def test_nasal_zero_notches_at_its_frequency():
    # the 8th harmonic of the murmur (F0 99.9 Hz): with the zero at 800 Hz, at 2000 Hz, none
    h8 = 8 * (100 * 65536 // RATE) * RATE / 65536
    at800, at2000, off = (_power(_voiced(z), h8, h8 + 1, 1) for z in (800, 2000, 270))
    assert _db(at2000, at800) > 6, "zero at 800 Hz: only %.1f dB less there" % _db(at2000, at800)
    assert _db(off, at800) > 6, "zero at 800 Hz: only %.1f dB under no zero" % _db(off, at800)
