# Pronunciation: exception lexicon searched in flash, then the NRL letter-to-sound rules.
#
# Both data files stay on the filesystem: `lexicon.dat` is fixed-width sorted records
# (binary search by seek, one record in RAM at a time) and `rules.txt` is read one
# letter's section at a time into a preallocated buffer. A pronunciation is a str of
# one-character phoneme codes (organs/voice/phonemes.py); a "1" or "2" before a vowel
# marks primary or secondary stress.

try:
    _HERE = __file__.rsplit("/", 1)[0] if "/" in __file__ else "."
except NameError:  # frozen into firmware: the data files live beside the installed package
    _HERE = "/lib/organs/voice"

LEXICON = _HERE + "/lexicon.dat"
RULES = _HERE + "/rules.txt"
REC = 32  # lexicon record: word, one space, pronunciation, space padding, "\n"

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

    def __init__(self, lexicon=LEXICON, rules=RULES):
        self._lex = open(lexicon, "rb")
        self._lex.seek(0, 2)
        self._nrec = self._lex.tell() // REC
        self._rec = bytearray(REC)
        self._rules = open(rules, "rb")
        self._index = {}  # section key byte -> (offset, length)
        self._buf = bytearray(self._build_index())
        self._loaded = -1
        self._word = bytearray(40)

    def close(self):
        for f in (self._lex, self._rules):
            try:
                f.close()
            except Exception:
                pass

    def _build_index(self):
        f = self._rules
        f.seek(0)
        off = 0
        key = -1
        start = 0
        biggest = 0
        while True:
            line = f.readline()
            if not line:
                break
            if line[0] == 64:  # "@" opens a section
                if key >= 0:
                    self._index[key] = (start, off - start)
                    biggest = max(biggest, off - start)
                key = line[1]
                start = off + len(line)
            off += len(line)
        if key >= 0:
            self._index[key] = (start, off - start)
            biggest = max(biggest, off - start)
        return biggest

    # -- lexicon ---------------------------------------------------------------------------

    def lookup(self, word):
        """Pronunciation from the lexicon, or None."""
        key = word.encode() if isinstance(word, str) else word
        n = len(key)
        if n >= REC - 2:
            return None
        lo, hi = 0, self._nrec
        rec = self._rec
        f = self._lex
        while lo < hi:
            mid = (lo + hi) >> 1
            f.seek(mid * REC)
            f.readinto(rec)
            c = _cmp(rec, key, n)
            if c == 0:
                end = REC - 1
                while end > n + 1 and rec[end - 1] == 32:
                    end -= 1
                return rec[n + 1 : end].decode()
            if c < 0:
                lo = mid + 1
            else:
                hi = mid
        return None

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
            sec = self._index.get(w[i])
            if sec is None:
                i += 1
                continue
            if self._loaded != w[i]:
                self._rules.seek(sec[0])
                mv = memoryview(self._buf)
                self._rules.readinto(mv[: sec[1]])
                self._loaded = w[i]
                self._seclen = sec[1]
            step = self._apply(w, end, i, out)
            i += step if step > 0 else 1
        return _degeminate("".join(out))

    def _apply(self, w, end, i, out):
        b = self._buf
        a = 0
        size = self._seclen
        while a < size:
            e = a
            while e < size and b[e] != 10:
                e += 1
            if b[a] != 59:  # ";" comment
                p1 = a
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
                    if _left(b, a, p1, w, i - 1) and _right(b, p2 + 1, p3, w, i + mlen, end):
                        if p3 + 1 < e:
                            out.append(b[p3 + 1 : e].decode())
                        return mlen
            a = e + 1
        return 1

    def pronounce(self, word):
        """Lexicon first, then rules with stress placed by rule of thumb."""
        p = self.lookup(word)
        if p is not None:
            return p
        return place_stress(word, self.rules(word))


def _cmp(rec, key, n):
    for k in range(n):
        d = rec[k] - key[k]
        if d:
            return d
    return 0 if rec[n] == 32 else 1


def _lit(b, s, n, w, i, end):
    if i + n > end:
        return False
    for k in range(n):
        if b[s + k] != w[i + k]:
            return False
    return True


def _at(w, j, end):
    return w[j] if 0 <= j < end else 32


def _left(b, a, p1, w, j):
    k = p1 - 1
    while k >= a:
        c = b[k]
        x = _at(w, j, 99) if j >= 0 else 32
        if c == 35:  # "#" one or more vowels
            if not _is_vowel(x):
                return False
            j -= 1
            while j >= 0 and _is_vowel(w[j]):
                j -= 1
        elif c == 58:  # ":" zero or more consonants
            while j >= 0 and _is_cons(w[j]):
                j -= 1
        elif c == 94:  # "^" one consonant
            if not _is_cons(x):
                return False
            j -= 1
        elif c == 46:  # "." voiced consonant
            if x not in _VOICED:
                return False
            j -= 1
        elif c == 43:  # "+" front vowel
            if x not in _FRONT:
                return False
            j -= 1
        else:
            if x != c:
                return False
            j -= 1
        k -= 1
    return True


def _right(b, s, p3, w, j, end):
    k = s
    while k < p3:
        c = b[k]
        x = _at(w, j, end)
        if c == 35:
            if not _is_vowel(x):
                return False
            j += 1
            while j < end and _is_vowel(w[j]):
                j += 1
        elif c == 58:
            while j < end and _is_cons(w[j]):
                j += 1
        elif c == 94:
            if not _is_cons(x):
                return False
            j += 1
        elif c == 46:
            if x not in _VOICED:
                return False
            j += 1
        elif c == 43:
            if x not in _FRONT:
                return False
            j += 1
        elif c == 37:  # "%" suffix: ER E ES ED ING ELY
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
            j += 1
        k += 1
    return True


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
