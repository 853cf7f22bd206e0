# Phone confusions of the voice as the speech meter's recognizer hears them (a workplace tool).
#
#   .venv/bin/python tools/voice_confusions.py [--sentences FILE] [--top 25] [--synth CMD]
#
# Speaks each sentence (default: the meter's public set) with tools/say.py, decodes it with the
# meter's phone decoder (PocketSphinx allphone, the same path as its PER), aligns the phones with
# the CMU dictionary's (edit distance with backtrace) and prints the commonest substitutions,
# deletions and insertions, then the error rate per reference phone. Needs the meter
# (../shared/tools/speech_meter.py, with pocketsphinx, numpy, scipy); says so when it is absent.
import argparse
import importlib.util
import os
import shlex
import subprocess
import sys
import tempfile
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METER = os.path.join(ROOT, "..", "shared", "tools", "speech_meter.py")


def load_meter():
    if not os.path.exists(METER):
        sys.exit("voice_confusions: the speech meter is not here (%s); nothing measured" % METER)
    spec = importlib.util.spec_from_file_location("speech_meter", METER)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def align(ref, hyp):
    """Pairs (r, h) along a minimal edit path; None marks a deletion or an insertion."""
    n, m = len(ref), len(hyp)
    d = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        d[i][0] = i
    for j in range(m + 1):
        d[0][j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i][j] = min(
                d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1])
            )
    out = []
    i, j = n, m
    while i or j:
        if i and j and d[i][j] == d[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]):
            out.append((ref[i - 1], hyp[j - 1]))
            i, j = i - 1, j - 1
        elif i and d[i][j] == d[i - 1][j] + 1:
            out.append((ref[i - 1], None))
            i -= 1
        else:
            out.append((None, hyp[j - 1]))
            j -= 1
    return out[::-1]


def main():
    ap = argparse.ArgumentParser(description="phone confusions of the voice")
    ap.add_argument("--sentences", default=None, help="default: the meter's public sentences")
    ap.add_argument("--synth", default=sys.executable + " tools/say.py {text} -o {out}")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    meter = load_meter()
    meter.set_loglevel("FATAL")
    path = a.sentences or os.path.join(os.path.dirname(METER), "speech_sentences.txt")
    with open(path) as f:
        sentences = [s.strip() for s in f if s.strip() and not s.startswith("#")]
    pron = meter.load_dict()
    pdec = meter.Decoder(lm=None, allphone=meter.PHONE_LM, lw=2.0, beam=1e-20, pbeam=1e-20)
    pairs = Counter()
    per_phone = Counter()
    total = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        for i, s in enumerate(sentences):
            out = os.path.join(tmp, "s%02d.wav" % i)
            cmd = a.synth.format(text=shlex.quote(s), out=shlex.quote(out))
            subprocess.run(cmd, shell=True, check=True, capture_output=True, cwd=ROOT)
            pcm = meter.read_wav_16k(out)
            ref = [p for w in meter.words(s) for p in pron[w]]
            hyp = [p for p in meter.decode(pdec, pcm).split() if p not in ("SIL", "+NSN+", "+SPN+")]
            for r, h in align(ref, hyp):
                if r is not None:
                    total[r] += 1
                if r != h:
                    pairs[(r or "-", h or "-")] += 1
                    if r is not None:
                        per_phone[r] += 1
    n = sum(total.values())
    errs = sum(pairs.values())
    print("phones %d, errors %d (PER %.3f)" % (n, errs, errs / max(n, 1)))
    print("| reference | heard as | count |")
    print("|---|---|---|")
    for (r, h), c in pairs.most_common(a.top):
        print("| %s | %s | %d |" % (r, h, c))
    print("\nper reference phone (errors / occurrences), worst first:")
    rows = sorted(total, key=lambda p: -per_phone[p] / total[p])
    print(", ".join("%s %d/%d" % (p, per_phone[p], total[p]) for p in rows if per_phone[p]))


if __name__ == "__main__":
    main()
