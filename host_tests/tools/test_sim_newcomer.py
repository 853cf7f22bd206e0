# What a newcomer hits with tools/sim.py (issue 14): the console through --script, bad inputs, --heap.
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time

from support import AT_64K, ROOT, free_port

SIM = [sys.executable, os.path.join(ROOT, "tools", "sim.py")]

PLAN_LED_THEN_CHIME = (
    '{"heard_req": 0, "steps": [\n'
    '  {"task_id": "t1", "action": "led_off", "params": {}, "priority": 5, "depends_on": []},\n'
    '  {"task_id": "t2", "action": "chime", "params": {}, "priority": 5, "depends_on": ["t1"]}],\n'
    ' "can_execute": true, "missing": [], "response": ""}\n'
)
PLAN_TWO_CHIMES = json.dumps(
    {
        "heard_req": 0,
        "steps": [
            {"task_id": "a", "action": "chime", "params": {}, "priority": 5, "depends_on": []},
            {"task_id": "b", "action": "chime", "params": {}, "priority": 5, "depends_on": ["a"]},
        ],
        "can_execute": True,
        "missing": [],
        "response": "",
    }
)
SCRIPT = (
    "{bad json}\n"
    "led_on\n"
    "help\n"
    "flip led abc\n"
    "led_blink 3 200\n"
    "split led on\n"
    "split led off\n"
    "verbose on\n"
    "verbose off\n" + PLAN_LED_THEN_CHIME + PLAN_TWO_CHIMES + "\n"
    "power master\n"
    "led_off\n"
    "quit\n"
    "chime\n"
)


def _after(lines, text):
    """Index of the input line `text` in --json output."""
    for i, x in enumerate(lines):
        if x["kind"] == "input" and x.get("line", "").startswith(text):
            return i
    raise AssertionError("input %r never ran: %s" % (text, [x.get("line") for x in lines]))


def _upto_next_input(lines, i):
    out = []
    for x in lines[i + 1 :]:
        if x["kind"] == "input":
            break
        out.append(x)
    return out


def test_console_script_as_a_newcomer_types_it(tmp_path):
    f = tmp_path / "script.txt"
    f.write_text(SCRIPT)
    r = subprocess.run(
        SIM + ["--script", str(f), "--json", "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Traceback" not in r.stdout + r.stderr, r.stderr[-3000:]
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    texts = [x.get("text", "") for x in lines]

    # item 2: a bad "{" line is reported at once and swallows nothing; quit quits
    after_bad = _upto_next_input(lines, _after(lines, "{bad json}"))
    assert any(
        x["kind"] == "error" and "not a JSON plan" in x["text"] for x in after_bad
    ), after_bad
    led_on = _upto_next_input(lines, _after(lines, "led_on"))
    assert any(x["kind"] == "report" and x["report"]["ok"] for x in led_on), led_on
    helps = [x["text"] for x in lines if x["kind"] == "help"]
    assert helps and "pasted plan" in helps[0] and "braces" in helps[0], helps
    assert not any(
        x["kind"] == "input" and x.get("line") == "chime" for x in lines
    ), "quit did not quit: the line after it ran"

    # item 8: messages that say what to type
    flip = _upto_next_input(lines, _after(lines, "flip led abc"))
    assert any("'abc' is not a number" in x.get("text", "") for x in flip), flip
    blink = _upto_next_input(lines, _after(lines, "led_blink 3 200"))
    assert any("name=value" in x.get("text", "") for x in blink), blink
    split = _upto_next_input(lines, _after(lines, "split led on"))
    assert any(x.get("text") == "bus: split writes on the led cable: on" for x in split), split
    verbose = _upto_next_input(lines, _after(lines, "verbose on"))
    assert any(x["kind"] == "verbose" and x["verbose"] is True for x in verbose), verbose
    assert "heartbeats..." not in helps[0], "help promises heartbeat lines that never come"
    power = _upto_next_input(lines, _after(lines, "power master"))
    assert any(x["kind"] == "wait" and x["ok"] for x in power), power
    led_off = _upto_next_input(lines, _after(lines, "led_off"))
    assert any(x["kind"] == "report" and x["report"]["ok"] for x in led_off), (
        "after power master the next line failed: %s" % led_off
    )
    assert not any("urlopen error" in t for t in texts), [t for t in texts if "urlopen" in t]

    # item 9: the LED's line before the speaker's, as they happened
    plan = _upto_next_input(lines, _after(lines, '{"heard_req": 0, "steps": [ {"task_id": "t1"'))
    kinds = [x["kind"] for x in plan if x["kind"] in ("led", "audio", "report")]
    assert kinds[:3] == ["led", "audio", "report"], plan

    # item 7: back-to-back sound: a line for each piece, the second with its place in the take
    two = _upto_next_input(lines, _after(lines, PLAN_TWO_CHIMES[:40]))
    audio = [x for x in two if x["kind"] == "audio"]
    assert len(audio) == 2, two
    if audio[0]["wav"] == audio[1]["wav"]:
        assert audio[1]["offset_s"] > 0.3, audio
    # events come out in time order
    stamps = [float(m.group(1)) for t in texts for m in [re.match(r"\[\s*([\d.]+)s\]", t)] if m]
    assert stamps == sorted(stamps), "lines out of time order: %s" % stamps


def test_missing_plan_or_script_is_one_line_before_anything_boots(tmp_path):
    for flag in ("--plan", "--script"):
        t = time.monotonic()
        r = subprocess.run(
            SIM + [flag, str(tmp_path / "missing.json"), "--out", str(tmp_path / "run")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 2, (r.returncode, r.stderr)
        assert r.stderr.strip().count("\n") == 0 and "missing.json" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and r.stdout == "", r.stdout + r.stderr
        assert not (tmp_path / "run").exists(), "booted before checking its inputs"
        assert time.monotonic() - t < 20


@AT_64K
def test_heap_64k_boots_and_runs_a_plan(tmp_path):
    # Issue 14 item 3: at 64 KB of data per board the whole body boots and runs the tour's kind
    # of plan (LED, then sound); a board that cannot start is one line (the test below).
    plan = tmp_path / "plan.json"
    plan.write_text(PLAN_LED_THEN_CHIME)
    r = subprocess.run(
        SIM + ["--heap", "64k", "--plan", str(plan), "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in r.stdout + r.stderr, r.stderr[-2000:]
    assert "URLError" not in r.stderr and "Connection refused" not in r.stderr, r.stderr[-2000:]
    started = [ln for ln in r.stderr.splitlines() if "process started" in ln]
    assert len(started) == 3 and all("64.0 KB for data" in ln for ln in started), started
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert report["ok"] and [s["status"] for s in report["steps"]] == ["done", "done"], report


def test_a_board_that_dies_at_boot_is_one_line_naming_it(tmp_path):
    # A master whose main.py cannot start (the boards folder swapped, as tests may)
    plan = tmp_path / "plan.json"
    plan.write_text(PLAN_LED_THEN_CHIME)
    boards = tmp_path / "boards"
    shutil.copytree(os.path.join(ROOT, "boards"), boards)
    (boards / "c6_master" / "main.py").write_text("import frobnicate\n")
    t = time.monotonic()
    r = subprocess.run(
        SIM + ["--plan", str(plan), "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, ORGANBUS_SIM_BOARDS=str(boards)),
    )
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("sim.py: error:")]
    assert r.returncode == 1 and len(errors) == 1, r.stderr[-2000:]
    assert "the master board exited with code 1" in errors[0], errors
    assert "frobnicate" in errors[0], errors
    assert "URLError" not in r.stderr and time.monotonic() - t < 20, r.stderr[-2000:]


def test_an_address_in_use_is_one_line_naming_it(tmp_path):
    port = free_port()
    held = socket.socket()
    held.bind(("127.0.0.1", port))
    held.listen(1)
    try:
        for args in (
            ["--uart", "1=listen:127.0.0.1:%d" % port],
            ["--uart", "1=connect:127.0.0.1:%d" % free_port(), "--http", "127.0.0.1:%d" % port],
        ):
            r = subprocess.run(
                SIM + ["board", "master"] + args + ["--out", str(tmp_path / "b")],
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert r.returncode == 2, (r.returncode, r.stderr)
            assert "Traceback" not in r.stderr, r.stderr
            line = r.stderr.strip()
            assert "\n" not in line and "127.0.0.1:%d is in use" % port in line, line
    finally:
        held.close()


def test_console_link_says_why_it_stopped_at_end_of_input(tmp_path):
    r = subprocess.run(
        SIM
        + ["board", "master", "--uart", "1=connect:127.0.0.1:%d" % free_port()]
        + ["--console", "link", "--out", str(tmp_path / "b")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    events = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    stops = [e for e in events if e.get("event") == "stop"]
    assert stops and "end of file" in stops[0]["why"], r.stdout + r.stderr


def test_readme_one_board_alone_block_runs_in_order_without_a_clash():
    text = open(os.path.join(ROOT, "README.md")).read()
    block = text.split("## One board alone", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    for doc, body in (("README.md", block), ("docs/sim.md", _sim_md_block())):
        listens = re.findall(r"listen:(127\.0\.0\.1:\d+)", body)
        assert len(listens) == len(set(listens)), "%s: two boards listen on one address: %s" % (
            doc,
            listens,
        )
        for addr in re.findall(r"connect:(127\.0\.0\.1:\d+)", body.split("sim.py --")[0]):
            assert addr in listens, "%s: nothing listens on %s" % (doc, addr)
    boards = [ln.split() for ln in block.splitlines() if "sim.py board" in ln]
    in_sim_md = [ln.split() for ln in _sim_md_block().splitlines() if "sim.py board" in ln]
    assert (
        len(boards) == 3 and boards == in_sim_md
    ), "README and docs/sim.md show different commands for one board alone"


def _sim_md_block():
    text = open(os.path.join(ROOT, "docs", "sim.md")).read()
    return text.split("## One board alone", 1)[1].split("```sh", 1)[1].split("```", 1)[0]


def test_bench_help_and_a_bad_area_are_argparse_answers():
    bench = [sys.executable, os.path.join(ROOT, "tools", "bench.py")]
    r = subprocess.run(bench + ["--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "usage: bench.py" in r.stdout, r.stdout + r.stderr
    assert "all" in r.stdout and "core" in r.stdout, r.stdout
    r = subprocess.run(bench + ["nosuch"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "invalid choice: 'nosuch'" in r.stderr, r.stdout + r.stderr
