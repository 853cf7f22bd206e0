# Klatt (1980) style cascade/parallel formant synthesizer in integer fixed point.
#
# A frame's parameters become integer coefficients once (set_frame); render() then runs
# the per-sample loop over n samples. One source: three viper functions on MicroPython, the
# same lines as Python on CPython (the host shim's viper decorator and ptr casts are the
# identity, tools/shim/micropython.py), so the samples are identical on every interpreter.
# Resonators: y = (A*x + B*y1 + C*y2) >> 12 (Q12 coefficients), every state clamped to
# +-65535 so no product leaves 31 bits on a 32-bit viper build.
# Signal path: glottal-flow-derivative table (phase accumulator) + aspiration noise ->
# nasal zero/pole pair -> R1..R5 cascade; frication noise -> parallel R2..R5 + bypass.

import math
import sys
from array import array

import micropython
from micropython import const

# coefficient array (array "i") layout
_DPH = const(0)  # phase increment per sample, 65536 = one glottal period
_AV = const(1)
_AH = const(2)
_AF = const(3)
_FLAGS = const(4)  # bit 0: nasal pair on, bit 1: parallel branch on
_GAIN = const(5)
_NZ = const(6)  # nasal zero B, C (unnormalized)
_NP = const(8)  # nasal pole G, B, C
_R1 = const(11)  # cascade R1..R5: A, B, C each (11..25)
_P2 = const(26)  # parallel R2..R5: A, B, C each (26..37)
_G2 = const(38)  # parallel gains A2..A5 (38..41) and AB (42)
_AB = const(42)
NCO = 43

# state array (array "i") layout
_N = const(0)  # samples to render
_OFF = const(1)  # first sample index in the output buffer
_PH = const(2)
_SEED = const(3)
NST = 26  # 4,5 nasal zero inputs; 6,7 nasal pole; 8..17 cascade; 18..25 parallel

FRAME = 64  # samples per parameter frame (5.8 ms at 11,025 Hz)


def _glottal():
    """One period of the KLGLOTT88 flow derivative (open quotient 0.6), 256 bytes + 128."""
    t = bytearray(256)
    oq = 154
    for i in range(256):
        if i < oq:
            tau = i / oq
            v = (2 * tau - 3 * tau * tau) * 127
            t[i] = 128 + int(math.floor(v + 0.5))
        else:
            t[i] = 128
    return bytes(t)


GLOTTAL = _glottal()


def _amp_table():
    a = array("H", [0])
    for d in range(1, 81):
        a.append(int(math.floor(1024 * 2 ** ((d - 80) / 6) + 0.5)))
    return a


AMP = _amp_table()


def _cos_table():
    # quarter wave of cos in Q14: COSQ[k] = cos(k * pi / 512), k = 0..256
    t = array("h", bytes(2 * 257))
    for k in range(257):
        t[k] = int(math.floor(16384 * math.cos(k * math.pi / 512) + 0.5))
    return t


COSQ = _cos_table()


_RTAB = {}


def r_table(rate):
    """exp(-pi * bw / rate) in Q14 for bw = 0, 10, .. 2000 Hz (one per rate, 402 bytes)."""
    t = _RTAB.get(rate)
    if t is None:
        t = array("h", bytes(2 * 201))
        for k in range(201):
            t[k] = int(math.floor(16384 * math.exp(-math.pi * k * 10 / rate) + 0.5))
        _RTAB[rate] = t
    return t


# frame parameter array (array "i", NFP long) layout: what set_frame() turns into co[]
F0 = const(0)  # Hz (0: keep the phase running at 100 Hz)
AV = const(1)  # voicing, aspiration, frication amplitudes in dB 0..80
AH = const(2)
AF = const(3)
FR = const(4)  # F1..F5 (4..8), Hz
BW = const(9)  # B1..B5 (9..13), Hz
FNP = const(14)  # nasal pole and zero, Hz (equal: no nasal pair)
FNZ = const(15)
PAR = const(16)  # parallel A2..A5 and AB (16..20), dB
F5P = const(21)  # top parallel band centre, Hz
_RATE = const(22)
_TOP = const(23)  # highest resonance allowed (45% of the rate)
NFP = 24

# segment array (array "i", NSEG long) for track(): one phoneme's formant path and the
# clause's pitch position. Formants F1..F3 go boundary -> target -> boundary.
SEG_BL = const(0)  # F1..F3 at the boundary with the phoneme before (0..2)
SEG_T0 = const(3)  # target at the phoneme's start (3..5) and end (6..8)
SEG_T1 = const(6)
SEG_BR = const(9)  # F1..F3 at the boundary with the phoneme after (9..11)
SEG_TIN = const(12)  # frames moving in from BL, frames moving out to BR
SEG_TOUT = const(13)
SEG_N = const(14)  # the phoneme's frames
SEG_AI = const(15)  # current pitch anchor (advanced by track())
SEG_NA = const(16)  # pitch anchors in the clause
SEG_HOLD = const(17)  # frames the start target is held before moving to the end target
NSEG = 18

# tabs (array "h"): AMP at 0 (81), COSQ at _TC (257), the rate's r table at _TR (201)
_TC = const(81)
_TR = const(338)
NTAB = 539


def tables(rate):
    """The three lookup tables the frame code needs, in one array "h" (1078 bytes)."""
    t = array("h", bytes(2 * NTAB))
    for k in range(81):
        t[k] = AMP[k]
    for k in range(257):
        t[_TC + k] = COSQ[k]
    r = r_table(rate)
    for k in range(201):
        t[_TR + k] = r[k]
    return t


class Synth:
    """Formant synthesizer state; fill fp[] (NFP layout), frame(), then render() repeatedly."""

    def __init__(self, rate=11025, viper=True):
        self.rate = rate
        self.co = array("i", bytes(4 * NCO))
        self.st = array("i", bytes(4 * NST))
        self.st[_SEED] = 12345
        self.co[_GAIN] = 4096
        self.fp = array("i", bytes(4 * NFP))
        self.fp[_RATE] = rate
        self.fp[_TOP] = rate * 45 // 100  # keep every resonance below Nyquist at low rates
        self.tabs = tables(rate)
        # viper=False (tools/say.py --pure) is accepted as before: there is one source, and
        # every interpreter gives the same samples from it
        # per co slot: last f, last bw, last A; then the count of silent frames in a row
        self._memo = array("i", bytes(4 * (3 * NCO + 1)))
        for k in range(0, 3 * NCO, 3):
            self._memo[k] = -1  # no frequency seen yet
        self._frame = _frame
        self.track = _track

    def frame(self):
        """Turn the parameters in fp[] into the next frame's coefficients."""
        self._frame(self.co, self.st, self.fp, self._memo, self.tabs)

    def set_frame(self, f0, av, ah, af, fr, bw, fnp, fnz, par):
        """f0 in Hz (0: keep phase running at 100 Hz); av ah af in dB 0..80;
        fr/bw: 5 cascade formants and bandwidths (Hz); fnp/fnz: nasal pole and zero
        (Hz; equal means no nasal); par: (A2, A3, A4, A5, AB) in dB and F5p (Hz)."""
        fp = self.fp
        fp[F0] = f0
        fp[AV] = av
        fp[AH] = ah
        fp[AF] = af
        for i in range(5):
            fp[FR + i] = fr[i]
            fp[BW + i] = bw[i]
            fp[PAR + i] = par[i]
        fp[FNP] = fnp
        fp[FNZ] = fnz
        fp[F5P] = par[5]
        self.frame()

    def set_gain(self, g):
        """Output gain, Q12 (4096 = 1); at most 16384 so y * gain stays below 2**31."""
        self.co[_GAIN] = min(max(g, 0), 16384)

    def render(self, buf, off, n):
        """Write n 16-bit little-endian samples into buf starting at sample index off."""
        st = self.st
        st[_N] = n
        st[_OFF] = off
        if not _MP:
            # what viper's ptr16 makes of the bytes (an odd buffer's last byte is never written)
            buf = memoryview(buf)[: len(buf) & ~1].cast("h")
        _render(buf, st, self.co, GLOTTAL)


_MP = sys.implementation.name == "micropython"


# The frame's coefficients: amplitudes, nasal pair, cascade R1..R5, parallel R2..R5 and
# their gains, each resonator recomputed only when its frequency or bandwidth changed
# (memo). ptr32 loads zero-extend on 64-bit ports: the dB values, which may be
# negative, get their sign back as in _render; every other value read is >= 0.
@micropython.viper
def _frame(co: ptr32, st: ptr32, fp: ptr32, memo: ptr32, tabs: ptr16):
    rate = fp[22]
    top = fp[23]
    f0 = fp[0]
    if f0 <= 0:
        f0 = 100
    co[0] = (f0 * 65536) // rate
    loud = 0
    for k in range(3):
        a = ((fp[1 + k] + 0x20000000) & 0x3FFFFFFF) - 0x20000000  # may be negative
        if a < 0:
            a = 0
        elif a > 80:
            a = 80
        v = tabs[a]
        co[1 + k] = v
        loud |= v
    if loud:
        memo[129] = 0
    else:
        # after two silent frames the filters have rung out: clear them, so integer
        # rounding cannot leave a faint limit cycle humming through a pause
        q = memo[129] + 1
        memo[129] = q
        if q == 3:
            for k in range(4, 26):
                st[k] = 0
    old = co[4]
    fnp = fp[14]
    fnz = fp[15]
    nasal = fnz != fnp
    par_on = 0
    if co[3]:
        par_on = fp[16] | fp[17] | fp[18] | fp[19] | fp[20]
    flags = 0
    if nasal:
        flags = 1
    elif old & 1:
        for k in range(4, 8):
            st[k] = 0
    if par_on:
        flags |= 2
        for k in range(5):
            a = ((fp[16 + k] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
            if a < 0:
                a = 0
            elif a > 80:
                a = 80
            co[38 + k] = tabs[a]
    elif old & 2:
        for k in range(18, 26):
            st[k] = 0
    az = 0
    ap = 0
    for r in range(11):
        # request r: (co slot, frequency, bandwidth, normalized)
        norm = 1
        if r == 0:
            if not nasal:
                continue
            slot = 6
            f = fnz
            bw = 200  # the nasal zero: wider than the pole (a shallower notch)
            norm = 0
        elif r == 1:
            if not nasal:
                continue
            slot = 9
            f = fnp
            bw = 100
            norm = 0
        elif r < 7:
            slot = 11 + 3 * (r - 2)
            f = fp[4 + r - 2]
            bw = fp[9 + r - 2]
        else:
            if not par_on:
                break
            slot = 26 + 3 * (r - 7)
            if r == 10:
                f = fp[21]
                bw = 400
            else:
                f = fp[5 + r - 7]
                bw = 200
                if r == 8:
                    bw = 250
                elif r == 9:
                    bw = 320
        if f > top:
            f = top
        m = 3 * slot
        if memo[m] == f and memo[m + 1] == bw:
            a = memo[m + 2]
        else:
            memo[m] = f
            memo[m + 1] = bw
            bi = bw // 10
            if bi < 1:
                bi = 1
            elif bi > 200:
                bi = 200
            rr = tabs[338 + bi]
            p = (f * 16384) // rate  # cos(2 pi f / rate) in Q14, 16384 units per turn
            if p > 8192:
                p = 8192
            elif p < 0:
                p = 0
            q = p
            if p > 4096:
                q = 8192 - p
            i = q >> 4
            v = tabs[81 + i]
            if i < 256:
                v += ((tabs[82 + i] - v) * (q & 15)) >> 4
            if p > 4096:
                v = 0 - v
            b = (rr * v) >> 15
            c = 0 - ((rr * rr) >> 16)
            a = 4096 - b - c
            memo[m + 2] = a
            if norm:
                co[slot] = a
                co[slot + 1] = b
                co[slot + 2] = c
            else:
                co[slot] = b
                co[slot + 1] = c
        if r == 0:
            az = a
        elif r == 1:
            ap = a
    if nasal:
        if az > 0:
            co[8] = (ap * 4096) // az
        else:
            co[8] = 4096
    co[4] = flags


# ptr32 loads zero-extend on 64-bit ports: values here are within +-2**29, so
# ((v + 2**29) & (2**30 - 1)) - 2**29 restores the sign on any port.
@micropython.viper
def _render(buf: ptr16, st: ptr32, co: ptr32, gl: ptr8):
    n = ((st[0] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    o = ((st[1] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    ph = ((st[2] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    seed = ((st[3] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    x1 = ((st[4] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    x2 = ((st[5] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    n1 = ((st[6] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    n2 = ((st[7] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    r1a = ((st[8] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    r1b = ((st[9] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    r2a = ((st[10] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    r2b = ((st[11] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    r3a = ((st[12] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    r3b = ((st[13] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    r4a = ((st[14] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    r4b = ((st[15] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    r5a = ((st[16] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    r5b = ((st[17] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    p2a = ((st[18] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    p2b = ((st[19] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    p3a = ((st[20] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    p3b = ((st[21] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    p4a = ((st[22] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    p4b = ((st[23] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    p5a = ((st[24] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    p5b = ((st[25] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    dph = ((co[0] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    av = ((co[1] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    ah = ((co[2] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    af = ((co[3] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    flags = ((co[4] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    gain = ((co[5] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    bz = ((co[6] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    cz = ((co[7] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    gn = ((co[8] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    bn = ((co[9] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    cn = ((co[10] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    a1 = ((co[11] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    b1 = ((co[12] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    c1 = ((co[13] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    a2 = ((co[14] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    b2 = ((co[15] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    c2 = ((co[16] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    a3 = ((co[17] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    b3 = ((co[18] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    c3 = ((co[19] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    a4 = ((co[20] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    b4 = ((co[21] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    c4 = ((co[22] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    a5 = ((co[23] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    b5 = ((co[24] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    c5 = ((co[25] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    pa2 = ((co[26] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    pb2 = ((co[27] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    pc2 = ((co[28] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    pa3 = ((co[29] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    pb3 = ((co[30] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    pc3 = ((co[31] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    pa4 = ((co[32] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    pb4 = ((co[33] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    pc4 = ((co[34] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    pa5 = ((co[35] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    pb5 = ((co[36] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    pc5 = ((co[37] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    g2 = ((co[38] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    g3 = ((co[39] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    g4 = ((co[40] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    g5 = ((co[41] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    gab = ((co[42] + 0x20000000) & 0x3FFFFFFF) - 0x20000000
    for _ in range(n):
        ph = (ph + dph) & 0xFFFF
        g = int(gl[ph >> 8]) - 128
        seed = (seed * 1664525 + 1013904223) & 0xFFFFFF
        nz = (seed >> 8) - 32768
        if av > 0 and ph >= 32768:
            nz = nz >> 1
        x = ((g * av) >> 3) + ((nz * ah) >> 11)
        if flags & 1:
            t = x - ((bz * x1 + cz * x2) >> 12)
            x2 = x1
            x1 = x
            if t > 65535:
                t = 65535
            elif t < -65535:
                t = -65535
            y = (gn * t + bn * n1 + cn * n2) >> 12
            if y > 65535:
                y = 65535
            elif y < -65535:
                y = -65535
            n2 = n1
            n1 = y
            x = y
        y = (a1 * x + b1 * r1a + c1 * r1b) >> 12
        if y > 65535:
            y = 65535
        elif y < -65535:
            y = -65535
        r1b = r1a
        r1a = y
        y = (a2 * y + b2 * r2a + c2 * r2b) >> 12
        if y > 65535:
            y = 65535
        elif y < -65535:
            y = -65535
        r2b = r2a
        r2a = y
        y = (a3 * y + b3 * r3a + c3 * r3b) >> 12
        if y > 65535:
            y = 65535
        elif y < -65535:
            y = -65535
        r3b = r3a
        r3a = y
        y = (a4 * y + b4 * r4a + c4 * r4b) >> 12
        if y > 65535:
            y = 65535
        elif y < -65535:
            y = -65535
        r4b = r4a
        r4a = y
        y = (a5 * y + b5 * r5a + c5 * r5b) >> 12
        if y > 65535:
            y = 65535
        elif y < -65535:
            y = -65535
        r5b = r5a
        r5a = y
        if flags & 2:
            f = (nz * af) >> 11
            p = (pa2 * f + pb2 * p2a + pc2 * p2b) >> 12
            if p > 65535:
                p = 65535
            elif p < -65535:
                p = -65535
            p2b = p2a
            p2a = p
            p = (pa3 * f + pb3 * p3a + pc3 * p3b) >> 12
            if p > 65535:
                p = 65535
            elif p < -65535:
                p = -65535
            p3b = p3a
            p3a = p
            p = (pa4 * f + pb4 * p4a + pc4 * p4b) >> 12
            if p > 65535:
                p = 65535
            elif p < -65535:
                p = -65535
            p4b = p4a
            p4a = p
            p = (pa5 * f + pb5 * p5a + pc5 * p5b) >> 12
            if p > 65535:
                p = 65535
            elif p < -65535:
                p = -65535
            p5b = p5a
            p5a = p
            y += (g2 * p2a - g3 * p3a + g4 * p4a - g5 * p5a + gab * f) >> 10
            if y > 131071:
                y = 131071
            elif y < -131071:
                y = -131071
        s = ((y * gain) >> 12) + (nz >> 11)  # a noise floor: never digital silence
        if s > 32767:
            s = 32767
        elif s < -32767:
            s = -32767
        buf[o] = s
        o += 1
    st[2] = ph
    st[3] = seed
    st[4] = x1
    st[5] = x2
    st[6] = n1
    st[7] = n2
    st[8] = r1a
    st[9] = r1b
    st[10] = r2a
    st[11] = r2b
    st[12] = r3a
    st[13] = r3b
    st[14] = r4a
    st[15] = r4b
    st[16] = r5a
    st[17] = r5b
    st[18] = p2a
    st[19] = p2b
    st[20] = p3a
    st[21] = p3b
    st[22] = p4a
    st[23] = p4b
    st[24] = p5a
    st[25] = p5b


# Frame k of a phoneme (seg[], NSEG layout) at clause frame t: F1..F3 into fp[4..6]
# and F0 into fp[0] from the pitch anchors (frame, Hz pairs, array "h"). Every value
# read here is non-negative, so zero-extending loads on 64-bit ports do no harm.
@micropython.viper
def _track(fp: ptr32, seg: ptr32, k: int, an: ptr16, t: int):
    n = seg[14]
    tin = seg[12]
    tout = seg[13]
    hold = seg[17]
    kk = k - hold
    if kk < 0:
        kk = 0
    for j in range(3):
        a = seg[3 + j]
        v = a + ((seg[6 + j] - a) * kk) // (n - hold)
        if k < tin:
            a = seg[j]
            v = a + ((v - a) * (2 * k + 1)) // (2 * tin)
        elif n - 1 - k < tout:
            a = seg[9 + j]
            v = a + ((v - a) * (2 * (n - k) - 1)) // (2 * tout)
        fp[4 + j] = v
    ai = seg[15]
    na = seg[16]
    while ai + 1 < na and an[2 * ai + 2] <= t:
        ai += 1
    seg[15] = ai
    if ai + 1 < na:
        t0 = an[2 * ai]
        h0 = an[2 * ai + 1]
        t1 = an[2 * ai + 2]
        h1 = an[2 * ai + 3]
        if t1 > t0:
            fp[0] = h0 + ((h1 - h0) * (t - t0)) // (t1 - t0)
        else:
            fp[0] = h1
    else:
        fp[0] = an[2 * ai + 1]
