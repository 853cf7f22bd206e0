# tools/sim.py as a user runs it: `board ROLE` against a test playing the other end, --plan, --script.
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

from support import ROOT, free_port as _free_port

sys.path.insert(0, os.path.join(ROOT, "tools"))
from vbody.console import Console  # noqa: E402
from organbus import frame  # noqa: E402
from organbus import command  # noqa: E402

SIM = [sys.executable, os.path.join(ROOT, "tools", "sim.py")]


def test_board_refuses_non_loopback_and_missing_uarts():
    r = subprocess.run(
        SIM + ["board", "led", "--uart", "1=connect:192.168.4.1:7001"],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert r.returncode == 2 and "loopback" in r.stderr, r.stderr
    r = subprocess.run(
        SIM + ["board", "led", "--uart", "0=listen:127.0.0.1:7001"],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert r.returncode == 2 and "UART 1 only" in r.stderr, r.stderr
    r = subprocess.run(
        SIM + ["board", "speaker", "--http", "127.0.0.1:8080"],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert r.returncode == 2 and "master" in r.stderr, r.stderr


class Master:
    """The test's end of an organ's cable: decodes what the organ sends."""

    def __init__(self, port):
        self.frames = []
        self.dec = frame.Decoder(
            lambda t, p, n: self.frames.append((time.monotonic(), t, bytes(p[:n])))
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                self.s = socket.create_connection(("127.0.0.1", port), timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.s.settimeout(0.05)

    def pump(self, until, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                d = self.s.recv(4096)
                if d:
                    self.dec.feed(d, int(time.monotonic() * 1000))
            except socket.timeout:
                pass
            hit = until()
            if hit:
                return hit
        return None

    def first(self, ftype, since=0):
        for f in self.frames[since:]:
            if f[1] == ftype:
                return f
        return None


def test_board_led_alone_against_a_test_master(tmp_path):
    port = _free_port()
    log = tmp_path / "led.jsonl"
    p = subprocess.Popen(
        SIM
        + ["board", "led", "--uart", "1=listen:127.0.0.1:%d" % port, "--log", str(log)]
        + ["--out", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        m = Master(port)
        d = m.pump(lambda: m.first(frame.DESCRIPTOR), 4)
        assert d is not None, "no DESCRIPTOR within 4 s"
        m.s.sendall(frame.ACK_FRAME)
        n = len(m.frames)
        hb = m.pump(lambda: m.first(frame.HEARTBEAT, n), 2.5)
        assert hb is not None, "no HEARTBEAT after ACK"
        n = len(m.frames)
        m.s.sendall(frame.encode(frame.COMMAND, command.encode_command("led_on")))
        resp = m.pump(lambda: m.first(frame.COMMAND_RESP, n), 2)
        assert resp is not None and resp[2] == b"\x00", "led_on answer: %s" % (resp,)
        time.sleep(0.2)
    finally:
        p.terminate()
        out, err = p.communicate(timeout=10)
    assert p.returncode == 0, (p.returncode, err)
    assert "UART1 <-> listen:127.0.0.1:%d" % port in err, err
    events = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    assert events and events[0]["event"] == "boot", out
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert any(x.get("event") == "boot" for x in lines), lines
    pins = [x for x in lines if "pin" in x]
    assert pins and pins[-1]["value"] == 1, "the LED is not on in the pin log: %s" % lines


def test_board_master_http_and_console_link(tmp_path):
    p = subprocess.Popen(
        SIM
        + ["board", "master", "--http", "127.0.0.1:0", "--console", "link", "--out", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        http = None
        deadline = time.monotonic() + 15
        while http is None and time.monotonic() < deadline:
            line = p.stdout.readline()
            if line.startswith("{") and json.loads(line).get("event") == "http":
                http = json.loads(line)
        assert http, "the master never printed its HTTP address"
        with urllib.request.urlopen("http://127.0.0.1:%d/menu" % http["port"], timeout=5) as r:
            menu = json.loads(r.read())
        assert menu["capabilities"] == [], menu
        p.stdin.write('{"op": "menu"}\n')
        p.stdin.flush()
        reply = None
        while reply is None:
            line = p.stdout.readline()
            assert line, "stdout closed before the console reply"
            obj = json.loads(line)
            if obj.get("op") == "menu":
                reply = obj
        assert reply["reply"]["capabilities"] == [], reply
    finally:
        p.terminate()
        p.communicate(timeout=10)


PLAN = {
    "heard_req": 0,
    "steps": [
        {"task_id": "t1", "action": "led_on", "params": {}, "priority": 5, "depends_on": []},
        {"task_id": "t2", "action": "chime", "params": {}, "priority": 5, "depends_on": ["t1"]},
    ],
    "can_execute": True,
    "missing": [],
    "response": "",
}


def test_body_plan_file_prints_the_report(tmp_path):
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(PLAN))
    r = subprocess.run(
        SIM + ["--plan", str(f), "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 1, "stdout holds the report alone: %r" % r.stdout
    rep = json.loads(lines[0])
    assert "LED_001" in r.stderr and "report" in r.stderr, (
        "commentary goes to stderr: %s" % r.stderr
    )
    assert rep["ok"] and [s["status"] for s in rep["steps"]] == ["done", "done"], rep


def test_body_script_with_json_output(tmp_path):
    f = tmp_path / "script.txt"
    f.write_text(
        "# a console session\nmenu\nled_blink count=2 period_ms=100\nnot_an_ability\n"
        "junk led 16\nunplug speaker\nreplug speaker\nbus\n"
    )
    r = subprocess.run(
        SIM + ["--script", str(f), "--json", "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    kinds = [x["kind"] for x in lines]
    assert "menu" in kinds and "bus" in kinds and kinds[-1] == "stop", kinds
    reports = [x for x in lines if x["kind"] == "report"]
    assert reports and reports[0]["report"]["ok"], reports
    refused = [x for x in lines if x["kind"] == "refused"]
    assert refused and refused[0]["status"] == 422, refused
    assert any("not_an_ability" in p for p in refused[0]["reply"]["problems"]), refused
    leds = [x["value"] for x in lines if x["kind"] == "led"]
    assert leds.count(1) >= 2, "LED changes not shown: %s" % leds
    bus = [x for x in lines if x["kind"] == "bus" and "counters" in x][-1]["counters"]
    assert bus["led"]["a>b"]["junk"] == 16 and bus["speaker"]["unplugs"] == 1, bus


class _NoBody:
    on_event = None


def test_console_direct_steps_become_one_step_plans():
    c = Console(_NoBody())
    p = c.step_plan("led_blink count=3 period_ms=200")
    assert p["steps"] == [
        {
            "task_id": "t1",
            "action": "led_blink",
            "params": {"count": 3, "period_ms": 200},
            "priority": 5,
            "depends_on": [],
        }
    ], p
    assert p["can_execute"] is True and p["missing"] == [] and p["heard_req"] == 0
    assert c.step_plan('speak "Light is on."')["steps"][0]["params"] == {"text": "Light is on."}
    assert c.step_plan('speak text="Hi there"')["steps"][0]["params"] == {"text": "Hi there"}
    # values go to the master as written: it validates (30.5 is not an int, "fast" not a number)
    assert c.step_plan("led_blink count=30.5 period_ms=fast")["steps"][0]["params"] == {
        "count": 30.5,
        "period_ms": "fast",
    }


def test_body_takes_an_external_led_organ(tmp_path):
    """The LED organ's place taken by another process on a loopback address (here: the same
    firmware under `sim.py board led`, standing in for any other implementation)."""
    port = _free_port()
    organ = subprocess.Popen(
        SIM
        + [
            "board",
            "led",
            "--uart",
            "1=listen:127.0.0.1:%d" % port,
            "--out",
            str(tmp_path / "ext"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        f = tmp_path / "script.txt"
        f.write_text("led_on\npower speaker\nwait ack 10\nwait menu 10\nchime\n")
        r = subprocess.run(
            SIM
            + ["--led", "connect:127.0.0.1:%d" % port, "--script", str(f), "--json"]
            + ["--out", str(tmp_path / "run")],
            capture_output=True,
            text=True,
            timeout=90,
        )
    finally:
        organ.terminate()
        organ.wait(10)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    start = [x for x in lines if x["kind"] == "start"][0]
    assert sorted(start["pids"]) == ["master", "speaker"], start
    reports = [x["report"] for x in lines if x["kind"] == "report"]
    assert len(reports) == 2 and all(rep["ok"] for rep in reports), reports
    waits = [x for x in lines if x["kind"] == "wait"]
    assert waits[-1]["ok"], waits
    assert any(x.get("event") == "power_cycle" for x in lines), "power-cycle not shown"


class _LaggingBody:
    """A body whose pin logs' readers have seen up to `seen` (monotonic s) so far."""

    on_event = None
    t0 = 0.0
    seen = 0.0

    def pin_logs_seen(self):
        return self.seen


def test_console_waits_for_a_lagging_pin_log_before_printing_later_events():
    # On a loaded machine one board's pin log can be read later than another's: the speaker's
    # audio line (at 5.015 s) must not go out before the LED's (at 5.000 s), which its reader
    # has not reported yet, however long the hold has been.
    import io

    body, out = _LaggingBody(), io.StringIO()
    c = Console(body, as_json=True, out=out)
    c.opened = True
    body.seen = 4.9
    c.hold(5.015, "audio", "speaker audio")
    c.flush(100.0)
    assert out.getvalue() == "", "printed past what the pin logs have been read up to"
    c.hold(5.0, "led", "LED on")
    body.seen = 6.0
    c.flush(100.0)
    kinds = [json.loads(x)["kind"] for x in out.getvalue().splitlines()]
    assert kinds == ["led", "audio"], kinds


def test_a_line_held_after_later_ones_were_printed_is_stamped_no_earlier():
    # A board's line read at 6.0 s whose reader thread reached the console only after the 6.1 s
    # lines went out (kept off the CPU past the hold on a loaded machine): it is shown at 6.1 s,
    # after them, so the stamps a newcomer reads never go back in time (seen once in a suite run
    # beside two others: "6.1, 6.0, 6.1").
    import io

    body, out = _LaggingBody(), io.StringIO()
    body.seen = float("inf")
    c = Console(body, as_json=True, out=out)
    c.opened = True
    c.hold(6.1, "led", c.stamp(6.1) + " LED on")
    c.flush(100.0)
    c.hold(6.0, "event", c.stamp(6.0) + " master: late line")
    c.hold(6.2, "led", c.stamp(6.2) + " LED off")
    c.flush(100.0)
    texts = [json.loads(x)["text"] for x in out.getvalue().splitlines()]
    assert texts == ["[   6.1s] LED on", "[   6.1s] master: late line", "[   6.2s] LED off"], texts


def test_console_output_waits_for_a_lagging_pin_log_to_reach_its_time():
    # A line printed now (a menu, a report) comes after every event that happened before it,
    # also one whose pin log has not been read up to now yet.
    import io
    import threading

    body, out = _LaggingBody(), io.StringIO()
    c = Console(body, as_json=True, out=out)
    c.opened = True
    c.hold(time.monotonic() - 0.05, "led", "LED on")
    threading.Timer(0.2, lambda: setattr(body, "seen", float("inf"))).start()
    c.emit("menu", "menu (6 abilities)")
    kinds = [json.loads(x)["kind"] for x in out.getvalue().splitlines()]
    assert kinds == ["led", "menu"], kinds


def test_console_reads_a_plan_spanning_lines():
    c = Console(_NoBody())
    src = [
        "menu\n",
        '{"heard_req": 0, "steps": [\n',
        '  {"task_id": "t1", "action": "led_on", "params": {}, "priority": 5, "depends_on": []}],\n',
        ' "can_execute": true, "missing": [], "response": ""}\n',
        "{not json\n",
        "\n",
        "status\n",
    ]
    out = list(c.read_lines(iter(src)))
    assert out[0] == "menu\n" and out[-1] == "status\n", out
    plan = json.loads(out[1])
    assert plan["steps"][0]["action"] == "led_on", out[1]
    assert out[2].startswith("{not json"), (
        "a broken plan ends at a blank line and is reported: %s" % out
    )


def test_piped_stdin_waits_for_the_organs_like_a_script(tmp_path):
    # `printf 'led_on\n' | tools/sim.py`: the first line used to reach a master whose menu was
    # still empty ("not on the menu (menu: empty)")
    r = subprocess.run(
        SIM + ["--json", "--out", str(tmp_path / "run")],
        input="led_on\n",
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    waits = [x for x in lines if x["kind"] == "wait"]
    assert waits and waits[0]["ok"], lines
    assert not [x for x in lines if x["kind"] == "refused"], lines
    reports = [x for x in lines if x["kind"] == "report"]
    assert reports and reports[0]["report"]["ok"], lines
    assert 1 in [x["value"] for x in lines if x["kind"] == "led"], lines
