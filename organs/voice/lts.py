# Pronunciation: exception lexicon searched in flash, then the NRL letter-to-sound rules.
#
# The data files stay on the filesystem: `lexicon.dat` and `words.dat` are fixed-width
# sorted records (flash.Records: binary search by seek) and `rules.txt` is read one
# letter's section at a time into a preallocated buffer. A pronunciation is a str of
# one-character phoneme codes (organs/voice/phonemes.py); a "1" or "2" before a vowel
# marks primary or secondary stress.

from .flash import HERE, Records

LEXICON = HERE + "/lexicon.dat"
WORDS = HERE + "/words.dat"
RULES = HERE + "/rules.txt"

_VOWEL_LETTERS = b"AEIOU"
_VOICED = b"BDVGJLMNRWZ"
_FRONT = b"EIY"
# Phoneme codes that are vowels (syllable nuclei).
VOWELS = "iIeEaAOoUuRxVYWQ"
_UNSTRESSED_PREFIXES = ("be", "de", "re", "ex", "con", "com", "pre", "pro", "for", "un", "a")


def _is_vowel(c):
    return c in _VOWEL_LETTERS


def _is_cons(c):
    return 65 <= c <= 90 and c not in _VOWEL_LETTERS


class Pronouncer:
    """word (lowercase ASCII str) -> pronunciation str; data files opened once."""

    def __init__(self, lexicon=LEXICON, rules=RULES, words=WORDS):
        self._lex = Records(lexicon)
        self.words = Records(words)  # abbreviations, units, letters, function words
        self._rules = open(rules, "rb")
        self._index = _section_index(self._rules, rules)
        self._word = bytearray(40)

    def close(self):
        self._lex.close()
        self.words.close()
        try:
            self._rules.close()
        except Exception:
            pass

    def is_function(self, word):
        """A function word: no accent, no stress in running speech."""
        return self.words.get("f" + word) is not None

    def lookup(self, word):
        """Pronunciation from the lexicon, or None."""
        return self._lex.get(word)

    # -- rules -----------------------------------------------------------------------------

    def rules(self, word):
        """Pronunciation by the NRL rules (no stress marks)."""
        w = self._word
        n = len(word)
        if n > len(w) - 2:
            n = len(w) - 2
        w[0] = 32
        for i in range(n):
            c = ord(word[i])
            w[i + 1] = c - 32 if 97 <= c <= 122 else c
        w[n + 1] = 32
        end = n + 2
        out = []
        i = 1
        while i <= n:
            c = w[i]
            sec = self._index[c - 64] if 65 <= c <= 90 else (self._index[0] if c == 39 else 0)
            step = self._apply(sec, w, end, i, out) if sec else 0
            i += step if step > 0 else 1
        return _degeminate("".join(out))

    def _apply(self, sec, w, end, i, out):
        """Try the rules of one letter's section (file offset sec) at w[i]; letters used."""
        f = self._rules
        f.seek(sec)
        while True:
            b = f.readline()  # one rule at a time: no big buffer on a fragmented heap
            if not b or b[0] == 64:
                return 1
            e = len(b)
            if b[e - 1] == 10:
                e -= 1
            if b[0] == 59:  # ";" comment
                continue
            p1 = 0
            while p1 < e and b[p1] != 91:
                p1 += 1
            p2 = p1 + 1
            while p2 < e and b[p2] != 93:
                p2 += 1
            p3 = p2 + 1
            while p3 < e and b[p3] != 61:
                p3 += 1
            mlen = p2 - p1 - 1
            if p3 < e and _lit(b, p1 + 1, mlen, w, i, end):
                left = _context(b, p1 - 1, -1, w, i - 1, end, -1)
                if left and _context(b, p2 + 1, p3, w, i + mlen, end, 1):
                    if p3 + 1 < e:
                        out.append(b[p3 + 1 : e].decode())
                    return mlen

    def pronounce(self, word):
        """Lexicon first, then rules with stress placed by rule of thumb."""
        p = self.lookup(word)
        if p is not None:
            return p
        return place_stress(word, self.rules(word))


def _lit(b, s, n, w, i, end):
    if i + n > end:
        return False
    for k in range(n):
        if b[s + k] != w[i + k]:
            return False
    return True


def _at(w, j, end):
    return w[j] if 0 <= j < end else 32


def _context(b, k, stop, w, j, end, d):
    """Match the context pattern b[k], b[k+d], .. (up to stop) against the word from w[j] on,
    both walked in direction d: -1 for the left context (read outwards), +1 for the right."""
    while k != stop:
        c = b[k]
        x = _at(w, j, end)
        if c == 35:  # "#" one or more vowels
            if not _is_vowel(x):
                return False
            j += d
            while 0 <= j < end and _is_vowel(w[j]):
                j += d
        elif c == 58:  # ":" zero or more consonants
            while 0 <= j < end and _is_cons(w[j]):
                j += d
        elif c == 94:  # "^" one consonant
            if not _is_cons(x):
                return False
            j += d
        elif c == 46:  # "." voiced consonant
            if x not in _VOICED:
                return False
            j += d
        elif c == 43:  # "+" front vowel
            if x not in _FRONT:
                return False
            j += d
        elif c == 37 and d > 0:  # "%" suffix (right context only): ER E ES ED ING ELY
            if x == 69:
                y = _at(w, j + 1, end)
                if y == 76 and _at(w, j + 2, end) == 89:
                    j += 3
                elif y in b"RSD":
                    j += 2
                else:
                    j += 1
            elif x == 73 and _at(w, j + 1, end) == 78 and _at(w, j + 2, end) == 71:
                j += 3
            else:
                return False
        else:
            if x != c:
                return False
            j += d
        k += d
    return True


_INDEX = {}


def _section_index(f, name):
    """File offsets of each letter's rule section: [0] apostrophe, [1..26] A..Z (0 = none).
    Built once per rules file and kept (56 bytes); the file is scanned in 64-byte chunks
    (one read call per chunk, not one per line)."""
    idx = _INDEX.get(name)
    if idx is not None:
        return idx
    from array import array

    idx = array("H", bytes(2 * 27))
    buf = bytearray(64)
    f.seek(0)
    pos = 0  # file offset of buf[0]
    line_start = True
    after_at = False
    want = -1  # the letter whose "@X" line is being read: its section starts after it
    while True:
        n = f.readinto(buf)
        if not n:
            break
        for i in range(n):
            c = buf[i]
            if after_at:
                want = c
                after_at = False
            elif line_start and c == 64:  # "@X" opens the section of X
                after_at = True
            if c == 10:
                line_start = True
                if 65 <= want <= 90:
                    idx[want - 64] = pos + i + 1
                elif want == 39:
                    idx[0] = pos + i + 1
                want = -1
            else:
                line_start = False
        pos += n
    _INDEX[name] = idx
    return idx


def _degeminate(ph):
    """Two identical consonants in a row are spoken once ("battery")."""
    k = 1
    while k < len(ph):
        if ph[k] == ph[k - 1] and ph[k] not in VOWELS:
            ph = ph[:k] + ph[k + 1 :]
        else:
            k += 1
    return ph


def place_stress(word, ph):
    """Mark the primary stress of a rule-made pronunciation (rule of thumb)."""
    vows = [k for k in range(len(ph)) if ph[k] in VOWELS]
    if not vows:
        return ph
    pick = vows[0]
    if len(vows) > 1:
        for pre in _UNSTRESSED_PREFIXES:
            if word.startswith(pre) and len(word) > len(pre) + 2:
                pick = vows[1]
                break
        if ph[pick] == "x":
            for k in vows:
                if ph[k] != "x":
                    pick = k
                    break
        t = ph.find("Sxn")
        if t < 0:
            t = ph.find("Zxn")
        if t > 0:
            before = [k for k in vows if k < t]
            if before:
                pick = before[-1]
    return ph[:pick] + "1" + ph[pick:]
