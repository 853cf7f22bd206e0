# Scheduler semantics with fake organs on a fake clock: order, priority, groups, releases, timeouts, skips.
from organbus import frame
import master_rig as mf
import plan_corpus as pc

UNIX_PORT = True


def _cmds(rig, port):
    return [c[1] for c in rig.organs[port].commands]


def _statuses(report):
    return [s["status"] for s in report["steps"]]


def test_section8_plan_runs_in_dependency_order():
    rig = mf.standard_rig()
    status, report = mf.run_plan(rig, pc.text(pc.SECTION8))
    assert status == 200, "status %r %r" % (status, report)
    assert report["ok"] is True, "report %r" % report
    assert _statuses(report) == ["done", "done"], report
    resp = rig.trace.index(("o2m", 0, frame.COMMAND_RESP))
    speak = rig.trace.index(("m2o", 1, frame.COMMAND))
    assert speak > resp, "speak sent before led_on was answered: %r" % rig.trace
    assert rig.organs[1].commands[0][3] == "Light is on.", rig.organs[1].commands
    assert [s["task_id"] for s in report["steps"]] == ["t1", "t2"], report


def test_report_shape():
    rig = mf.standard_rig()
    status, report = mf.run_plan(rig, pc.text(pc.SECTION8))
    assert sorted(report) == ["notes", "ok", "steps"], sorted(report)
    for s in report["steps"]:
        assert sorted(s) == ["action", "ms", "status", "task_id"], s
        assert isinstance(s["ms"], int) and s["ms"] >= 0, s


def test_priority_orders_ready_steps():
    rig = mf.standard_rig()
    p = pc.plan(
        [
            pc.step("low", "led_on", None, 1),
            pc.step("high", "led_off", None, 9),
            pc.step("mid", "led_blink", {"count": 2, "period_ms": 100}, 5),
        ]
    )
    status, report = mf.run_plan(rig, pc.text(p))
    assert _cmds(rig, 0) == ["led_off", "led_blink", "led_on"], _cmds(rig, 0)
    assert report["ok"], report


def test_equal_priority_keeps_plan_order():
    rig = mf.standard_rig()
    p = pc.plan([pc.step("a", "led_on"), pc.step("b", "led_off"), pc.step("c", "led_on")])
    mf.run_plan(rig, pc.text(p))
    assert _cmds(rig, 0) == ["led_on", "led_off", "led_on"], _cmds(rig, 0)


def test_group_held_until_event():
    rig = mf.standard_rig()
    rig.organs[0].event_ms = 700
    p = pc.plan(
        [
            pc.step("blink", "led_blink", {"count": 3, "period_ms": 100}, 9),
            pc.step("on", "led_on", None, 1),
            pc.step("chime", "chime", None, 1),
        ]
    )
    status, report = mf.run_plan(rig, pc.text(p))
    led = rig.organs[0].commands
    assert [c[1] for c in led] == ["led_blink", "led_on"], led
    gap = led[1][0] - led[0][0]
    assert 700 <= gap <= 800, "led_on went %d ms after led_blink (EVENT at 700)" % gap
    t_chime = rig.organs[1].commands[0][0]
    assert t_chime - led[0][0] < 100, "chime (other group) waited for the led group"
    assert _statuses(report) == ["done", "done", "done"], report


def test_max_duration_release_without_event():
    rig = mf.standard_rig()
    rig.organs[1].event_ms = None  # the speaker never reports completion
    p = pc.plan([pc.step("c", "chime"), pc.step("d", "chime", None, 5, ["c"])])
    status, report = mf.run_plan(rig, pc.text(p))
    cmds = rig.organs[1].commands
    gap = cmds[1][0] - cmds[0][0]
    assert 2000 <= gap <= 2100, "second chime %d ms after the first (max_duration_ms 2000)" % gap
    assert _statuses(report) == ["started", "started"], report
    assert report["ok"] is True, "started counts as finished: %r" % report
    assert report["notes"] == [
        "steps[0] (c): no EVENT within max_duration_ms 2000; counted as finished",
        "steps[1] (d): no EVENT within max_duration_ms 2000; counted as finished",
    ], report["notes"]


def test_event_before_max_duration_is_done():
    rig = mf.standard_rig()
    rig.organs[1].event_ms = 300
    status, report = mf.run_plan(rig, pc.text(pc.plan([pc.step("c", "chime")])))
    assert _statuses(report) == ["done"], report
    assert 300 <= report["steps"][0]["ms"] <= 350, report


def test_event_status_1_is_stopped_and_skips():
    rig = mf.standard_rig()
    rig.organs[1].event_status = 1
    p = pc.plan([pc.step("c", "chime"), pc.step("on", "led_on", None, 5, ["c"])])
    status, report = mf.run_plan(rig, pc.text(p))
    assert _statuses(report) == ["stopped", "skipped"], report
    assert report["steps"][1]["reason"] == "depends on c which failed", report
    assert report["ok"] is False, report
    assert _cmds(rig, 0) == [], "skipped step was sent"


def test_timeout_after_one_second_and_skip():
    rig = mf.standard_rig()
    rig.organs[0].resp = None  # the LED organ never answers
    p = pc.plan(
        [
            pc.step("a", "led_on", None, 9),
            pc.step("b", "speak", {"text": "on"}, 5, ["a"]),
            pc.step("c", "chime", None, 5, ["b"]),
            pc.step("d", "led_off", None, 1),
        ]
    )
    status, report = mf.run_plan(rig, pc.text(p))
    assert _statuses(report) == ["timeout", "skipped", "skipped", "timeout"], report
    assert report["steps"][0]["reason"] == "no COMMAND_RESP from LED_001 within 1000 ms", report
    assert report["steps"][1]["reason"] == "depends on a which failed", report
    assert report["steps"][2]["reason"] == "depends on b which was skipped", report
    led = rig.organs[0].commands
    gap = led[1][0] - led[0][0]
    assert 1250 <= gap <= 1300, "second COMMAND %d ms after the first (1 s timeout + settle)" % gap
    assert 1000 <= report["steps"][0]["ms"] <= 1050, report
    assert rig.organs[1].commands == [], "skipped steps reached the speaker"


def test_refused_step_skips_dependents():
    rig = mf.standard_rig()
    rig.organs[0].resp = 1
    p = pc.plan(
        [pc.step("a", "led_on"), pc.step("b", "chime", None, 5, ["a"]), pc.step("c", "chime")]
    )
    status, report = mf.run_plan(rig, pc.text(p))
    assert _statuses(report) == ["refused", "skipped", "done"], report
    assert "LED_001 answered 1" in report["steps"][0]["reason"], report


def test_one_command_outstanding_per_link():
    rig = mf.Rig(start=False)
    g = rig.attach(0, mf.FakeOrgan(mf.gadget(), resp=None))
    rig.body.start(rig.now)
    rig.advance(100)
    p = pc.plan([pc.step("a", "fan_on", None, 9), pc.step("b", "beep", None, 5)])
    done = []
    mf.submit(rig, pc.text(p), None, done.append)
    rig.advance(500)
    assert [c[1] for c in g.commands] == ["fan_on"], "two COMMANDs in flight: %r" % g.commands
    g.resp = 0
    rig.advance(850)
    assert [c[1] for c in g.commands] == ["fan_on", "beep"], g.commands
    assert 1250 <= g.commands[1][0] - g.commands[0][0] <= 1300, g.commands
    rig.advance(100)
    assert done and [s["status"] for s in done[0].report()["steps"]] == ["timeout", "done"]


def test_params_in_descriptor_order_as_floats():
    rig = mf.Rig(start=False)
    g = rig.attach(0, mf.FakeOrgan(mf.gadget()))
    rig.body.start(rig.now)
    rig.advance(100)
    p = pc.plan([pc.step("a", "arm_move", {"fast": True, "angle": -12.5})])
    status, report = mf.run_plan(rig, pc.text(p))
    assert g.commands[0][1] == "arm_move" and g.commands[0][2] == [-12.5, 1.0], g.commands


def test_out_of_range_forwarded_as_given():
    rig = mf.standard_rig()
    raw = pc.NOTED[0][0]
    status, report = mf.run_plan(rig, raw)
    assert rig.organs[0].commands[0][2] == [50.0, 10.0], rig.organs[0].commands
    assert report["notes"] == pc.NOTED[0][1], report["notes"]


def test_text_clamped_on_the_wire():
    rig = mf.standard_rig()
    p = pc.plan([pc.step("s", "speak", {"text": "é" * 150})])
    status, report = mf.run_plan(rig, pc.text(p))
    t = rig.organs[1].commands[0][3]
    assert t == "é" * 120 and len(t.encode()) == 240, "text on the wire: %d bytes" % len(t.encode())


def test_empty_plan_is_silence():
    rig = mf.standard_rig()
    status, report = mf.run_plan(rig, pc.text(pc.plan([])))
    assert status == 200 and report == {"ok": True, "steps": [], "notes": []}, report
    assert rig.commands_sent() == 0, "silence sent a COMMAND"


def test_two_plans_share_groups():
    rig = mf.standard_rig()
    rig.organs[0].event_ms = 500
    done = []
    mf.submit(
        rig,
        pc.text(pc.plan([pc.step("a", "led_blink", {"count": 2, "period_ms": 100})])),
        None,
        done.append,
    )
    mf.submit(rig, pc.text(pc.plan([pc.step("b", "led_on")])), None, done.append)
    rig.advance(1000)
    led = rig.organs[0].commands
    assert [c[1] for c in led] == ["led_blink", "led_on"], led
    assert led[1][0] - led[0][0] >= 500, "second plan's led_on overlapped the blink"
    assert len(done) == 2, "both plans finished"


def test_on_accept_callbacks():
    rig = mf.standard_rig()
    rig.organs[0].resp = 1
    seen = []
    p = pc.plan(
        [pc.step("a", "led_on"), pc.step("b", "chime", None, 5, ["a"]), pc.step("c", "chime")]
    )
    done = []
    mf.submit(rig, pc.text(p), lambda t, s: seen.append((t, s)), done.append)
    rig.advance(500)
    assert sorted(seen) == [("a", 1), ("b", "skipped"), ("c", 0)], seen


def test_offline_fails_running_step():
    rig = mf.standard_rig()
    rig.organs[0].event_ms = None
    p = pc.plan(
        [
            pc.step("a", "led_blink", {"count": 20, "period_ms": 2000}),
            pc.step("b", "chime", None, 5, ["a"]),
        ]
    )
    done = []
    mf.submit(rig, pc.text(p), None, done.append)
    rig.advance(1000)
    rig.organs[0].alive = False  # cable pulled mid-blink
    rig.advance(16000)
    assert done, "plan did not finish after the organ went offline"
    r = done[0].report()
    assert _statuses(r) == ["offline", "skipped"], r
    assert r["steps"][0]["reason"] == "LED_001 went offline", r


def test_pending_step_fails_offline():
    rig = mf.standard_rig()
    rig.organs[1].event_ms = None
    p = pc.plan([pc.step("s", "speak", {"text": "hi"}), pc.step("on", "led_on", None, 5, ["s"])])
    status, run = mf.submit(rig, pc.text(p))
    rig.advance(100)
    rig.organs[0].alive = False
    rig.advance(14800)
    assert run.steps[1].status == "pending", "failed before the organ went offline"
    rig.advance(300)
    assert run.steps[1].status == "offline", "waiting step is %s" % run.steps[1].status
    assert run.steps[1].reason == "no online organ offers led_on", run.steps[1].reason
    rig.advance(16000)
    r = run.report()
    assert _statuses(r) == ["started", "offline"], r


def test_late_resp_not_taken_for_the_next_command():
    rig = mf.standard_rig()
    led = rig.organs[0]
    led.resp = None
    p = pc.plan([pc.step("a", "led_on", None, 9), pc.step("b", "led_off", None, 1)])
    status, run = mf.submit(rig, pc.text(p))
    rig.advance(1100)  # a timed out at 1000 ms
    assert run.steps[0].status == "timeout", run.steps[0].status
    rig.feed(0, frame.RESP_OK_FRAME)  # a's answer, 1.1 s late
    assert run.steps[1].status == "pending", "b was sent inside the settle window"
    led.resp = 0
    rig.advance(600)
    r = run.report()
    assert [s["status"] for s in r["steps"]] == ["timeout", "done"], r
    assert len(led.commands) == 2, led.commands
    assert r["notes"] == [
        "steps[0] (a): COMMAND_RESP 0 came 1100 ms after the COMMAND, too late"
    ], r
    assert rig.sched.stray_resps == 1, rig.sched.stray_resps


def test_beyond_f32_travels_as_inf():
    rig = mf.standard_rig()
    # 10**39: the longest number a body may hold is 40 characters (jsonread.MAX_NUMBER_LEN)
    raw = pc.text(pc.plan([pc.step("a", "led_blink", {"count": 10**39, "period_ms": -1e39})]))
    status, report = mf.run_plan(rig, raw)
    assert status == 200 and report["ok"], report
    values = rig.organs[0].commands[0][2]
    assert values == [float("inf"), float("-inf")], "on the wire: %r" % values
    assert len(report["notes"]) == 2 and "travels as inf" in report["notes"][0], report["notes"]
