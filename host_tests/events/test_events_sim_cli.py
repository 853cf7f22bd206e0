# tools/sim.py --events (the /events stream as JSON lines on stdout), --idle FILE, and the console's hub lines.
import json
import os
import subprocess
import sys

from support import ROOT

SIM = [sys.executable, os.path.join(ROOT, "tools", "sim.py")]


def test_events_and_idle_from_the_cli(tmp_path):
    idle = tmp_path / "idle.json"
    with open(os.path.join(ROOT, "boards", "c6_master", "idle.example.json")) as f:
        cfg = json.load(f)
    cfg["idle_after_s"] = 2
    idle.write_text(json.dumps(cfg))
    script = tmp_path / "script.txt"
    script.write_text("led_blink count=2 period_ms=100\nsleep 4\nled_on\n")
    r = subprocess.run(
        SIM + ["--events", "--idle", str(idle), "--script", str(script), "--out",
               str(tmp_path / "run")],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    items = [json.loads(x) for x in r.stdout.splitlines()]
    kinds = [x["event"] for x in items]
    assert "registered" in kinds and "menu" in kinds, kinds
    steps = [(x["task_id"], x["status"]) for x in items if x["event"] == "step"]
    assert steps[:3] == [("t1", "sent"), ("t1", "running"), ("t1", "done")], steps
    assert ("idle_blink", "sent") in steps, "the idle plan ran after 2 s of quiet: %s" % steps
    # the console's led_on pre-empts the idle blink: the LED ends it (EVENT status 1)
    assert steps[-3] == ("t1", "sent"), steps
    assert sorted(steps[-2:]) == [("idle_blink", "stopped"), ("t1", "done")], steps
    assert all("t_ms" in x for x in items), items[:3]
    # the console (stderr with --events) printed the hub's steps as they happened
    assert "plan 1: led_blink (t1) sent on UART0" in r.stderr, r.stderr
    assert "plan 1 finished: ok" in r.stderr, r.stderr


def test_a_bad_idle_file_is_one_line_and_status_2(tmp_path):
    bad = tmp_path / "idle.json"
    bad.write_text('{"idle": [1]}')
    r = subprocess.run(SIM + ["--idle", str(bad)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip() == (
        'sim.py: error: --idle %s: expected "idle": a plan object (or the plan itself)' % bad
    ), r.stderr
    r = subprocess.run(
        SIM + ["--idle", str(tmp_path / "nope.json")], capture_output=True, text=True, timeout=30
    )
    assert r.returncode == 2 and "No such file" in r.stderr, r.stderr
