# Text normalization for the voice: any UTF-8 in, clauses of lowercase ASCII words out.
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

# Abbreviations read as words (lowercased, without the trailing dot).
_ABBR = {
    "mr": "mister",
    "mrs": "missus",
    "ms": "miz",
    "dr": "doctor",
    "st": "street",
    "ave": "avenue",
    "etc": "et cetera",
    "vs": "versus",
    "approx": "approximately",
    "min": "minutes",
    "mins": "minutes",
    "sec": "seconds",
    "secs": "seconds",
    "hr": "hours",
    "hrs": "hours",
    "no": None,  # "no." before a number is "number"; otherwise the word "no"
    "jan": "january",
    "feb": "february",
    "aug": "august",
    "sept": "september",
    "oct": "october",
    "nov": "november",
    "dec": "december",
    "mon": "monday",
    "tue": "tuesday",
    "wed": "wednesday",
    "thu": "thursday",
    "fri": "friday",
    "sat": "saturday",
    "sun": "sunday",
}

# Units written after a number ("5 km", "20C", "3.5kg"): (singular, plural).
_UNITS = {
    "km": ("kilometer", "kilometers"),
    "m": ("meter", "meters"),
    "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"),
    "kg": ("kilogram", "kilograms"),
    "g": ("gram", "grams"),
    "mg": ("milligram", "milligrams"),
    "l": ("liter", "liters"),
    "ml": ("milliliter", "milliliters"),
    "s": ("second", "seconds"),
    "ms": ("millisecond", "milliseconds"),
    "min": ("minute", "minutes"),
    "h": ("hour", "hours"),
    "hz": ("hertz", "hertz"),
    "khz": ("kilohertz", "kilohertz"),
    "v": ("volt", "volts"),
    "mv": ("millivolt", "millivolts"),
    "a": ("amp", "amps"),
    "ma": ("milliamp", "milliamps"),
    "w": ("watt", "watts"),
    "kw": ("kilowatt", "kilowatts"),
    "c": ("degree celsius", "degrees celsius"),
    "f": ("degree fahrenheit", "degrees fahrenheit"),
    "mph": ("mile per hour", "miles per hour"),
    "kmh": ("kilometer per hour", "kilometers per hour"),
    "db": ("decibel", "decibels"),
    "kb": ("kilobyte", "kilobytes"),
    "mb": ("megabyte", "megabytes"),
    "gb": ("gigabyte", "gigabytes"),
}

# Symbols spoken as words; other punctuation only separates words or ends clauses.
_SYMBOLS = {
    "&": "and",
    "+": "plus",
    "=": "equals",
    "@": "at",
    "#": "number",
    "%": "percent",
    "$": "dollars",
    "*": "star",
    "/": "slash",
    "<": "less than",
    ">": "more than",
}

# Latin letters with marks (U+00C0..U+00FF) folded to their base letter; "?" = drop.
_LATIN1 = "aaaaaaaceeeeiiiidnooooo?ouuuuyts" "aaaaaaaceeeeiiiidnooooo?ouuuuyty"

_LETTERS = {
    "a": "ay",
    "b": "bee",
    "c": "see",
    "d": "dee",
    "e": "ee",
    "f": "eff",
    "g": "jee",
    "h": "aitch",
    "i": "eye",
    "j": "jay",
    "k": "kay",
    "l": "el",
    "m": "em",
    "n": "en",
    "o": "oh",
    "p": "pee",
    "q": "cue",
    "r": "ar",
    "s": "ess",
    "t": "tee",
    "u": "you",
    "v": "vee",
    "w": "double you",
    "x": "ex",
    "y": "why",
    "z": "zee",
}

_CLAUSE_ENDS = ".,?!;:"
MAX_WORDS = 24  # a clause longer than this is split (bounds per-clause RAM)


def fold_ascii(text):
    """Any str/bytes -> printable ASCII str; marks folded, the unspeakable dropped."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", "ignore") if _decodes(text) else _latin(text)
    out = []
    for ch in text:
        o = ord(ch)
        if o < 32 or o == 127:
            out.append(" ")  # control characters (tab, newline, ...) separate words
        elif o < 127:
            out.append(ch)
        elif 0xC0 <= o <= 0xFF:
            c = _LATIN1[o - 0xC0]
            if c != "?":
                out.append(c.upper() if o < 0xE0 else c)
        elif o in (0x2018, 0x2019, 0x02BC):
            out.append("'")
        elif o in (0x201C, 0x201D):
            out.append('"')
        elif o in (0x2013, 0x2014, 0x2212):
            out.append("-")
        elif o == 0x2026:
            out.append(".")
        elif o == 0x20AC:
            out.append(" euros ")
        elif o == 0xA3:
            out.append(" pounds ")
        elif o == 0xB0:
            out.append(" degrees ")
        else:
            out.append(" ")  # emoji and the rest: a word break, nothing spoken
    return "".join(out)


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


def _number_token(tok, nxt, prev):
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
            w += [low[0], "m"]
            used = 1
        return w, used
    if tok.count(".") == 1 and "," not in tok:
        whole, frac = tok.split(".")
        w = _integer(whole) + ["point"] + digits_words(frac[:8])
        return w + _unit(nxt, 2), (1 if _unit(nxt, 2) else 0)
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
    unit = _unit(nxt, int(digits[:9]) if len(digits) < 10 else 2)
    if (
        len(digits) == 4
        and not unit
        and "," not in tok
        and (1100 <= int(digits) <= 1999 or 2010 <= int(digits) <= 2099)
    ):
        return year_words(int(digits)), 0
    return _integer(digits) + unit, (1 if unit else 0)


def _integer(digits):
    if not digits:
        return []
    if len(digits) > 12 or (len(digits) > 1 and digits[0] == "0"):
        return digits_words(digits[:24])
    return number_words(int(digits))


def _unit(tok, n):
    if not tok:
        return []
    u = _UNITS.get(tok.lower()) if tok != "M" else _UNITS["m"]
    if not u:
        return []
    return u[0].split() if n == 1 else u[1].split()


def clauses(text):
    """Yield (words, end) clauses for the text; never raises."""
    try:
        s = fold_ascii(text)
    except Exception:
        s = ""
    toks = list(_tokens(s))
    words = []
    i, n = 0, len(toks)
    while i < n:
        t = toks[i]
        nxt = toks[i + 1] if i + 1 < n else ""
        prev = toks[i - 1] if i else ""
        try:
            if t[0].isdigit():
                w, used = _number_token(t, nxt, prev)
                if prev == "-" and (i < 2 or not toks[i - 2][0].isalnum()):
                    w = ["minus"] + w
                if prev == "$":
                    w = w + ["dollars"]
                i += used
                words += w
            elif t[0].isalpha():
                low = t.lower()
                if nxt == "." and low in _ABBR:
                    exp = _ABBR[low]
                    if exp is None:
                        nn = toks[i + 2] if i + 2 < n else ""
                        exp = "number" if nn[:1].isdigit() else low
                    words += exp.split()
                    i += 1  # the abbreviation's dot does not end the clause
                elif len(t) > 1 and t.isupper() and not _vowelish(t):
                    for c in low:  # an acronym with no vowel: spell it
                        words += _LETTERS[c].split()
                elif len(t) == 1 and t not in "aAI":
                    words += _LETTERS[low].split()
                else:
                    words.append(low)
            elif t in _CLAUSE_ENDS:
                if words:
                    yield words, _end(t)
                    words = []
            elif t in _SYMBOLS and t != "$":
                if t == "%" or (t in "+=<>&@#*/" and words):
                    words += _SYMBOLS[t].split()
        except Exception:
            pass
        if len(words) >= MAX_WORDS:
            yield words, ","
            words = []
        i += 1
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
