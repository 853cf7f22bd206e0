# The body event hub (master/bus/hub.py): what the master publishes, subscriber isolation, the bounded Feed (both interpreters).
import master_rig as mf
import plan_corpus as pc

from master.bus.hub import EVENTS, Feed, Hub, describe

UNIX_PORT = True


class _Rec:
    def __init__(self, hub):
        self.seen = []
        hub.subscribe(self.on)

    def on(self, event, port, data):
        assert event in EVENTS, "unknown hub event %r" % event
        self.seen.append((event, port, describe(event, port, data)))

    def names(self):
        return [e[0] for e in self.seen]


def _pairs(entry):
    d = {}
    for k, v in entry[2]:
        d[k] = v
    return d


def test_registration_offline_and_back_on_the_hub():
    rig = mf.Rig(start=False)
    rec = _Rec(rig.hub)
    rig.attach(0, mf.FakeOrgan(mf.led()))
    rig.body.start(rig.now)
    rig.advance(100)
    assert rec.names() == ["registered", "menu"], rec.names()
    reg = _pairs(rec.seen[0])
    assert reg["port"] == 0 and reg["module_id"] == "LED_001" and reg["again"] is False, reg
    menu = _pairs(rec.seen[1])
    assert menu["added"] == ["led_on", "led_off", "led_blink"] and menu["removed"] == [], menu
    rig.organs[0].alive = False
    rig.advance(15100, 50)
    assert rec.names()[2:4] == ["offline", "menu"], rec.names()
    assert _pairs(rec.seen[3])["removed"] == ["led_on", "led_off", "led_blink"], rec.seen[3]
    rig.organs[0].alive = True
    rig.advance(3000)
    back = [e for e in rec.seen[4:] if e[0] == "registered"]
    assert back and _pairs(back[0])["again"] is True, "an organ back is registered again: %r" % (
        rec.seen[4:],
    )


def test_refusal_and_duplicate_on_the_hub():
    rig = mf.Rig(start=False)
    rec = _Rec(rig.hub)
    rig.attach(0, mf.FakeOrgan(mf.led(), raw=b"\x01\x02"))
    rig.attach(1, mf.FakeOrgan(mf.led("LED_002")))
    rig.body.start(rig.now)
    rig.advance(100)
    refused = [e for e in rec.seen if e[0] == "refused"]
    assert len(refused) == 1 and refused[0][1] == 0 and _pairs(refused[0])["reason"], rec.seen
    rig2 = mf.Rig(start=False)
    rec2 = _Rec(rig2.hub)
    rig2.attach(0, mf.FakeOrgan(mf.led()))
    rig2.attach(1, mf.FakeOrgan(mf.led("LED_002")))
    rig2.body.start(rig2.now)
    rig2.advance(100)
    dups = [_pairs(e) for e in rec2.seen if e[0] == "duplicate"]
    assert [d["name"] for d in dups] == ["led_on", "led_off", "led_blink"], dups
    assert all(d["module_id"] == "LED_002" for d in dups), dups


def test_steps_events_and_the_plan_report_on_the_hub():
    rig = mf.standard_rig()
    rec = _Rec(rig.hub)
    p = pc.plan([pc.step("a", "led_on"), pc.step("b", "chime", depends_on=["a"])])
    status, report = mf.run_plan(rig, pc.text(p))
    assert status == 200 and report["ok"], report
    steps = [_pairs(e) for e in rec.seen if e[0] == "step"]
    got = [(s["task_id"], s["status"]) for s in steps]
    assert got == [
        ("a", "sent"),
        ("a", "done"),
        ("b", "sent"),
        ("b", "running"),
        ("b", "done"),
    ], got
    assert all(s["plan"] == steps[0]["plan"] for s in steps), steps
    events = [_pairs(e) for e in rec.seen if e[0] == "event"]
    assert events == [{"port": 1, "name": "chime", "status": 0}], events
    plans = [_pairs(e) for e in rec.seen if e[0] == "plan"]
    assert len(plans) == 1 and plans[0]["ok"] is True and len(plans[0]["steps"]) == 2, plans
    assert rec.names()[-1] == "plan", "the report is published last: %r" % rec.names()


def test_timeout_and_rejection_on_the_hub():
    rig = mf.standard_rig()
    rig.organs[0].resp = None  # silent
    rec = _Rec(rig.hub)
    status, report = mf.run_plan(rig, pc.text(pc.plan([pc.step("a", "led_on")])))
    ends = [_pairs(e) for e in rec.seen if e[0] == "step" and _pairs(e)["status"] != "sent"]
    assert [e["status"] for e in ends] == ["timeout"] and "within 1000 ms" in ends[0][
        "reason"
    ], ends
    status, obj = mf.submit(rig, pc.text(pc.plan([pc.step("a", "fly")])))
    assert status == 422, obj
    rej = [_pairs(e) for e in rec.seen if e[0] == "rejected"]
    assert rej and rej[0]["problems"] == obj["problems"], rej
    st = rig.body.status()["plans"]
    assert st["refused"] == 1 and st["steps"]["timeout"] == 1, st


def test_decoder_errors_on_the_hub():
    rig = mf.standard_rig()
    rec = _Rec(rig.hub)
    junk = _pairs(("", 0, describe("decoder", 0, rig.body.port(0).decoder)))["junk"]
    rig.feed(0, b"zzz")  # line noise between frames
    rig.advance(30)
    dec = [e for e in rec.seen if e[0] == "decoder"]
    assert len(dec) == 1 and dec[0][1] == 0 and _pairs(dec[0])["junk"] == junk + 3, rec.seen
    rig.advance(100)
    assert len([e for e in rec.seen if e[0] == "decoder"]) == 1, "published again unchanged"


def test_a_raising_subscriber_never_reaches_the_bus():
    rig = mf.Rig(start=False)

    def bad(event, port, data):
        raise RuntimeError("subscriber bug")

    rig.hub.subscribe(bad)
    rec = _Rec(rig.hub)
    rig.attach(0, mf.FakeOrgan(mf.led()))
    rig.body.start(rig.now)
    rig.advance(100)
    assert rig.body.registry.slot(0).online, "the registration went on"
    assert rec.names() == ["registered", "menu"], "later subscribers still heard: %r" % rec.names()
    assert rig.hub.errors == 2 and "subscriber bug" in rig.hub.last_error, rig.hub.errors
    assert rig.body.status()["hub"] == {"subscribers": 5, "errors": 2}, rig.body.status()["hub"]
    assert rig.event_names() == ["registered"], "the event log still wrote its line"


def test_nobody_listening_and_subscriber_limit():
    hub = Hub(limit=2)
    hub.publish("menu", None, (1, [], []))  # nobody: nothing happens
    a = hub.subscribe(lambda e, p, d: None)
    hub.subscribe(lambda e, p, d: None)
    try:
        hub.subscribe(lambda e, p, d: None)
        raise AssertionError("a third subscriber was taken")
    except ValueError as e:
        assert "2 subscribers" in str(e), e
    hub.unsubscribe(a)
    assert len(hub.subs) == 1, hub.subs


def test_feed_keeps_the_newest_and_counts_drops():
    hub = Hub()
    feed = Feed(hub, size=3, events=("menu",))
    for v in range(5):
        hub.publish("menu", None, (v, ["x%d" % v], []))
    hub.publish("refused", 0, "not asked for")
    assert feed.dropped == 2 and feed.n == 3, (feed.dropped, feed.n)
    got = [feed.get() for _ in range(4)]
    assert [g[1][0][1] for g in got[:3]] == [2, 3, 4], got
    assert got[3] is None and not feed.ready.is_set(), got
    feed.close()
    hub.publish("menu", None, (9, [], []))
    assert feed.n == 0 and hub.subs == [], "a closed feed still listens"


def test_a_subscriber_hears_only_what_it_asked_for():
    rig = mf.standard_rig()
    heard = []
    assert rig.hub.wants["step"] == 0, "nobody hears steps in a bare rig: %r" % rig.hub.wants
    rig.hub.subscribe(lambda e, p, d: heard.append(e), ("plan",))
    status, report = mf.run_plan(rig, pc.text(pc.plan([pc.step("a", "led_on")])))
    assert heard == ["plan"], heard
    try:
        rig.hub.subscribe(lambda e, p, d: None, ("steps",))
        raise AssertionError("an unknown event name was taken")
    except ValueError as e:
        assert "no event 'steps'" in str(e), e
    rec = _Rec(rig.hub)
    assert rig.hub.wants["step"] == 1, rig.hub.wants
    rig.hub.unsubscribe(rec.on)
    assert rig.hub.wants["step"] == 0, rig.hub.wants


def test_organ_events_are_counted_by_the_hub_with_or_without_subscribers():
    from master.bus.hub import Hub

    hub = Hub()
    hub.publish("event", 0, ("led_blink", 0))
    hub.publish("step", 0, None)
    assert hub.organ_events == 1 and hub.ring is None, hub.organ_events
    heard = []
    hub.subscribe(lambda e, p, d: heard.append((e, p, d)), ("event",))
    hub.publish("event", 1, ("speak", 1))
    assert hub.organ_events == 2 and heard == [("event", 1, ("speak", 1))], heard
