# Prosody: a clause's words -> phonemes with durations (Klatt 1976 rules) and a pitch line.
#
# plan() fills a Clause: parallel byte arrays per phoneme (code index, stress, flags,
# duration in frames) and pitch anchors (frame, Hz) for a falling line with accents on
# stressed syllables of content words, a final fall, or a final rise for questions.

from array import array

from . import phonemes as P
from .klatt import FRAME

# per-phoneme flags
WORD_START = 1
WORD_END = 2
FINAL_SYL = 4  # in the clause's last syllable (phrase-final lengthening)
ASPIRATED = 8  # starts with aspiration after a voiceless stop
PAUSE = 16  # a silence, not a phoneme
FUNC = 32  # belongs to a function word

_SIL = 255  # code index of a silence


SPEED = 80  # percent of Klatt durations
# consonants at 155% of that (124% of Klatt's): at 80% they were far shorter than a natural
# voice's (flite slt, force-aligned: /k/ 59 ms vs 93, /f/ 66 vs 107) and the recognizer
# dropped them; flite's vowels are the shorter ones (the broad set chose 155: 145..160 all
# better than 122)
CSPEED = 155
CAP = 256  # phonemes per clause (longer clauses continue in the next one)
ACAP = 96  # pitch anchors per clause


class Clause:
    """One clause's plan in preallocated arrays, reused clause after clause."""

    def __init__(self):
        self.n = 0
        self.ph = bytearray(CAP)
        self.stress = bytearray(CAP)
        self.flags = bytearray(CAP)
        self.frames = array("H", bytes(2 * CAP))
        self.asp = bytearray(CAP)  # aspiration frames at the phoneme's start
        self.anchors = array("h", bytes(4 * ACAP))  # (frame, Hz) pairs
        self.na = 0

    def reset(self):
        self.n = 0
        self.na = 0
        for i in range(CAP):
            self.asp[i] = 0

    def add(self, code, stress, flags):
        k = self.n
        self.ph[k] = code
        self.stress[k] = stress
        self.flags[k] = flags
        self.n = k + 1

    def anchor(self, t, hz):
        k = self.na
        if k < ACAP:
            self.anchors[2 * k] = t
            self.anchors[2 * k + 1] = hz
            self.na = k + 1


def _kind(c):
    return 0 if c == _SIL else P.PARAMS[c * P.NFIELD]


def plan(cl, words, w0, end, pronouncer, rate, first=True, last=True):
    """Fill Clause cl with words[w0:] (as many as fit); returns the index after the last
    word taken. `end` is the clause's closing punctuation."""
    cl.reset()
    if first:
        cl.add(_SIL, 0, PAUSE)
    wi = w0
    while wi < len(words):
        p = pronouncer.pronounce(words[wi])
        if cl.n + len(p) + 1 >= CAP and wi > w0:
            break  # the rest of the words make the next clause
        func = pronouncer.is_function(words[wi])
        start = cl.n
        stress = 0
        for ch in p:
            if ch == "1" or ch == "2":
                stress = 2 if ch == "1" else 1  # 2 = primary, 1 = secondary
                continue
            code = P.CODES.find(ch)
            if code < 0:
                continue
            s = 0
            if _kind(code) & P.VOWEL:
                s = (1 if stress else 0) if func else stress
                stress = 0
            if cl.n < CAP - 1:
                cl.add(code, s, FUNC if func else 0)
        if cl.n > start:
            cl.flags[start] |= WORD_START
            cl.flags[cl.n - 1] |= WORD_END
        wi += 1
    more = wi < len(words)
    cl.add(_SIL, 0, PAUSE)
    _mark_final_syllable(cl)
    _durations(cl, rate, "," if more else end, last and not more)
    _pitch(cl, "," if more else end)
    return wi


def _mark_final_syllable(cl):
    k = cl.n - 1
    while k >= 0 and cl.ph[k] == _SIL:
        k -= 1
    while k >= 0:
        cl.flags[k] |= FINAL_SYL
        if cl.ph[k] != _SIL and _kind(cl.ph[k]) & P.VOWEL:
            break
        k -= 1


def _word_vowels(cl, i):
    """How many vowels the word holding phoneme i has, and whether i is in its last one."""
    a = i
    while a > 0 and not cl.flags[a] & WORD_START:
        a -= 1
    b = i
    while b < cl.n - 1 and not cl.flags[b] & WORD_END:
        b += 1
    nv = 0
    later = 0
    for k in range(a, b + 1):
        if cl.ph[k] != _SIL and _kind(cl.ph[k]) & P.VOWEL:
            nv += 1
            if k > i:
                later += 1
    return nv, later == 0


def _durations(cl, rate, end, last):
    fms = rate * 1000 // FRAME  # frames per 1000 s
    for i in range(cl.n):
        c = cl.ph[i]
        fl = cl.flags[i]
        if c == _SIL:
            if i == 0:
                ms = 40
            elif not last:
                ms = 150 if end == "," else 250
            else:
                ms = 80
            cl.frames[i] = max(1, ms * fms // 1000000)
            continue
        k = _kind(c)
        inh = P.PARAMS[c * P.NFIELD + P.DUR]
        mn = P.PARAMS[c * P.NFIELD + P.MINDUR]
        prc = 100
        nxt = cl.ph[i + 1] if i + 1 < cl.n else _SIL
        prv = cl.ph[i - 1] if i > 0 else _SIL
        nk = _kind(nxt)
        pk = _kind(prv)
        if k & P.VOWEL:
            if fl & FINAL_SYL:
                prc = prc * 120 // 100
            else:
                prc = prc * 85 // 100
            nv, last_syl = _word_vowels(cl, i)
            if not last_syl:
                prc = prc * 85 // 100
            if nv > 1:
                prc = prc * 80 // 100
            if cl.stress[i] == 0:
                mn = mn // 2
                prc = prc * 60 // 100
            # postvocalic context (Klatt 1979); half of it across a word boundary
            if nxt != _SIL and not nk & P.VOWEL:
                q = 100
                if nk & P.STOP and not nk & P.VOICED:
                    q = 70
                elif nk & P.FRIC and nk & P.VOICED:
                    q = 130
                elif nk & P.STOP and nk & P.VOICED:
                    q = 110
                elif nk & P.NASAL:
                    q = 85
                if fl & WORD_END:
                    q = (100 + q) // 2
                prc = prc * q // 100
            elif fl & WORD_END and cl.stress[i]:
                prc = prc * 115 // 100
            if nxt != _SIL and nk & P.VOWEL:
                prc = prc * 120 // 100
        else:
            if fl & FINAL_SYL:
                prc = prc * 120 // 100
            if not fl & WORD_START:
                prc = prc * 85 // 100
            if fl & FUNC:
                prc = prc * 80 // 100
            cons_n = nxt != _SIL and not nk & P.VOWEL
            cons_p = prv != _SIL and not pk & P.VOWEL
            if cons_n and cons_p:
                prc = prc * 50 // 100
            elif cons_n or cons_p:
                prc = prc * 70 // 100
        ms = (mn + (inh - mn) * prc // 100) * SPEED // 100
        if not k & P.VOWEL:
            ms = ms * CSPEED // 100
        # voiceless stop before a vowel or sonorant: aspiration at the next phoneme's start
        if (
            k & P.STOP
            and not k & (P.VOICED | P.AFFRIC)
            and nxt != _SIL
            and nk & (P.VOWEL | P.GLIDE)
            and not (prv != _SIL and P.CODES[prv] == "s")
        ):
            asp = 45 if cl.stress[i + 1] or (i + 2 < cl.n and cl.stress[i + 2]) else 25
            cl.asp[i + 1] = max(1, asp * fms // 1000000)
            cl.flags[i + 1] |= ASPIRATED
        cl.frames[i] = max(1, ms * fms // 1000000)
    for i in range(cl.n):
        cl.frames[i] += cl.asp[i]


def _pitch(cl, end):
    """Anchors (frame, Hz): declining top line, accents on stressed content vowels."""
    total = 0
    first_acc = last_acc = -1
    level = 2
    while level and first_acc < 0:
        for i in range(cl.n):
            c = cl.ph[i]
            if c != _SIL and _kind(c) & P.VOWEL and cl.stress[i] >= level:
                if first_acc < 0:
                    first_acc = i
                last_acc = i
        level -= 1
    for i in range(cl.n):
        total += cl.frames[i]
    if total == 0:
        total = 1
    start_hz, end_hz = 122, 98
    cl.anchor(0, start_hz - 4)
    t = 0
    for i in range(cl.n):
        c = cl.ph[i]
        if c != _SIL and _kind(c) & P.VOWEL:
            mid = t + cl.frames[i] // 2
            base = start_hz + (end_hz - start_hz) * mid // total
            if end == "?" and i == last_acc:
                hz = base - 4
            elif cl.stress[i] == 2:
                hz = base + (26 if i == first_acc else 16)
            elif cl.stress[i] == 1:
                hz = base + 6
            else:
                hz = base - 4
            cl.anchor(mid, hz)
        t += cl.frames[i]
    if end == "?":
        cl.anchor(total, 165)
    elif end == ",":
        cl.anchor(total, end_hz + 4)
    else:
        cl.anchor(total, end_hz - 18)
