# Quick screen of the voice on a sentence set with the speech meter's own decoders, in parallel.
#
#   .venv/bin/python tools/voice_screen.py [--sentences FILE] [--every K] [--jobs 2] [--save F]
#       [--engine flite] [--confusions 20]
#
# The same path as the meter (../shared/tools/speech_meter.py, a workplace tool): its WAV
# reading, its closed unigram LM over the WHOLE file's words (so a subset's sentences decode
# as in a full run), its word and phone decoders and edit distances; only split over --jobs
# processes, and --every K takes every K-th sentence (a screen; confirm with the meter itself).
# Prints WER and PER; --save writes per-sentence results (JSON) to compare two trees.
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections import Counter
from multiprocessing import Pool

import toolpath  # the tree, lib/ and tools/ on sys.path
from voice_confusions import align, load_meter

ROOT = toolpath.ROOT

SYNTH = {
    "organbus": sys.executable + " tools/say.py {text} -o {out}",
    "flite": "flite -voice slt -t {text} -o {out}",
}
_W = {}


def _init(lm, engine):
    m = load_meter()
    m.set_loglevel("FATAL")
    _W["m"] = m
    _W["pron"] = m.load_dict()
    _W["wdec"] = m.Decoder(lm=lm)
    _W["pdec"] = m.Decoder(lm=None, allphone=m.PHONE_LM, lw=2.0, beam=1e-20, pbeam=1e-20)
    _W["engine"] = engine


def _one(job):
    i, s, tmp = job
    m = _W["m"]
    out = os.path.join(tmp, "s%03d.wav" % i)
    cmd = SYNTH[_W["engine"]].format(text=shlex.quote(s), out=shlex.quote(out))
    subprocess.run(cmd, shell=True, check=True, capture_output=True, cwd=ROOT)
    pcm = m.read_wav_16k(out, 11025 if _W["engine"] != "organbus" else None)
    ref = m.words(s)
    hyp = m.decode(_W["wdec"], pcm).split()
    ref_ph = [p for w in ref for p in _W["pron"][w]]
    hyp_ph = [p for p in m.decode(_W["pdec"], pcm).split() if p not in ("SIL", "+NSN+", "+SPN+")]
    return {
        "i": i,
        "ref": ref,
        "hyp": hyp,
        "we": m.edit_distance(ref, hyp),
        "ref_ph": ref_ph,
        "hyp_ph": hyp_ph,
        "pe": m.edit_distance(ref_ph, hyp_ph),
    }


def main():
    ap = argparse.ArgumentParser(description="quick parallel screen with the meter's decoders")
    ap.add_argument(
        "--sentences", default=os.path.join(ROOT, "..", "shared", "tools", "speech_broad.txt")
    )
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--engine", default="organbus", choices=sorted(SYNTH))
    ap.add_argument("--save")
    ap.add_argument("--confusions", type=int, default=0)
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    m = load_meter()
    with open(a.sentences) as f:
        sentences = [s.strip() for s in f if s.strip() and not s.startswith("#")]
    vocab = sorted({w for s in sentences for w in m.words(s)})
    with tempfile.TemporaryDirectory() as tmp:
        lm = os.path.join(tmp, "closed.arpa")
        m.write_unigram_lm(vocab, lm)
        jobs = [(i, s, tmp) for i, s in enumerate(sentences) if i % a.every == a.offset]
        with Pool(a.jobs, _init, (lm, a.engine)) as pool:
            res = pool.map(_one, jobs, chunksize=1)
    we = sum(r["we"] for r in res)
    wn = sum(len(r["ref"]) for r in res)
    pe = sum(r["pe"] for r in res)
    pn = sum(len(r["ref_ph"]) for r in res)
    print("%s WER %.3f  PER %.3f  (%d sentences)" % (a.engine, we / wn, pe / pn, len(res)))
    if a.v:
        for r in res:
            if r["we"]:
                print("  %3d %s\n      -> %s" % (r["i"], " ".join(r["ref"]), " ".join(r["hyp"])))
    if a.confusions:
        pairs, per, tot = Counter(), Counter(), Counter()
        for r in res:
            for x, y in align(r["ref_ph"], r["hyp_ph"]):
                if x is not None:
                    tot[x] += 1
                if x != y:
                    pairs[(x or "-", y or "-")] += 1
                    if x is not None:
                        per[x] += 1
        print(", ".join("%s>%s %d" % (x, y, c) for (x, y), c in pairs.most_common(a.confusions)))
        rows = sorted(tot, key=lambda p: -per[p] / tot[p])
        print(", ".join("%s %d/%d" % (p, per[p], tot[p]) for p in rows if per[p]))
    if a.save:
        with open(a.save, "w") as f:
            json.dump(res, f)


if __name__ == "__main__":
    main()
