# The rv32 tier: every module marked `UNIX_PORT = True` runs a third time, as rv32imc .mpy on the RV32 image.
"""Each test function of a marked module is one item here, run on the image under QEMU by
tools/rv32/run.py (a module's functions share one boot). A module that cannot run on the image
says `RV32 = False  # why` at top level and is reported as skipped with that reason. Where QEMU
or the image is missing, every item is skipped with the reason and the command that builds the
image (docs/rv32.md), and the summary says the tier did not run."""

import importlib.util
import os
import re

import pytest

from support import ROOT, TESTS

pytestmark = pytest.mark.rv32

MARK = re.compile(r"^UNIX_PORT = True", re.M)
OFF = re.compile(r"^RV32 = False\s*(?:#\s*(.*))?$", re.M)
TEST = re.compile(r"^def (test_\w+)\(", re.M)
F32 = (
    "floats are single precision on the C6 (and this image), double on the unix port: the test "
    "builds its plan text from a Python float beyond f32, which is inf here and is dumped as "
    "'inf', not JSON"
)
# Known, explained differences of the device: expected to fail here (strict: a pass is an error).
DEVICE_DIFFERENCES = {
    ("test_plan_corpus", "test_noted_plans_accepted_with_exact_notes"): F32,
    ("test_master_scheduler", "test_beyond_f32_travels_as_inf"): F32,
}
# Limits of the qemu port, not of the C6: not run on the image, reported as skipped.
PORT_LIMITS = {
    ("test_organ_speaker", "test_event_waits_until_the_audio_has_played"): (
        "uses time.time(), which the qemu port lacks (no RTC); the C6 has it"
    ),
    ("test_xiaozhi_units", "test_client_id_is_kept"): (
        "keeps the id in a file; the image's only file system (/rv32) is read-only, the C6's "
        "flash file system is writable"
    ),
}


def _runner():
    spec = importlib.util.spec_from_file_location(
        "organbus_rv32_run", os.path.join(ROOT, "tools", "rv32", "run.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


RV = _runner()


def collect():
    """(tier, module, function, reason the module is off or None) in a stable order."""
    out = []
    for tier in sorted(os.listdir(TESTS)):
        d = os.path.join(TESTS, tier)
        if not os.path.isdir(d) or tier in ("helpers", "data", "rv32"):
            continue
        for name in sorted(os.listdir(d)):
            if not (name.startswith("test_") and name.endswith(".py")):
                continue
            with open(os.path.join(d, name)) as f:
                src = f.read()
            if not MARK.search(src):
                continue
            off = OFF.search(src)
            reason = (off.group(1) or "marked RV32 = False").strip() if off else None
            for fn in sorted(set(TEST.findall(src))):
                out.append((tier, name[:-3], fn, reason))
    return out


ITEMS = collect()
_results = {}  # module -> {function: (status, text)}, or a str: why the whole module failed
STATS = {"modules": 0, "passed": 0, "failed": 0, "skipped": 0, "not_run": None}


def _parse(out):
    got = {}
    current = None
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] in ("PASS", "FAIL", "SKIP"):
            current = parts[2]
            got[current] = [parts[0], []]
        elif line.startswith("rv32: "):
            current = None
        elif current is not None and got[current][0] == "FAIL":
            got[current][1].append(line)
    return dict((k, (v[0], "\n".join(v[1]))) for k, v in got.items())


def _module(tier, module):
    if module in _results:
        return _results[module]
    skip = ["%s.%s" % key for key in PORT_LIMITS if key[0] == module]
    r = RV.run_tests([module], RV.Stage(ROOT), timeout=900, skip=skip)
    got = _parse(r.out)
    STATS["modules"] += 1
    if "<import>" in got:
        got = "the module failed to import on RV32:\n" + got["<import>"][1]
    elif r.rc not in (0, 1) or (r.rc == 1 and not any(v[0] == "FAIL" for v in got.values())):
        got = "the RV32 run of %s ended with status %d:\n%s%s" % (
            module,
            r.rc,
            r.out[-3000:],
            r.err,
        )
    _results[module] = got
    return got


@pytest.mark.parametrize("tier,module,function,off", ITEMS, ids=["%s-%s-%s" % i[:3] for i in ITEMS])
def test_on_rv32(tier, module, function, off):
    if off:
        STATS["skipped"] += 1
        pytest.skip("rv32: %s cannot run on the image: %s" % (module, off))
    why = RV.unavailable()
    if why:
        STATS["not_run"] = why
        pytest.skip("rv32 tier not run: " + why)
    if (module, function) in PORT_LIMITS:
        STATS["skipped"] += 1
        pytest.skip("rv32: " + PORT_LIMITS[(module, function)])
    got = _module(tier, module)
    if isinstance(got, str):
        STATS["failed"] += 1
        pytest.fail(got, pytrace=False)
    status, text = got.get(function, ("MISSING", ""))
    expected = DEVICE_DIFFERENCES.get((module, function))
    if status == "PASS":
        if expected:
            STATS["failed"] += 1
            pytest.fail("passes on RV32 now: take it out of DEVICE_DIFFERENCES (%s)" % expected)
        STATS["passed"] += 1
        return
    if status == "FAIL":
        if expected:
            STATS["skipped"] += 1
            pytest.xfail("rv32 device difference: %s\n%s" % (expected, text.splitlines()[-1]))
        STATS["failed"] += 1
        pytest.fail("%s.%s failed on RV32:\n%s" % (module, function, text), pytrace=False)
    STATS["failed"] += 1
    pytest.fail("%s.%s was not run on RV32 (status %s)" % (module, function, status), pytrace=False)


def test_image_is_c6_like(tmp_path):
    """The image reports the C6's .mpy ABI (RV32IMC, no arch flags), f32 floats, 2**30 ticks."""
    why = RV.unavailable()
    if why:
        pytest.skip("rv32 tier not run: " + why)
    script = tmp_path / "probe.py"
    script.write_text(
        "import sys, time\n"
        "print('mpy', hex(sys.implementation._mpy))\n"
        "print('f32', 16777217.0 == 16777216.0)\n"
        "print('wrap', time.ticks_add(0, -1) == 2**30 - 1)\n"
    )
    r = RV.run_script(str(script), stage=RV.Stage(ROOT), timeout=120)
    assert r.rc == 0, r.out + r.err
    assert (
        "mpy 0x2f06" in r.out
    ), r.out  # arch 11 = RV32IMC, no Zba flag: what ESP32-C6 firmware reports
    assert "f32 True" in r.out and "wrap True" in r.out, r.out


def test_a_zba_mpy_is_refused(tmp_path):
    """A .mpy compiled for RV32IMC + Zba is refused, as the C6 would refuse it."""
    why = RV.unavailable()
    if why:
        pytest.skip("rv32 tier not run: " + why)
    import subprocess

    src = tmp_path / "zbamod.py"
    src.write_text("@micropython.viper\ndef f(x: int) -> int:\n    return x + 1\n")
    subprocess.run(
        [
            RV.mpy_cross(),
            "-march=rv32imc",
            "-march-flags=zba",
            "-o",
            str(tmp_path / "zbamod.mpy"),
            str(src),
        ],
        check=True,
    )
    script = tmp_path / "probe.py"
    script.write_text(
        "import sys\nsys.path.insert(0, '/r/_run')\n"
        "try:\n    import zbamod\n    print('loaded')\nexcept ValueError as e:\n    print('refused', e)\n"
    )
    stage = RV.Stage(ROOT)
    stage.add("_run/zbamod.mpy", str(tmp_path / "zbamod.mpy"))
    r = RV.run_script(str(script), stage=stage, timeout=120)
    assert r.rc == 0, r.out + r.err
    assert "refused incompatible .mpy" in r.out, r.out


def _core_heap():
    spec = importlib.util.spec_from_file_location(
        "organbus_rv32_core_heap", os.path.join(TESTS, "core", "test_core_heap.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_decoder_under_heap_lock_on_rv32(tmp_path):
    """host_tests/core/test_core_heap.py's 10,000 frames (heartbeats, command responses, junk,
    bad CRCs, abandoned headers) decoded under micropython.heap_lock() on the image."""
    why = RV.unavailable()
    if why:
        pytest.skip("rv32 tier not run: " + why)
    import json

    heap = _core_heap()
    script = tmp_path / "core_heap.py"
    script.write_text(heap.SCRIPT % {"n": heap.FRAMES})
    r = RV.run_script(str(script), stage=RV.Stage(ROOT), timeout=600)
    assert r.rc == 0, "RV32 run failed:\n%s%s" % (r.out, r.err)
    res = json.loads(r.out.strip().splitlines()[-1])
    assert res["error"] is None, "allocation under heap_lock on RV32: %s\n%s" % (
        res["error"],
        r.out,
    )
    cycles = res["cycles"]
    assert res["heartbeats"] == 3 * cycles and res["ok"] == cycles and res["fail"] == cycles, res
    assert res["frames"] == heap.FRAMES, "frames counter: %r" % res
    assert res["crc_errors"] == cycles and res["abandoned"] == cycles, res
    assert res["alloc"] == 0, "the heap grew by %d bytes" % res["alloc"]


def _load(tier, module):
    spec = importlib.util.spec_from_file_location(
        "organbus_rv32_" + module, os.path.join(TESTS, tier, module + ".py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_decoder_on_the_stream_corpus_matches_cpython(tmp_path):
    """host_tests/core/test_core_differential.py's 150 random streams (chunking, timing, junk,
    bit flips, cut frames) plus the recorded captures: the same frames and counters on RV32."""
    why = RV.unavailable()
    if why:
        pytest.skip("rv32 tier not run: " + why)
    import json
    import random

    diff = _load("core", "test_core_differential")
    rnd = random.Random(20261130)
    streams = [diff.make_stream(rnd) for _ in range(150)]
    caps = os.path.join(TESTS, "data", "captures")
    for name in sorted(os.listdir(caps)):
        if name.endswith(".jsonl"):  # a recorded session: its reads, at their times
            with open(os.path.join(caps, name)) as f:
                rows = [json.loads(line) for line in f if line.strip()]
            # the decoder takes integer ms ticks (a capture may hold fractional times)
            streams.append([["f", int(row["t_ms"]), row["hex"]] for row in rows])
    assert len(streams) > 150, "no captures found in %s" % caps
    corpus = tmp_path / "streams.jsonl"
    corpus.write_text("".join(json.dumps(s) + "\n" for s in streams))
    script = tmp_path / "diff_rv32.py"
    script.write_text(
        diff.DRIVER
        + "\nwith open('/r/_run/streams.jsonl') as f:\n"
        + "    for line in f:\n"
        + "        print('R ' + json.dumps(run_streams([json.loads(line)])[0]))\n"
    )
    stage = RV.Stage(ROOT)
    stage.add("_run/streams.jsonl", str(corpus))
    r = RV.run_script(str(script), stage=stage, timeout=600)
    assert r.rc == 0, "RV32 driver failed:\n%s%s" % (r.out[-2000:], r.err)
    theirs = [json.loads(line[2:]) for line in r.out.splitlines() if line.startswith("R ")]
    scope = {}
    exec(compile(diff.DRIVER, "diff_driver", "exec"), scope)
    ours = json.loads(json.dumps(scope["run_streams"](streams)))
    assert len(theirs) == len(ours) == len(streams), (len(theirs), len(streams))
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a["frames"] == b["frames"], "stream %d: frames differ on RV32" % i
        assert a["counters"] == b["counters"], "stream %d: counters differ: %r vs %r (%s)" % (
            i,
            a["counters"],
            b["counters"],
            frame_counter_names(),
        )
    assert sum(len(a["frames"]) for a in ours[150:]) > 0, "the captures held no frames"


def frame_counter_names():
    from organbus import frame

    return frame.COUNTER_NAMES


SENTENCES = (
    "Light is on.",
    "The kitchen light is on and the front door is locked.",
    "It is 7:20 in the evening, outside it is 12 degrees.",
    "Would you like me to play some music, set a timer, or read the news?",
    "Dr. Smith paid $3.50 for 2 coffees on May 1st.",
    "Hello!",
)

VOICE_DRIVER = r"""
import binascii
from organs.voice import Speech


def digest(text, viper):
    buf = bytearray(1024)
    crc = 0
    n = 0
    job = Speech(text, rate=11025, viper=viper)
    while True:
        k = job.fill(buf)
        if not k:
            break
        crc = binascii.crc32(memoryview(buf)[:k], crc)
        n += k
    return "%d:%08x" % (n // 2, crc & 0xFFFFFFFF)
"""


def test_voice_samples_match_cpython(tmp_path):
    """The speaker's samples on RV32 (viper) are the CPython ones (pure path), sentence by sentence."""
    why = RV.unavailable()
    if why:
        pytest.skip("rv32 tier not run: " + why)
    script = tmp_path / "voice_rv32.py"
    script.write_text(
        VOICE_DRIVER + "for t in %r:\n    print('V', digest(t, True))\n" % (SENTENCES,)
    )
    r = RV.run_script(str(script), stage=RV.Stage(ROOT), timeout=900)
    assert r.rc == 0, "RV32 voice run failed:\n%s%s" % (r.out[-2000:], r.err)
    theirs = [line[2:] for line in r.out.splitlines() if line.startswith("V ")]
    scope = {}
    exec(compile(VOICE_DRIVER, "voice_driver", "exec"), scope)
    ours = [scope["digest"](t, False) for t in SENTENCES]
    assert all(int(d.split(":")[0]) > 1000 for d in ours), ours
    for text, a, b in zip(SENTENCES, ours, theirs):
        assert a == b, "samples differ for %r: CPython %s, RV32 %s" % (text, a, b)
    assert len(theirs) == len(SENTENCES), r.out
