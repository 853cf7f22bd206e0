# Text normalization for the voice: any UTF-8 in, clauses of lowercase ASCII words out.
#
# Abbreviations, units, symbol names and letter names live in words.dat (flash records,
# see flash.py, built by tools/voice_data.py), not in RAM.
#
# clauses(text) yields (words, end) per clause: `words` a list of str holding only a-z and
# "'", `end` one of "." "," "?" "!" (the punctuation that closed the clause). Numbers,
# times, ordinals, percentages, units, symbols and common abbreviations become words;
# whatever cannot be spoken is dropped. It never raises on any str or bytes input.

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ((1000000000, "billion"), (1000000, "million"), (1000, "thousand"))
_ORD = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}

# Latin letters with marks (U+00C0..U+00FF) folded to their base letter; "?" = drop.
_LATIN1 = "aaaaaaaceeeeiiiidnooooo?ouuuuyts" "aaaaaaaceeeeiiiidnooooo?ouuuuyty"

# Spoken symbols (used only between or after words; "$" and "%" follow numbers).
_SYMBOLS = "&+=@#*/<>"

_CLAUSE_ENDS = ".,?!;:"
MAX_WORDS = 24  # a clause longer than this is split (bounds per-clause RAM)
MAX_LETTERS = 30  # longer letter runs are split (the rules see at most 38 letters)


def _fold(o):
    """What one code point becomes: a str to insert (may be empty)."""
    if o < 32 or o == 127:
        return " "  # control characters (tab, newline, ...) separate words
    if o < 127:
        return chr(o)
    if 0xC0 <= o <= 0xFF:
        c = _LATIN1[o - 0xC0]
        if c == "?":
            return ""
        return c.upper() if o < 0xE0 else c
    if o in (0x2018, 0x2019, 0x02BC):
        return "'"
    if o in (0x201C, 0x201D):
        return '"'
    if o in (0x2013, 0x2014, 0x2212):
        return "-"
    if o == 0x2026:
        return "."
    if o == 0x20AC:
        return " euros "
    if o == 0xA3:
        return " pounds "
    if o == 0xB0:
        return " degrees "
    return " "  # emoji and the rest: a word break, nothing spoken


def fold_ascii(text):
    """Any str/bytes -> printable ASCII str; marks folded, the unspeakable dropped.

    Two passes (measure, then fill one bytearray) so no allocation is bigger than the
    result: the heap of a board is fragmented."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", "ignore") if _decodes(text) else _latin(text)
    n = 0
    for ch in text:
        n += len(_fold(ord(ch)))
    out = bytearray(n)
    k = 0
    for ch in text:
        r = _fold(ord(ch))
        for c in r:
            out[k] = ord(c)
            k += 1
    return out.decode()


def _decodes(b):
    try:
        bytes(b).decode("utf-8")
        return True
    except Exception:
        return False


def _latin(b):
    return "".join(chr(c) if c < 128 else " " for c in bytes(b))


def number_words(n):
    """Non-negative int -> list of words ("one hundred twenty three")."""
    if n < 20:
        return [_ONES[n]]
    if n < 100:
        w = [_TENS[n // 10]]
        if n % 10:
            w.append(_ONES[n % 10])
        return w
    if n < 1000:
        w = [_ONES[n // 100], "hundred"]
        if n % 100:
            w += number_words(n % 100)
        return w
    for size, name in _SCALES:
        if n >= size:
            w = number_words(n // size) + [name]
            if n % size:
                w += number_words(n % size)
            return w
    return [_ONES[0]]


def ordinal_words(n):
    w = number_words(n)
    last = w[-1]
    if last in _ORD:
        w[-1] = _ORD[last]
    elif last.endswith("y"):
        w[-1] = last[:-1] + "ieth"
    else:
        w[-1] = last + "th"
    return w


def year_words(n):
    """1100..1999 and 2010..2099 read as two pairs ("nineteen eighty four")."""
    hi, lo = divmod(n, 100)
    if lo == 0:
        return number_words(hi) + ["hundred"]
    if lo < 10:
        return number_words(hi) + ["oh"] + number_words(lo)
    return number_words(hi) + number_words(lo)


def digits_words(s):
    return [_ONES[ord(c) - 48] for c in s]


def _tokens(s):
    """Split folded text into tokens: runs of letters/apostrophes, digit groups, symbols."""
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c.isalpha():
            j = i + 1
            while j < n and (s[j].isalpha() or (s[j] == "'" and j + 1 < n and s[j + 1].isalpha())):
                j += 1
            yield s[i:j]
            i = j
        elif c.isdigit():
            j = i + 1
            while j < n and (
                s[j].isdigit() or (s[j] in ",.:" and j + 1 < n and s[j + 1].isdigit())
            ):
                j += 1
            yield s[i:j]
            i = j
        elif c == " ":
            i += 1
        else:
            yield c
            i += 1


def _number_token(tok, nxt, prev, T):
    """Words for a token starting with a digit, and how many following tokens it used."""
    used = 0
    if ":" in tok:  # a time, 7:30 or 12:05:10
        parts = [p for p in tok.split(":") if p]
        w = []
        for k, p in enumerate(parts[:2]):
            v = int(p[:6])
            if k == 0:
                w += number_words(v)
            elif v == 0:
                w += ["o'clock"] if len(parts) == 2 else []
            elif v < 10:
                w += ["oh"] + number_words(v)
            else:
                w += number_words(v)
        low = nxt.lower() if nxt else ""
        if low in ("am", "pm"):
            w += _letter(low[0], T) + _letter("m", T)
            used = 1
        return w, used
    if tok.count(".") == 1 and _grouped(tok.split(".")[0]):
        whole, frac = tok.split(".")
        whole = whole.replace(",", "")
        if prev == "$" and len(frac) == 2:  # $4.50: dollars and cents
            w = _integer(whole) + ["dollars"]
            if frac != "00":
                w += ["and"] + _integer(frac.lstrip("0")) + ["cents"]
            return w, 0
        w = _integer(whole) + ["point"] + digits_words(frac[:8])
        return w + _unit(nxt, 2, T), (1 if _unit(nxt, 2, T) else 0)
    digits = tok.replace(",", "")
    if not digits.isdigit():
        return [w for d in digits if d.isdigit() for w in digits_words(d)], 0
    low = nxt.lower() if nxt else ""
    if low in ("st", "nd", "rd", "th") and len(digits) < 10:
        return ordinal_words(int(digits)), 1
    if low in ("s",) and len(digits) == 4 and digits.endswith("0"):
        w = year_words(int(digits))
        w[-1] = w[-1][:-1] + "ies" if w[-1].endswith("y") else w[-1] + "s"
        return w, 1
    unit = _unit(nxt, int(digits[:9]) if len(digits) < 10 else 2, T)
    if (
        len(digits) == 4
        and not unit
        and "," not in tok
        and (1100 <= int(digits) <= 1999 or 2010 <= int(digits) <= 2099)
    ):
        return year_words(int(digits)), 0
    return _integer(digits) + unit, (1 if unit else 0)


def _grouped(s):
    """Digits with optional thousands commas in the right places ("1,000")."""
    parts = s.split(",")
    if not parts[0] or len(parts[0]) > (3 if len(parts) > 1 else 99):
        return False
    for p in parts[1:]:
        if len(p) != 3:
            return False
    return True


def _integer(digits):
    if not digits:
        return []
    if len(digits) > 12 or (len(digits) > 1 and digits[0] == "0"):
        return digits_words(digits[:24])
    return number_words(int(digits))


def _unit(tok, n, T):
    if not tok or not tok.isalpha():
        return []
    u = T.get("u" + tok.lower())
    if not u:
        return []
    w = u.split()
    if n != 1 and w[0][-1] not in "sz":
        w[0] += "s"
    return w


def _letter(c, T):
    return (T.get("l" + c) or "").split()


def dropped(token, exc):
    """Called when a token could not be turned into words (tests watch it)."""


def clauses(text, T):
    """Yield (words, end) clauses for the text (T: the words.dat Records); never raises."""
    try:
        s = fold_ascii(text)
    except MemoryError:
        raise  # reported by the job; not a property of the text
    except Exception as e:
        dropped(text, e)
        s = ""
    # a window over the token stream: prev2 prev [t] nxt nn (no token list in RAM)
    it = _tokens(s)
    prev2 = prev = ""
    t = next(it, "")
    nxt = next(it, "")
    nn = next(it, "")
    words = []
    while t:
        used = 0
        try:
            if t[0].isdigit():
                w, used = _number_token(t, nxt, prev, T)
                if prev == "-" and not prev2[:1].isalnum():
                    w = ["minus"] + w
                if prev == "$" and "dollars" not in w:
                    w = w + ["dollars"]
                words += w
            elif t[0].isalpha():
                low = t.lower()
                exp = T.get("a" + low) if nxt == "." else None
                if exp is not None:
                    if exp == "-":  # "no." is "number" only before a number
                        exp = "number" if nn[:1].isdigit() else ""
                    if exp:
                        words += exp.split()
                        used = 1  # the abbreviation's dot does not end the clause
                    else:
                        words.append(low)
                elif len(t) > 1 and t.isupper() and (len(t) < 4 or not _vowelish(t)):
                    for c in low:  # a short or vowelless acronym: spell it
                        words += _letter(c, T)
                elif low in ("c", "f") and prev == "degrees":
                    words.append("celsius" if low == "c" else "fahrenheit")
                elif len(t) == 1 and t not in "aAI":
                    words += _letter(low, T)
                else:
                    while len(low) > MAX_LETTERS:  # a very long "word" is said in pieces
                        words.append(low[:MAX_LETTERS])
                        low = low[MAX_LETTERS:]
                    words.append(low)
            elif t in _CLAUSE_ENDS:
                if words:
                    yield words, _end(t)
                    words = []
            elif t == "%" or (t in _SYMBOLS and words):
                words += (T.get("s" + t) or "").split()
        except MemoryError:
            raise
        except Exception as e:
            dropped(t, e)  # an unspeakable token is dropped, the rest is still said
        if len(words) >= MAX_WORDS:
            yield words, ","
            words = []
        for _ in range(used + 1):
            prev2, prev, t, nxt, nn = prev, t, nxt, nn, next(it, "")
    if words:
        yield words, "."


def _vowelish(t):
    for c in t.lower():
        if c in "aeiouy":
            return True
    return False


def _end(p):
    if p in ";:":
        return ","
    return p
