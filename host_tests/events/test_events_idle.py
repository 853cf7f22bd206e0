# The local loop on the sans-IO master (fake clock, fake organs): runs after quiet, gives way to a link's plan at once, refused when it does not fit or speaks.
from organbus import command, frame

import master_rig as mf
from master.bus.idle import Idle

UNIX_PORT = True


def blink(count=2, period_ms=500):
    return {"heard_req": 0, "can_execute": True, "missing": [], "response": "",
            "steps": [{"task_id": "idle1", "action": "led_blink", "params": {"count": count,
                       "period_ms": period_ms}, "priority": 1, "depends_on": []}]}  # fmt: skip


def led_on():
    return {"heard_req": 0, "can_execute": True, "missing": [], "response": "",
            "steps": [{"task_id": "on", "action": "led_on", "params": {}, "priority": 5,
                       "depends_on": []}]}  # fmt: skip


def rig_with_idle(plan, after_ms=5000, event_ms=3000):
    rig = mf.standard_rig()
    rig.organs[0].event_ms = event_ms
    lines = []
    idle = Idle(rig.body, plan, after_ms, lambda e, pairs: lines.append((e, dict(pairs))))
    rig.body.idle = idle
    rig.advance(10)  # its first check is at the first timer tick
    return rig, idle, lines


def names(rig, port=0):
    return [c[1] for c in rig.organs[port].commands]


def test_runs_after_quiet_and_again_after_its_own_end():
    rig, idle, lines = rig_with_idle(blink())
    assert lines == [("idle_ready", {"steps": 1, "after_s": 5})], lines
    rig.advance(4780)
    assert names(rig) == [], "too early"
    rig.advance(300)
    assert names(rig) == ["led_blink"], names(rig)
    assert idle.stats()["state"] == "running"
    rig.advance(3200)  # the blink's EVENT: the idle plan ended, the quiet time starts again
    assert idle.run is None and idle.started == 1
    rig.advance(4700)
    assert names(rig) == ["led_blink"]
    rig.advance(400)
    assert names(rig) == ["led_blink", "led_blink"], names(rig)


def test_a_link_plan_preempts_it_within_the_same_tick():
    rig, idle, lines = rig_with_idle(blink(count=10))
    rig.advance(5100)
    assert names(rig) == ["led_blink"] and idle.run is not None
    t_link = rig.now
    done = []
    kind, run = rig.body.submit(led_on(), None, done.append)
    st = run.steps[0]
    assert st.status == "sent" and st.t_sent == t_link, "the COMMAND left at the submit itself"
    assert rig.wire[0][-1][2] == frame.COMMAND
    rig.advance(10)
    assert names(rig) == ["led_blink", "led_on"], names(rig)
    # the LED organ ends the blink it was doing (EVENT status 1) and then takes led_on
    rig.feed(0, frame.encode(frame.EVENT, command.encode_event("led_blink", 1)))
    rig.advance(20)
    assert done and done[0].report()["ok"], "the link's plan ran"
    rep = [e for e in rig.body.recent.items() if e["event"] == "plan"]
    idle_rep = [e for e in rep if e["steps"][0]["task_id"] == "idle1"][0]
    assert idle_rep["steps"][0]["status"] == "stopped", idle_rep
    assert idle.preempted == 1 and idle.run is None
    # quiet again from the link's plan: the idle plan waits idle_after_s once more
    rig.advance(4800)
    assert names(rig) == ["led_blink", "led_on"]
    rig.advance(400)
    assert names(rig)[-1] == "led_blink"


def test_no_start_while_a_link_plan_runs():
    rig, idle, lines = rig_with_idle(blink(), after_ms=2000, event_ms=4000)
    rig.advance(100)
    rig.body.submit(blink(count=5))  # a link's long blink (4 s to its EVENT)
    rig.advance(3000)
    assert names(rig) == ["led_blink"], "only the link's blink"
    rig.advance(1200)  # its EVENT about 4 s after its COMMAND_RESP; quiet 2 s after that
    assert rig.sched.runs == [], "the link's plan ended"
    rig.advance(1650)
    assert names(rig) == ["led_blink"]
    rig.advance(300)
    assert names(rig) == ["led_blink", "led_blink"]


def test_refused_when_its_ability_leaves_the_menu_and_ready_when_back():
    rig, idle, lines = rig_with_idle(blink(), after_ms=60000)
    rig.organs[0].alive = False
    rig.advance(16000)
    assert lines[-1][0] == "idle_refused", lines
    assert "led_blink" in lines[-1][1]["problems"][0], lines[-1]
    assert idle.stats()["state"] == "refused" and idle.plan is None
    rig.organs[0].alive = True
    rig.advance(3000)
    assert lines[-1] == ("idle_ready", {"steps": 1, "after_s": 60}), lines


def test_a_speaking_idle_plan_is_refused_whole():
    p = blink()
    p["steps"].append({"task_id": "say", "action": "speak", "params": {"text": "hello"},
                       "priority": 1, "depends_on": []})  # fmt: skip
    rig, idle, lines = rig_with_idle(p, after_ms=1000)
    rig.advance(5000)
    assert names(rig) == [] and names(rig, 1) == [], "nothing of it ran"
    assert lines and lines[0][0] == "idle_refused", lines
    assert lines[0][1]["problems"] == [
        "steps[1].action: speak in an idle plan: speak text is written by the model, "
        "never by the master"
    ], lines
    assert len(lines) == 1, "said once, not at every menu change"


def test_a_bad_idle_after_is_refused():
    rig = mf.standard_rig()
    for bad in (0, 999, "30"):
        try:
            Idle(rig.body, blink(), bad)
            raise AssertionError("took idle_after %r" % (bad,))
        except ValueError as e:
            assert "idle_after_s" in str(e)
