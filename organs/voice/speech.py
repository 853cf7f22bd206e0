# The speech audio job: text -> clauses -> phonemes -> frames -> PCM, one block at a time.
#
# Speech(text).fill(buf) writes 16-bit little-endian mono samples into buf and returns the
# byte count (0 when finished); stop() ends it at once. RAM: one clause's phoneme plan
# and the synthesizer's two small arrays; the utterance never exists as audio in RAM.

import os
from array import array

from . import phonemes as P
from . import prosody
from .klatt import AF, AH, AV, BW, F0, F5P, FNP, FNZ, FR, FRAME, NSEG, PAR, SEG_AI, SEG_BL
from .klatt import SEG_BR, SEG_HOLD, SEG_N, SEG_NA, SEG_T0, SEG_T1, SEG_TIN, SEG_TOUT, Synth
from .lts import LEXICON, RULES, WORDS, Pronouncer
from .text import clauses

_SIL = prosody._SIL
_L = P.CODES.find("l")
DIPH_HOLD = 40  # percent of a diphthong spent on its first target (35 before 2026-12-04)
_GLIDE_MS = 100  # at most this long gliding to its end target ("now" heard "no" when slower)
BWS = 60  # percent of the table's formant bandwidths (narrower reads better)
_F4, _F5, _B4, _B5 = 3300, 3850, 250, 200
_FNP = 270

# Burst length in frames at the end of a stop (p b t d k g).
_BURST = {"p": 2, "b": 1, "t": 3, "d": 2, "k": 3, "g": 3}
# Top parallel band centre for each fricative or burst.
_F5P = {"s": 4700, "z": 4700, "T": 4400, "D": 4400, "t": 4400, "d": 4400}
_DEFAULT_F5P = 3900
# Nasal murmur antiresonance (Hz) by place: labial low, alveolar mid, velar high.
_FNZ = {"m": 800, "n": 1500, "N": 2300}
# Locus equations (F2 and F3 at a consonant-vowel boundary = locus + k% * (vowel - locus)) by
# place: (F2 locus, k2, F3 locus, k3) for labials, dentals /T D/, palatals /s z S Z C J/ (the
# sibilants' high F2) and other alveolars. Velars have no fixed locus (see _locus).
_LOCI = (800, 65, 2200, 60, 1500, 50, 2600, 50, 2100, 30, 2700, 50, 1800, 60, 2700, 50)


def _weight(kind):
    if kind & P.VOWEL:
        return 1
    if kind & P.ASPIR:
        return 0
    if kind & P.GLIDE:
        return 3
    return 2


def _trans_ms(kind, other):
    """Milliseconds a phoneme of `kind` spends moving to its target next to `other`."""
    if kind & P.VOWEL:
        if other & P.STOP:
            return 50
        if other & P.GLIDE:
            return 70
        if other & (P.NASAL | P.FRIC):
            return 40
        if other & P.VOWEL:
            return 50
        return 0
    if kind & P.GLIDE:
        return 45
    if kind & (P.NASAL | P.FRIC):
        return 15
    return 0


class Speech:
    """Audio job speaking `text` (str or UTF-8 bytes, up to a few hundred bytes)."""

    def __init__(self, text, rate=11025, viper=True):
        if not isinstance(rate, int) or not 8000 <= rate <= 22050:
            raise ValueError("rate must be an int from 8000 to 22050 Hz, got %r" % (rate,))
        if not P.CODES:
            raise OSError("voice data missing: phonemes.dat (run tools/voice_data.py)")
        for path in (LEXICON, WORDS, RULES):
            try:
                os.stat(path)  # fail now, naming the file, rather than go silent later
            except OSError:
                raise OSError("voice data missing: %s" % path)
        # A queued job holds only its text; the working state (about 4 KB and three open
        # files) exists from the first fill() until the job finishes or is stopped.
        self.rate = rate
        self._text = text
        self._viper = viper
        self._syn = None
        self._pr = None
        self._done = False

    def _start(self):
        self._syn = Synth(self.rate, self._viper)
        self._syn.set_gain(_GAIN)
        self._pr = Pronouncer()
        self._clauses = clauses(self._text, self._pr.words)
        self._text = None
        self._next = None
        self._cur = None
        self._w0 = 0
        self._cl = prosody.Clause()
        self._first = True
        self._frames = None
        self._left = 0
        self._tg = [0] * 6  # scratch: F1-3 of the phonemes either side of a boundary
        self._seg = array("i", bytes(4 * NSEG))  # the current phoneme's formant path

    def stop(self):
        """End the speech now: the next fill() returns 0."""
        self._finish()

    def _finish(self):
        self._done = True
        self._frames = None
        self._clauses = None
        self._cl = None
        self._text = None
        if self._pr is not None:
            self._pr.close()
            self._pr = None

    def fill(self, buf):
        """Render the next block into buf (bytearray, even length); bytes written, 0 at end."""
        if self._done:
            return 0
        if self._syn is None:
            try:
                self._start()
            except Exception as e:  # noqa: BLE001 - a voice must never crash the organ
                _report(e)
                self._finish()
                return 0
        n = len(buf) // 2
        pos = 0
        syn = self._syn
        while pos < n:
            if self._left == 0:
                if not self._next_frame():
                    break
            k = self._left
            if k > n - pos:
                k = n - pos
            syn.render(buf, pos, k)
            pos += k
            self._left -= k
        return pos * 2

    def _next_clause(self):
        """Plan the next clause (one clause of lookahead tells whether this one is last)."""
        try:
            if self._cur is None or self._w0 >= len(self._cur[0]):
                if self._next is None:
                    self._next = next(self._clauses, None)
                self._cur = self._next
                self._w0 = 0
                if self._cur is None:
                    return None
                self._next = next(self._clauses, None)
            words, end = self._cur
            self._w0 = prosody.plan(
                self._cl, words, self._w0, end, self._pr, self.rate, self._first, self._next is None
            )
            self._first = False
            return self._cl
        except Exception as e:  # noqa: BLE001 - a voice must never crash the organ
            _report(e)
            return None

    def _next_frame(self):
        while True:
            if self._frames is None:
                cl = self._next_clause()
                if cl is None:
                    self._finish()
                    return False
                self._frames = self._frame_gen(cl)
            try:
                next(self._frames)
            except StopIteration:
                self._frames = None
                continue
            except Exception as e:  # noqa: BLE001
                _report(e)
                self._finish()
                return False
            self._left = FRAME
            return True

    # -- per-frame parameters ----------------------------------------------------------

    def _targets(self, cl, i, out, off, end):
        """F1..F3 target of phoneme i (its end target when `end`) into out[off:off+3]."""
        c = cl.ph[i]
        if c == _SIL:
            return False
        kind = P.PARAMS[c * P.NFIELD]
        if kind & P.ASPIR:
            # /h/ is a voiceless copy of what follows
            j = i + 1
            if j < cl.n and cl.ph[j] != _SIL:
                return self._targets(cl, j, out, off, False)
            base = P.index("x") * P.NFIELD
        else:
            base = c * P.NFIELD
        f = P.PARAMS
        if end and f[base + P.F1E]:
            out[off] = f[base + P.F1E]
            out[off + 1] = f[base + P.F2E]
            out[off + 2] = f[base + P.F3E]
        else:
            out[off] = f[base + P.F1]
            out[off + 1] = f[base + P.F2]
            out[off + 2] = f[base + P.F3]
        if c == _L and i > 0 and cl.ph[i - 1] != _SIL and f[cl.ph[i - 1] * P.NFIELD] & P.VOWEL:
            j = i + 1
            if j >= cl.n or cl.ph[j] == _SIL or not f[cl.ph[j] * P.NFIELD] & P.VOWEL:
                out[off + 1] = 850  # dark /l/ after a vowel ("hall", "almost")
        if kind & P.VELAR:
            # velar place moves with the vowel beside it ("velar pinch" of F2 and F3)
            j = i + 1 if i + 1 < cl.n and cl.ph[i + 1] != _SIL else i - 1
            if 0 <= j < cl.n and cl.ph[j] != _SIL and P.PARAMS[cl.ph[j] * P.NFIELD] & P.VOWEL:
                vb = cl.ph[j] * P.NFIELD
                f2 = f[vb + P.F2] * 11 // 10
                if f2 < 1300:
                    f2 = 1300
                out[off + 1] = f2
                out[off + 2] = f2 + 500 if f[vb + P.F3] < f2 + 500 else f[vb + P.F3]
        return True

    def _boundary(self, cl, a, b, out, o):
        """Formant values at the boundary between phonemes a and b into out[o:o+3]."""
        tg = self._tg
        ha = 0 <= a < cl.n and self._targets(cl, a, tg, 0, True)
        hb = 0 <= b < cl.n and self._targets(cl, b, tg, 3, False)
        if not ha and not hb:
            out[o], out[o + 1], out[o + 2] = 500, 1500, 2500
            return
        if not ha:
            out[o], out[o + 1], out[o + 2] = tg[3], tg[4], tg[5]
            return
        if not hb:
            out[o], out[o + 1], out[o + 2] = tg[0], tg[1], tg[2]
            return
        wa = _weight(P.PARAMS[cl.ph[a] * P.NFIELD])
        wb = _weight(P.PARAMS[cl.ph[b] * P.NFIELD])
        if wa + wb == 0:
            wa = wb = 1
        for j in range(3):
            out[o + j] = (tg[j] * wa + tg[3 + j] * wb) // (wa + wb)
        self._locus(cl, a, b, out, o)

    def _locus(self, cl, a, b, out, o):
        """Place of articulation in the transition: a stop, nasal or fricative beside a vowel
        moves F2/F3 at their boundary to locus + k * (vowel - locus) (locus equations)."""
        f = P.PARAMS
        ka = f[cl.ph[a] * P.NFIELD]
        kb = f[cl.ph[b] * P.NFIELD]
        if ka & P.VOWEL and not kb & P.VOWEL:
            c, kc, v = cl.ph[b], kb, 0  # vowel -> consonant: the vowel's end target
        elif kb & P.VOWEL and not ka & P.VOWEL:
            c, kc, v = cl.ph[a], ka, 3  # consonant -> vowel: its start target
        else:
            return
        if not kc & (P.STOP | P.NASAL | P.FRIC):
            return
        tg = self._tg
        f2v, f3v = tg[v + 1], tg[v + 2]
        if kc & P.VELAR:
            # no fixed locus: F2 a little above the vowel's, F3 close above it (the pinch)
            f2 = f2v + (150 if f2v >= 1500 else 100)
            out[o + 1] = f2
            out[o + 2] = f2 + 400 if f3v < f2 + 400 else f3v
            return
        code = P.CODES[c]
        if kc & P.LABIAL:
            row = 0
        elif code in "TD":
            row = 4
        elif code in "SZCJ":
            row = 8
        else:
            row = 12
        out[o + 1] = _LOCI[row] + _LOCI[row + 1] * (f2v - _LOCI[row]) // 100
        out[o + 2] = _LOCI[row + 2] + _LOCI[row + 3] * (f3v - _LOCI[row + 2]) // 100

    def _frame_gen(self, cl):
        syn = self._syn
        fp, seg = syn.fp, self._seg
        frame, co, st, memo, tabs = syn._frame, syn.co, syn.st, syn._memo, syn.tabs
        track = syn.track
        fp[FR + 3], fp[FR + 4], fp[BW + 3], fp[BW + 4] = _F4, _F5, _B4, _B5
        if self.rate < 10000:  # no room for F5 below Nyquist: F4 lower, F5 flattened
            fp[FR + 3], fp[BW + 4] = self.rate * 41 // 100, 2000
        fp[FNP] = _FNP
        anchors = cl.anchors
        seg[SEG_AI] = 0
        seg[SEG_NA] = cl.na
        t = 0
        ms_per_frame = FRAME * 1000 // self.rate
        f = P.PARAMS
        for i in range(cl.n):
            c = cl.ph[i]
            n = cl.frames[i]
            if c == _SIL:
                fp[F0] = fp[AV] = fp[AH] = fp[AF] = 0
                fp[FNZ] = _FNP
                for k in range(5):
                    fp[PAR + k] = 0
                fp[F5P] = _DEFAULT_F5P
                for k in range(n):
                    frame(co, st, fp, memo, tabs)
                    t += 1
                    yield
                continue
            base = c * P.NFIELD
            kind = f[base]
            code = P.CODES[c]
            prv = cl.ph[i - 1] if i > 0 else _SIL
            nxt = cl.ph[i + 1] if i + 1 < cl.n else _SIL
            pkind = f[prv * P.NFIELD] if prv != _SIL else 0
            nkind = f[nxt * P.NFIELD] if nxt != _SIL else 0
            self._boundary(cl, i - 1, i, seg, SEG_BL)
            self._boundary(cl, i, i + 1, seg, SEG_BR)
            h = kind & P.ASPIR
            tin = _trans_ms(kind, pkind) // ms_per_frame
            tout = _trans_ms(kind, nkind) // ms_per_frame
            if h:
                tin = tout = 0
            if tin > n // 2:
                tin = n // 2
            if tout > n - tin:
                tout = n - tin
            seg[SEG_TIN] = tin
            seg[SEG_TOUT] = tout
            seg[SEG_N] = n
            # a diphthong holds its first target a while, then glides (Klatt 1979)
            seg[SEG_HOLD] = n * DIPH_HOLD // 100 if kind & P.DIPH else 0
            g = _GLIDE_MS // ms_per_frame
            if kind & P.DIPH and n - seg[SEG_HOLD] - tout > g:
                seg[SEG_HOLD] = n - tout - g  # a long one holds longer, not glides slower
            self._targets(cl, i, seg, SEG_T0, False)
            self._targets(cl, i, seg, SEG_T1, True)
            if kind & P.DIPH:
                # F2's glide reaches its end target where the transition out begins (else a
                # following consonant's transition cuts it short: "I found" heard "by found"),
                # aimed past the target by at most twice the glide's slope
                g = n - seg[SEG_HOLD]
                m = g - tout
                if m < g // 2:
                    m = g // 2
                if m > 0:
                    a = seg[SEG_T0 + 1]
                    seg[SEG_T1 + 1] = a + (seg[SEG_T1 + 1] - a) * g // m
            bw1 = f[base + P.B1] * BWS // 100
            fp[BW + 1] = f[base + P.B2] * BWS // 100
            fp[BW + 2] = f[base + P.B3] * BWS // 100
            av = f[base + P.AV]
            af = f[base + P.AF]
            ah = f[base + P.AH]
            if kind & P.VOWEL:
                if cl.stress[i] == 2:
                    av += 2
                elif cl.stress[i] == 0:
                    av -= 2
            if cl.flags[i] & prosody.FINAL_SYL:
                av -= 3
            fp[FNZ] = _FNZ.get(code, 1500) if kind & P.NASAL else _FNP
            # no nasalized vowel before a nasal: the murmur alone carries it (a zero at 450 Hz
            # in the vowel's last third, against the 270 Hz pole, cost broad-set words)
            closure = 0  # frames of stop closure before the burst
            vburst = False
            if kind & P.STOP:
                nb = n * 2 // 3 if kind & P.AFFRIC else _BURST.get(code, 1)
                if nb > n:
                    nb = n
                closure = n - nb
                vburst = kind & P.VOICED and not kind & P.AFFRIC
            voiced = kind & P.VOICED
            fp[F5P] = _F5P.get(code, _DEFAULT_F5P)
            asp = cl.asp[i]
            fp[BW] = 300 if h else (250 if asp else bw1)
            onset = 1 if prv != _SIL and not pkind & P.VOICED else 0
            if prv == _SIL:
                onset = 6 if kind & P.VOWEL else (0 if kind & P.NASAL else 3)
            offset = nxt == _SIL
            pon = -1
            for k in range(n):
                track(fp, seg, k, anchors, t)
                a_v, a_h, a_f = av, ah, af
                p_on = 1
                if k < closure:
                    a_f = 0
                    p_on = 0
                    if not voiced:  # a voiced stop's voice bar lasts the whole closure
                        a_v = 0
                elif vburst:
                    a_v = av + 6
                if k < asp:
                    a_v = 0
                    a_h = 50
                elif k == asp and asp:
                    fp[BW] = bw1
                if a_v and k < onset:
                    a_v -= _ONSET[k] if onset == 6 else (12 >> k if onset == 3 else 6)
                if a_v and offset and n - k <= 2:
                    a_v -= 4 * (3 - (n - k))
                if p_on != pon:
                    pon = p_on
                    for j in range(5):
                        fp[PAR + j] = f[base + P.A2 + j] if p_on else 0
                fp[AV] = a_v
                fp[AH] = a_h
                fp[AF] = a_f
                frame(co, st, fp, memo, tabs)
                t += 1
                yield


# dB under full voicing in the first frames of a vowel that starts from silence (a soft onset:
# an abrupt one rings like a /b/ release)
_ONSET = (18, 12, 8, 5, 3, 1)

# Output gain in Q12: about -6 dBFS peaks on vowels; at most 16384 (y * gain < 2**31).
_GAIN = 16384


def _report(e):
    try:
        import sys

        sys.print_exception(e)
    except Exception:
        try:
            import traceback

            traceback.print_exception(e)
        except Exception:
            pass
