# Differential test: the same random byte streams (chunking, timing, junk, bit flips, cut frames)
# through the Decoder on CPython and on the unix port give the same frames and the same counters.
import json
import random

from support import ROOT, run_micropython

from organbus import frame

# The driver runs unchanged on both interpreters: it reads streams.json, prints results as JSON.
DRIVER = r"""
import json
from organbus import frame


def run_streams(streams):
    results = []
    rx = bytearray(600)
    for events in streams:
        got = []
        dec = frame.Decoder(lambda t, p, n: got.append([t, "".join("%02x" % p[i] for i in range(n))]))
        for ev in events:
            if ev[0] == "f":
                data = bytes.fromhex(ev[2])
                dec.feed(data, ev[1])
            elif ev[0] == "n":
                data = bytes.fromhex(ev[2])
                rx[0 : len(data)] = data
                dec.feed(rx, ev[1], len(data))
            else:
                dec.idle(ev[1])
        dec.flush()
        c = dec.counters()
        results.append({"frames": got, "counters": [c[k] for k in frame.COUNTER_NAMES]})
    return results
"""


def _frame(rnd):
    t = rnd.choice([1, 2, 3, 4, 0x10, 0x11, 0x20, 0x21, 0x7E, rnd.randrange(256)])
    n = rnd.choice([0, 0, 1, 2, 5, 17, rnd.randrange(64), rnd.randrange(513), 512])
    payload = bytes(rnd.choice([0xAA, 0x03, 0x55, rnd.randrange(256)]) for _ in range(n))
    return frame.encode(t, payload)


def _junk(rnd):
    n = rnd.choice([1, 2, 3, 5, 8, 20, 100])
    return bytes(
        rnd.choice([0xAA, 0xAA, 0x03, 0x55, 0x00, 0x01, 0x02, rnd.randrange(256)]) for _ in range(n)
    )


def make_stream(rnd):
    parts = []
    for _ in range(rnd.randrange(1, 25)):
        k = rnd.random()
        if k < 0.55:
            parts.append(_frame(rnd))
        elif k < 0.7:
            parts.append(_junk(rnd))
        elif k < 0.8:
            f = bytearray(_frame(rnd))
            for _ in range(rnd.choice([1, 1, 2, 3])):
                i = rnd.randrange(len(f))
                f[i] ^= 1 << rnd.randrange(8)
            parts.append(bytes(f))
        elif k < 0.9:
            f = _frame(rnd)
            parts.append(f[: rnd.randrange(1, len(f))])  # cut short
        else:
            # a corrupt header claiming up to 512 bytes
            parts.append(
                bytes([0xAA, 0x03, rnd.randrange(256), rnd.randrange(3), rnd.randrange(256)])
            )
    data = b"".join(parts)
    events = []
    now = rnd.randrange(1000)
    i = 0
    while i < len(data):
        k = rnd.choice([1, 2, 7, 8, 9, 64, 200, 700, rnd.randrange(1, 40)])
        chunk = data[i : i + k]
        i += k
        kind = "n" if len(chunk) <= 600 and rnd.random() < 0.5 else "f"
        events.append([kind, now, chunk.hex()])
        r = rnd.random()
        if r < 0.15:
            now += rnd.choice([49, 50, 51, 120])
            if rnd.random() < 0.5:
                events.append(["i", now])
        elif r < 0.3:
            events.append(["i", now + rnd.choice([0, 10, 49, 50, 80])])
        else:
            now += rnd.randrange(3)
    return events


def test_same_frames_and_counters_on_both_interpreters(tmp_path):
    rnd = random.Random(20261130)
    streams = [make_stream(rnd) for _ in range(150)]
    (tmp_path / "streams.json").write_text(json.dumps(streams))
    script = tmp_path / "diff_driver.py"
    script.write_text(
        DRIVER
        + "\nwith open(%r) as f:\n    streams = json.load(f)\nprint(json.dumps(run_streams(streams)))\n"
        % str(tmp_path / "streams.json")
    )
    r = run_micropython([str(script)], heapsize="32M", timeout=300)
    assert r.returncode == 0, "unix port driver failed:\n%s%s" % (r.stdout[-2000:], r.stderr)
    theirs = json.loads(r.stdout)

    scope = {}
    exec(compile(DRIVER, "diff_driver", "exec"), scope)
    ours = json.loads(json.dumps(scope["run_streams"](streams)))

    assert len(ours) == len(theirs) == len(streams)
    totals = [0] * len(frame.COUNTER_NAMES)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a["frames"] == b["frames"], "stream %d: frames differ\nCPython %r\nunix    %r" % (
            i,
            a["frames"],
            b["frames"],
        )
        assert a["counters"] == b["counters"], "stream %d: counters differ: %r vs %r (%s)" % (
            i,
            a["counters"],
            b["counters"],
            frame.COUNTER_NAMES,
        )
        c = dict(zip(frame.COUNTER_NAMES, a["counters"]))
        framed = sum(len(p) // 2 + 8 for _, p in a["frames"])
        assert c["bytes"] == c["junk"] + framed, "stream %d: bytes not accounted: %r" % (i, c)
        totals = [x + y for x, y in zip(totals, a["counters"])]
    # the streams really exercise every path (else this test would prove little)
    t = dict(zip(frame.COUNTER_NAMES, totals))
    for k in (
        "frames",
        "junk",
        "crc_errors",
        "bad_version",
        "oversize",
        "bad_eof",
        "abandoned",
        "unknown",
    ):
        assert t[k] > 0, "the random streams never hit %s: %r" % (k, t)
