# Differential test: generated plan bodies (random bytes, mutated good plans, numbers of every
# length, invalid UTF-8 everywhere) get the same verdict and the same words on CPython and on the
# unix port, and never an exception other than a refusal.
import json
import random

from support import run_micropython

import plan_corpus as pc

# The driver runs unchanged on both interpreters: bodies in, one canonical verdict per body out.
DRIVER = r"""
import json
import struct
from organbus import plan
from organbus.jsonread import Lone


def canon(v):
    # dicts as sorted pairs (MicroPython keeps no order), floats as their exact bits
    if v is None or v is True or v is False or isinstance(v, (int, str)):
        return v
    if isinstance(v, float):
        return ["f", "".join("%02x" % b for b in struct.pack(">d", v))]
    if isinstance(v, Lone):
        return ["lone", v.esc]
    if isinstance(v, list):
        return [canon(x) for x in v]
    if isinstance(v, dict):
        return ["d"] + [[k, canon(v[k])] for k in sorted(v)]
    return ["?", type(v).__name__]


def verdicts(bodies, caps):
    out = []
    for h in bodies:
        raw = bytes.fromhex(h)
        try:
            p, problems, notes = plan.validate(raw, caps)
            out.append({"problems": problems, "notes": notes, "plan": canon(p)})
        except Exception as e:
            out.append({"crash": "%s: %s" % (type(e).__name__, e)})
    return out
"""

# fragments a mutation inserts: bad UTF-8, long and odd numbers, JSON punctuation, escapes
FRAGMENTS = [
    b"\xc0\xaf",
    b"\xe0\x80\xaf",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\xff",
    b"\x80",
    b"\xe2\x82",
    b"\xf0\x9f\x98",
    "é好😀".encode(),
    b"NaN",
    b"Infinity",
    b"1e999",
    b"-",
    b"0.",
    b"01",
    b"1" * 41,
    b"9" * 4400,
    b"0." + b"3" * 60,
    b"1e" + b"9" * 45,
    b'"',
    b"\\",
    b"\\u",
    b"\\ud800",
    b"\\ud83d\\ude00",
    b"\\x",
    b"\x00",
    b"\n",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"[" * 20,
    b'"steps": []',
    b'"extra": 1',
    b"true",
    b"null",
]
ALPHABET = b'{}[]:,"\\ -+.eE0123456789truefalsn \t\n\r' + bytes(range(0x80, 0x100, 7))


def _number(rnd):
    n = rnd.choice([1, 2, 5, 15, 20, 38, 39, 40, 41, 60, rnd.randrange(1, 80)])
    digits = "".join(rnd.choice("0123456789") for _ in range(n)).lstrip("0") or "0"
    s = rnd.choice(["", "-"]) + digits
    if rnd.random() < 0.4:
        s += "." + "".join(rnd.choice("0123456789") for _ in range(rnd.randrange(1, 30)))
    if rnd.random() < 0.3:
        s += (
            rnd.choice("eE")
            + rnd.choice(["", "+", "-"])
            + str(rnd.randrange(0, 10 ** rnd.randrange(1, 6)))
        )
    return s.encode()


def _good(rnd):
    p = rnd.choice(pc.POSITIVE)
    if rnd.random() < 0.3:
        return rnd.choice(pc.NOTED)[0].encode()
    return pc.text(p).encode()


def _mutate(rnd, b):
    b = bytearray(b)
    for _ in range(rnd.choice([1, 1, 2, 3])):
        k = rnd.random()
        i = rnd.randrange(len(b) + 1)
        if k < 0.35:
            b[i:i] = rnd.choice(FRAGMENTS)
        elif k < 0.5 and len(b):
            b[min(i, len(b) - 1)] ^= 1 << rnd.randrange(8)
        elif k < 0.65:
            del b[i : i + rnd.randrange(1, 8)]
        elif k < 0.75:
            b[i:i] = b[i : i + rnd.randrange(1, 40)]
        elif k < 0.85:
            b = b[:i]
        else:
            # a number somewhere the plan has one, replaced by one of any length and shape
            j = b.find(b": ", i)
            if j >= 0:
                e = j + 2
                while e < len(b) and b[e] in b"-+.eE0123456789":
                    e += 1
                b[j + 2 : e] = _number(rnd)
    return bytes(b)


def make_bodies(rnd):
    bodies = []
    for _ in range(600):  # random bytes
        n = rnd.choice([0, 1, 2, 5, 20, 80, 300])
        bodies.append(bytes(rnd.choice(ALPHABET) for _ in range(n)))
    for _ in range(2000):  # mutated good plans
        bodies.append(_mutate(rnd, _good(rnd)))
    for _ in range(500):  # numbers of every length in every number field
        p = json.loads(pc.text(rnd.choice(pc.POSITIVE)))
        raw = pc.text(p).encode()
        for key in (b'"heard_req": 0', b'"priority": 5', b'"count": 3', b'"period_ms": 200'):
            raw = raw.replace(key, key.split(b":")[0] + b": " + _number(rnd), 1)
        bodies.append(raw)
    for name, raw, want, _ in pc.NEGATIVE:
        bodies.append(raw.encode() if isinstance(raw, str) else raw)
    for raw, notes in pc.NOTED:
        bodies.append(raw.encode())
    return bodies


def test_same_verdict_and_words_on_both_interpreters(tmp_path):
    rnd = random.Random(20261201)
    bodies = [b for b in make_bodies(rnd) if len(b) <= 20000]
    data = {"bodies": [b.hex() for b in bodies], "caps": pc.CAPS}
    (tmp_path / "bodies.json").write_text(json.dumps(data))
    script = tmp_path / "plan_driver.py"
    script.write_text(
        DRIVER + "\nwith open(%r) as f:\n    d = json.load(f)\n"
        "print(json.dumps(verdicts(d['bodies'], d['caps'])))\n" % str(tmp_path / "bodies.json")
    )
    r = run_micropython([str(script)], heapsize="32M", timeout=600, errors="surrogateescape")
    assert r.returncode == 0, "unix port driver failed:\n%s%s" % (r.stdout[-2000:], r.stderr)
    # its words are UTF-8 text (bytes that are not would show as U+DC80..U+DCFF here)
    bad = [i for i, c in enumerate(r.stdout) if "\udc80" <= c <= "\udcff"]
    assert not bad, (
        "the unix port wrote bytes that are not UTF-8: %r"
        % r.stdout[max(0, bad[0] - 200) : bad[0] + 50]
    )
    theirs = json.loads(r.stdout)

    scope = {}
    exec(compile(DRIVER, "plan_driver", "exec"), scope)
    ours = json.loads(json.dumps(scope["verdicts"](data["bodies"], pc.CAPS)))

    assert len(ours) == len(theirs) == len(bodies)
    kinds = {}
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert "crash" not in a, "body %d raised on CPython: %s\n%r" % (
            i,
            a["crash"],
            bodies[i][:200],
        )
        assert "crash" not in b, "body %d raised on the unix port: %s\n%r" % (
            i,
            b["crash"],
            bodies[i][:200],
        )
        assert a == b, "body %d: verdicts differ\nbody    %r\nCPython %r\nunix    %r" % (
            i,
            bodies[i][:300],
            a,
            b,
        )
        if not a["problems"]:
            k = "accepted"
        elif a["problems"][0].startswith("body: not JSON: "):
            k = a["problems"][0][16:].split(" at offset")[0]
            k = k.split(" ")[0] if k.startswith(("invalid UTF-8", "number of")) else k
            k = {"invalid": "invalid UTF-8", "number": "number of N characters"}.get(k, k)
        elif a["problems"][0].startswith("body: "):
            k = "too large"
        else:
            k = "problems"
        kinds[k] = kinds.get(k, 0) + 1
    # the corpus really reaches every kind of verdict (else this test would prove little)
    for k in (
        "accepted",
        "problems",
        "too large",
        "invalid UTF-8",
        "number of N characters",
        "number out of range",
        "unexpected end",
        "trailing data",
        "control character in a string",
        "expected a key string",
        "bad number",
        "nested deeper than 16 levels",
    ):
        assert kinds.get(k, 0) > 0, "the corpus never got %r: %r" % (k, kinds)
    assert any(k.startswith("unexpected character") for k in kinds), kinds
    assert any(k.startswith("bad escape") for k in kinds), kinds
    print("test_plan_differential: %d bodies, verdicts %r" % (len(bodies), sorted(kinds.items())))
