# tools/busdump.py: decoded lines, identical on CPython and the unix port, errors as one line and exit 2.
import json
import os
import random
import struct
import subprocess
import sys

import pytest

from support import ROOT, VECTORS, micropython_exe, popen_ctrl_c

TOOL = os.path.join(ROOT, "tools", "busdump.py")
CAPTURES = os.path.join(ROOT, "host_tests", "data", "captures")
CAPTURE_FILES = sorted(os.listdir(CAPTURES))

sys.path.insert(0, os.path.join(ROOT, "tools"))
import busdump  # noqa: E402


def _env():
    # neither interpreter gets an import path: the tool finds lib/ (and .frozen stays) itself
    env = dict(os.environ)
    env.pop("MICROPYPATH", None)
    env.pop("PYTHONPATH", None)
    return env


def run_cp(args, stdin=None, cwd=None):
    return subprocess.run(
        [sys.executable, TOOL] + list(args),
        input=stdin,
        capture_output=True,
        env=_env(),
        cwd=cwd or "/",
        timeout=60,
    )


def run_mp(args, stdin=None, cwd=None):
    return subprocess.run(
        [micropython_exe(), TOOL] + list(args),
        input=stdin,
        capture_output=True,
        env=_env(),
        cwd=cwd or "/",
        timeout=60,
    )


def _lines(r):
    return [json.loads(x) for x in r.stdout.decode("utf-8").splitlines()]


def _frames_and_counters(r):
    lines = _lines(r)
    assert "counters" in lines[-1], "the last line must be the counters: %r" % lines[-1]
    return lines[:-1], lines[-1]["counters"]


def _accounted(frames, counters):
    framed = sum(f["len"] + 8 for f in frames)
    assert counters["bytes"] == counters["junk"] + framed, (
        "bytes are not junk + frames: %r" % counters
    )
    assert counters["frames"] == len(frames), "one line per frame"


@pytest.mark.parametrize("name", CAPTURE_FILES)
def test_identical_on_both_interpreters(name):
    path = os.path.join(CAPTURES, name)
    a = run_cp([path])
    b = run_mp([path])
    assert a.returncode == 0, a.stderr.decode()
    assert b.returncode == 0, b.stderr.decode()
    assert a.stdout == b.stdout, "CPython and the unix port print different lines for %s" % name
    assert a.stderr == b"" and b.stderr == b"", "nothing on stderr for a good capture"
    frames, counters = _frames_and_counters(a)
    _accounted(frames, counters)
    for f in frames:
        assert f["payload"] == f["payload"].lower() and len(f["payload"]) == 2 * f["len"], f


def test_tool_finds_its_imports_from_any_directory():
    path = os.path.join(CAPTURES, "master_to_organ.raw")
    want = run_cp([path]).stdout
    r = subprocess.run(
        [micropython_exe(), "busdump.py", path],
        capture_output=True,
        env=_env(),
        cwd=os.path.join(ROOT, "tools"),
        timeout=60,
    )
    assert r.returncode == 0 and r.stdout == want, "run from tools/: %s" % r.stderr.decode()


def test_organ_to_master_capture():
    r = run_cp([os.path.join(CAPTURES, "organ_to_master.jsonl")])
    frames, c = _frames_and_counters(r)
    types = [f["type"] for f in frames]
    assert types == [
        "DESCRIPTOR",
        "HEARTBEAT",
        "COMMAND_RESP",
        "HEARTBEAT",
        "HEARTBEAT",
        "HEARTBEAT",
        "EVENT",
        "DESCRIPTOR",
        "UNKNOWN",
        "COMMAND_RESP",
    ], types
    with open(VECTORS) as f:
        led = json.load(f)["descriptors"][0]
    d = frames[0]
    assert d["t_ms"] == 1002.5, "a frame's t_ms is when its last byte arrived: %r" % d["t_ms"]
    for k in ("module_id", "module_type", "hw_version", "fw_version", "capabilities"):
        assert d[k] == led[k], "descriptor field %s" % k
    # the heartbeat hidden behind a corrupt header arrived at 3004 and came out at 3070
    assert [f["t_ms"] for f in frames[3:6]] == [3004, 3070, 4004.25], frames[3:6]
    assert frames[6]["name"] == "led_blink" and frames[6]["status"] == 0, frames[6]
    assert "capabilities[0].name" in frames[7]["error"], frames[7]
    assert frames[8]["type_id"] == 0x7E and frames[8]["payload"] == "aaaa03", frames[8]
    assert "must be 1" in frames[9]["error"], frames[9]
    want = {"crc_errors": 1, "bad_version": 1, "bad_eof": 1, "oversize": 0, "abandoned": 2}
    for k, v in want.items():
        assert c[k] == v, "counter %s: %r" % (k, c)
    assert c["unknown"] == 1, c
    assert list(c) == [
        "frames",
        "bytes",
        "junk",
        "crc_errors",
        "bad_version",
        "oversize",
        "bad_eof",
        "abandoned",
        "unknown",
    ], "counters in the documented order"


def test_raw_capture_commands():
    r = run_cp([os.path.join(CAPTURES, "master_to_organ.raw")])
    frames, c = _frames_and_counters(r)
    assert "t_ms" not in frames[0], "a raw capture has no times"
    cmds = [f for f in frames if f["type"] == "COMMAND"]
    assert [f.get("name") for f in cmds] == [
        "led_on",
        "led_blink",
        "speak",
        "mystery",
        "no_such_one",
        None,
    ], cmds
    assert cmds[1]["values"] == [3.0, 250.0] and cmds[1]["text"] is None, cmds[1]
    assert cmds[2]["text"] == "Light is on.", cmds[2]
    f32 = [struct.unpack(">f", struct.pack(">f", x))[0] for x in (0.1, -2.5e-7, 3.4e38)]
    got = [struct.unpack(">f", struct.pack(">f", x))[0] for x in cmds[3]["values"]]
    assert got == f32, "f32 values must read back exactly: %r" % cmds[3]["values"]
    assert cmds[3]["values"] == [0.1, -2.5e-07, 3.4e38], "shortest text: %r" % cmds[3]["values"]
    assert "truncated" in cmds[5]["error"], cmds[5]
    for f in cmds[:5]:
        assert "no DESCRIPTOR" in f["note"], "reading without a descriptor is said: %r" % f
    assert c["abandoned"] == 2, "the LEN flip and the cut-off tail are abandoned at the end: %r" % c


def test_speaker_session_uses_learnt_descriptor():
    r = run_cp([os.path.join(CAPTURES, "speaker_session.jsonl")])
    frames, c = _frames_and_counters(r)
    cmds = [f for f in frames if f["type"] == "COMMAND"]
    assert cmds[0]["text"] == 'Say "hi"\n\u00c7a marche \u2014 \u597d \U0001f600', cmds[0]
    assert "note" not in cmds[0], "a capability from the capture's DESCRIPTOR needs no note"
    assert cmds[1]["name"] == "chime" and cmds[1]["values"] == [], cmds[1]
    assert "UTF-8" in cmds[2]["error"], cmds[2]
    assert "expected 6" in cmds[3]["error"], cmds[3]
    assert cmds[4]["text"] == "", cmds[4]
    times = [f["t_ms"] for f in frames]
    assert times[6] == 1000 and times[7] == 1500, "1e3 and 1.5E+3 are the capture's own numbers"
    assert "malformed" in frames[-1]["error"], frames[-1]
    raw = r.stdout.decode().splitlines()
    assert '"t_ms": 1e3,' in raw[6], "t_ms is printed as the capture wrote it: %s" % raw[6][:40]


def test_descriptor_option_decodes_commands(tmp_path):
    with open(VECTORS) as f:
        led = json.load(f)["descriptors"][0]["payload"]
    hexfile = tmp_path / "led.hex"
    hexfile.write_text(led[:100] + "\n" + led[100:] + "\n")
    path = os.path.join(CAPTURES, "master_to_organ.raw")
    # the unix port cannot take a 368-character argument: it gets the file
    for run, arg in ((run_cp, led), (run_cp, str(hexfile)), (run_mp, str(hexfile))):
        r = run([path, "--descriptor", arg])
        frames, _ = _frames_and_counters(r)
        blink = [f for f in frames if f.get("name") == "led_blink"][0]
        assert "note" not in blink and blink["values"] == [3.0, 250.0], blink
    a, b = run_cp([path, "--descriptor", led]), run_mp([path, "--descriptor", str(hexfile)])
    assert a.stdout == b.stdout, "--descriptor output differs between interpreters"
    r = run_cp([path, "--descriptor", "00"])
    assert r.returncode == 2 and r.stderr.decode().startswith("busdump: --descriptor"), r.stderr


def test_stdin_same_as_file():
    for name in CAPTURE_FILES:
        path = os.path.join(CAPTURES, name)
        with open(path, "rb") as f:
            data = f.read()
        want = run_cp([path]).stdout
        for run in (run_cp, run_mp):
            r = run(["-"], stdin=data)
            assert r.returncode == 0 and r.stdout == want, "%s from stdin (%s)" % (
                name,
                run.__name__,
            )
        r = run_cp([], stdin=data)
        assert r.stdout == want, "no argument reads stdin"


def test_forced_raw_format():
    path = os.path.join(CAPTURES, "speaker_session.jsonl")
    frames, c = _frames_and_counters(run_cp(["--raw", path]))
    assert frames == [] and c["junk"] == os.path.getsize(path), "JSON text read raw is all junk"
    frames, _ = _frames_and_counters(run_mp(["--timed", path]))
    assert len(frames) == 13, "--timed reads the lines"


def _one_line_error(r, starts):
    err = r.stderr.decode()
    assert r.returncode == 2, "exit status 2, got %d (%s)" % (r.returncode, err)
    assert err.count("\n") == 1 and err.startswith("busdump: "), "one line: %r" % err
    assert starts in err, "%r should say %r" % (err, starts)
    return err


def test_missing_file():
    a = _one_line_error(run_cp(["/no/such/capture.raw"]), "cannot open /no/such/capture.raw")
    b = _one_line_error(run_mp(["/no/such/capture.raw"]), "cannot open /no/such/capture.raw")
    assert a == b, "the same message on both interpreters"


def test_unopenable_port():
    _one_line_error(run_cp(["--port", "/dev/no_such_tty", "--baud", "115200"]), "/dev/no_such_tty")
    _one_line_error(run_mp(["--port", "/dev/no_such_tty"]), "pyserial")
    _one_line_error(run_cp(["--port", "/dev/x", "--baud", "fast"]), "--baud")


def test_bad_arguments():
    _one_line_error(run_cp(["--frobnicate"]), "unknown option")
    _one_line_error(run_cp(["a", "b"]), "one capture at a time")
    _one_line_error(run_mp(["--port"]), "needs a value")


@pytest.mark.parametrize(
    "line, why",
    [
        ("not json", "not a JSON line"),
        ('{"t_ms": 5}', "hex"),
        ('{"hex": "aa"}', "t_ms"),
        ('{"t_ms": "5", "hex": "aa"}', "t_ms must be a number"),
        ('{"t_ms": 5, "hex": "abc"}', "hex must be"),
        ('{"t_ms": 5, "hex": "zz"}', "hex must be"),
        ('{"t_ms": 4, "hex": "aa"}', "goes back in time"),
    ],
)
def test_bad_timed_line(tmp_path, line, why):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"t_ms": 4.5, "hex": "aa0303000060f055"}\n\n' + line + "\n")
    a = _one_line_error(run_cp(["--timed", str(p)]), why)
    b = _one_line_error(run_mp(["--timed", str(p)]), why)
    assert a == b, "same error on both interpreters"
    assert ":3:" in a, "the error names the line: %r" % a


def _timed(tmp_path, rows):
    p = tmp_path / "t.jsonl"
    p.write_text("".join('{"t_ms": %s, "hex": "%s"}\n' % row for row in rows))
    return str(p)


def test_idle_rule_uses_exact_times(tmp_path):
    # 0.1 -> 50.1 is exactly 50 ms (binary floats would say 49.99999...): the candidate goes
    corrupt = "aa0310012c"
    hb = "aa0303000060f055"
    quiet = _timed(tmp_path, [("0.1", corrupt), ("50.1", hb)])
    for run in (run_cp, run_mp):
        frames, c = _frames_and_counters(run([quiet]))
        assert [f["t_ms"] for f in frames] == [50.1], "%s: %r" % (run.__name__, frames)
        assert c["abandoned"] == 1, c
    busy = _timed(tmp_path, [("0.1", corrupt), ("50.0999", hb)])
    for run in (run_cp, run_mp):
        frames, c = _frames_and_counters(run([busy]))
        # 49.9999 ms: the heartbeat joins the corrupt candidate; it comes out only at the end
        assert [f["t_ms"] for f in frames] == [50.0999], "%s: %r" % (run.__name__, frames)
        assert c["junk"] == 5 and c["abandoned"] == 1, c


def test_old_candidate_rule_on_capture_times(tmp_path):
    # heartbeats every 30 ms behind a header claiming 300 bytes: the header goes 90 ms after it came
    hb = "aa0303000060f055"
    path = _timed(
        tmp_path, [("0", "aa0310012c"), ("30", hb), ("60", hb), ("89.999", hb), ("90", hb)]
    )
    outs = []
    for run in (run_cp, run_mp):
        r = run([path])
        outs.append(r.stdout)
        frames, c = _frames_and_counters(r)
        assert [f["t_ms"] for f in frames] == [30, 60, 89.999, 90], frames
        assert c["abandoned"] == 1 and c["junk"] == 5, c
    assert outs[0] == outs[1], "the age rule decides alike on both interpreters"


def test_long_gaps(tmp_path):
    # hours between lines: still one quiet gap each, never a wrapped tick
    hb = "aa0303000060f055"
    rows = [("0", "aa0310012c"), ("3600000", hb[:8]), ("7200000.5", hb[8:]), ("10800000", hb)]
    path = _timed(tmp_path, rows)
    for run in (run_cp, run_mp):
        frames, c = _frames_and_counters(run([path]))
        assert [f["t_ms"] for f in frames] == [10800000], frames
        assert c["abandoned"] == 2, "the header and the split heartbeat both went stale: %r" % c


def test_long_capture_keeps_times(tmp_path):
    rows = []
    hb = "aa0303000060f055"
    for i in range(3000):
        rows.append((str(i * 7), hb[:6]))
        rows.append(("%d.5" % (i * 7), hb[6:]))
    path = _timed(tmp_path, rows)
    a, b = run_cp([path]), run_mp([path])
    assert a.stdout == b.stdout, "long capture differs between interpreters"
    frames, c = _frames_and_counters(a)
    assert len(frames) == 3000 and frames[-1]["t_ms"] == 20993.5, frames[-1]
    # the time index stays small however long the capture
    dump = busdump.Dump(lambda line: None)
    dump.timed = True
    for i in range(3000):
        dump.timed_chunk(str(i), i, bytes.fromhex(hb))
    assert len(dump.spans) <= 200, "time spans are pruned: %d kept" % len(dump.spans)


def _f32(x):
    return struct.unpack(">f", struct.pack(">f", x))[0]


def _bits_to_f32(b):
    return struct.unpack(">f", struct.pack(">I", b))[0]


def _sample_bits(n, seed):
    rnd = random.Random(seed)
    out = [0x00000001, 0x007FFFFF, 0x00800000, 0x3F800000, 0x3F800001, 0x7F7FFFFF, 0x80000001]
    out += [0x3DCCCCCD, 0x45F7B940, 0x4B800000, 0x4B800001, 0x5A0E1BCA, 0x2F8AC9B8]
    while len(out) < n:
        b = rnd.getrandbits(32)
        if (b >> 23) & 0xFF != 0xFF:
            out.append(b)
    return out


def test_f32_text_round_trips_and_is_short():
    for b in _sample_bits(20000, 1):
        x = _bits_to_f32(b)
        t = busdump.f32_text(x)
        assert _f32(float(t)) == x, "%r reads back as %r, not %r" % (t, _f32(float(t)), x)
        digits = t.lstrip("-").split("e")[0].replace(".", "").strip("0")
        assert len(digits) <= 9, "%r has more digits than a binary32 needs" % t
        assert float(t) == float(repr(float(t))), "%r is plain JSON number text" % t
    for x, want in ((0.1, "0.1"), (1.0, "1.0"), (250.0, "250.0"), (-2.5e-7, "-2.5e-07")):
        assert busdump.f32_text(_f32(x)) == want, "f32_text(%r) = %r" % (
            x,
            busdump.f32_text(_f32(x)),
        )
    for x, want in ((float("nan"), "NaN"), (float("inf"), "Infinity"), (-0.0, "-0.0")):
        assert busdump.f32_text(x) == want, want


def test_f32_text_same_on_unix_port(tmp_path):
    bits = _sample_bits(3000, 2)
    script = tmp_path / "f32.py"
    script.write_text(
        "import sys, struct\n"
        "sys.path.insert(0, %r)\n"
        "import busdump\n"
        "for b in %r:\n"
        "    print(busdump.f32_text(struct.unpack('>f', struct.pack('>I', b))[0]))\n"
        % (os.path.join(ROOT, "tools"), bits)
    )
    r = subprocess.run(
        [micropython_exe(), str(script)], capture_output=True, env=_env(), timeout=120
    )
    assert r.returncode == 0, r.stderr.decode()
    want = [busdump.f32_text(_bits_to_f32(b)) for b in bits]
    assert r.stdout.decode().splitlines() == want, "f32 text differs on the unix port"


def test_parse_ms_is_exact():
    assert busdump.parse_ms("50.1") - busdump.parse_ms("0.1") == 50000000
    assert busdump.parse_ms("1e3") == 1000000000
    assert busdump.parse_ms("1.5E+3") == 1500000000
    assert busdump.parse_ms("-2") == -2000000
    assert busdump.parse_ms("0.000001") == 1
    for bad in ("", "-", "1.", ".5", "01", "1e", "1e+", "x", "1.2.3"):
        with pytest.raises(ValueError):
            busdump.parse_ms(bad)


def test_json_strings_escape_like_json():
    for s in (
        "plain",
        'q"uote',
        "back\\slash",
        "new\nline\ttab\r",
        "\x00\x1f\x7f",
        "\u00e9\u597d\U0001f600",
    ):
        assert json.loads(busdump.to_json(s)) == s, "string %r does not survive" % s


def test_serial_port_live(tmp_path):
    # a pseudo-terminal stands in for the USB-UART bridge: lines come out as frames arrive
    import select
    import signal
    import time

    master, slave = os.openpty()
    port = os.ttyname(slave)
    p = popen_ctrl_c(
        [sys.executable, TOOL, "--port", port, "--baud", "115200"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    try:
        # pyserial flushes pending input when it opens the port: write only once it has it
        # open, and again if a busy machine still made the first write miss
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            fds = os.listdir("/proc/%d/fd" % p.pid)
            if any(os.path.realpath("/proc/%d/fd/%s" % (p.pid, fd)) == port for fd in fds):
                break
            time.sleep(0.05)
        ready = []
        for _ in range(5):
            time.sleep(0.3)
            os.write(master, bytes.fromhex("00aa0303000060f055aa0311000100ac6455"))
            ready, _, _ = select.select([p.stdout], [], [], 4)
            if ready:
                break
        assert ready, "no line after the frames: lines must be flushed as they come"
        time.sleep(0.2)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
        os.close(slave)
    assert p.returncode == 0, err.decode()
    lines = [json.loads(x) for x in out.decode().splitlines()]
    frames, c = lines[:-1], lines[-1]["counters"]
    assert frames and len(frames) % 2 == 0, lines
    for hb, resp in zip(frames[::2], frames[1::2]):
        assert hb["type"] == "HEARTBEAT" and isinstance(hb["t_ms"], int), hb
        assert resp["type"] == "COMMAND_RESP" and resp["status"] == 0, resp
    assert c["frames"] == len(frames) and c["junk"] == len(frames) // 2, c


def _random_capture(rnd):
    sys.path.insert(0, os.path.join(ROOT, "lib"))
    from organbus import command
    from organbus import descriptor
    from organbus import frame

    floats = [struct.unpack(">f", struct.pack(">I", rnd.getrandbits(32)))[0] for _ in range(40)]
    floats = [x for x in floats if x == x and abs(x) != float("inf")]
    caps = []
    for i in range(3):
        lo, hi = sorted(rnd.sample(floats, 2))
        caps.append(
            {
                "name": "dial%d" % i,
                "description": rnd.choice(["Turn it \u2014 gently.", 'Say "x"\n', "\u597d"]),
                "exec_type": "continuous",
                "resource_group": "g",
                "max_duration_ms": rnd.randrange(1 << 32),
                "params": [
                    {"name": "level", "type": "float", "min": lo, "max": hi, "unit": "\u00b0C"},
                    {"name": "text", "type": "string", "min": 0, "max": 240, "unit": ""},
                ],
            }
        )
    desc = {"module_id": "X_1", "module_type": "x", "hw_version": 1, "fw_version": 2}
    desc["capabilities"] = caps
    texts = ["", "plain", "\u00c7a \u2014 \u597d \U0001f600", 'q"\\\n\t\x01', "x" * 200]
    stream = [frame.encode(frame.DESCRIPTOR, descriptor.encode_descriptor(desc))]
    for _ in range(150):
        k = rnd.random()
        if k < 0.3:
            name = rnd.choice(["dial0", "dial1", "dial2", "mystery", "m2"])
            vals = [rnd.choice(floats) for _ in range(rnd.randrange(3) if name[0] == "m" else 1)]
            text = rnd.choice(texts + [None]) if name[0] == "m" else rnd.choice(texts)
            stream.append(frame.encode(frame.COMMAND, command.encode_command(name, vals, text)))
        elif k < 0.5:
            stream.append(
                frame.encode(frame.EVENT, command.encode_event(rnd.choice(["a", "dial1"]), 0))
            )
        elif k < 0.7:
            stream.append(bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(1, 12))))
        elif k < 0.8:
            f = bytearray(rnd.choice(stream[:1] + [frame.HEARTBEAT_FRAME, frame.RESP_OK_FRAME]))
            f[rnd.randrange(len(f))] ^= 1 << rnd.randrange(8)
            stream.append(bytes(f))
        else:
            stream.append(
                rnd.choice([frame.HEARTBEAT_FRAME, frame.RESP_FAIL_FRAME, frame.ACK_FRAME])
            )
    data = b"".join(stream)
    rows = []
    t = 0
    i = 0
    while i < len(data):
        n = rnd.randrange(1, 90)
        t += rnd.choice([0, 0.125, 1, 3.5, 20, 49.999, 50, 75, 200])
        forms = ["%.3f" % t] + (["%d" % t, "%de0" % t, "%de-1" % (t * 10)] if t == int(t) else [])
        text = rnd.choice(forms)
        rows.append((text, data[i : i + n].hex()))
        i += n
    return rows


def test_random_captures_identical_on_both_interpreters(tmp_path):
    rnd = random.Random(99)
    for k in range(3):
        path = tmp_path / ("r%d.jsonl" % k)
        path.write_text(
            "".join('{"t_ms": %s, "hex": "%s"}\n' % row for row in _random_capture(rnd))
        )
        a, b = run_cp([str(path)]), run_mp([str(path)])
        assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
        assert a.stdout == b.stdout, "random capture %d: the interpreters print different lines" % k
        frames, c = _frames_and_counters(a)
        _accounted(frames, c)
        assert any("values" in f for f in frames), "the capture must exercise float printing"
