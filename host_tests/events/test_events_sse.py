# GET /events on the master's HTTP server (CPython, live loop): order of items, lost counts, limits, auth, the /status ring.
import time

from events_rig import LiveRig, SseClient, http


def step(tid, action, deps=(), **params):
    return {"task_id": tid, "action": action, "params": params, "priority": 5,
            "depends_on": list(deps)}  # fmt: skip


def plan(*steps):
    return {"heard_req": 0, "steps": list(steps), "can_execute": True, "missing": [],
            "response": ""}  # fmt: skip


def chain(n, action="led_on"):
    return plan(*[step("s%d" % i, action, ["s%d" % (i - 1)] if i else []) for i in range(n)])


def test_offline_back_dispatched_done_in_order():
    live = LiveRig(speed=4).start()
    try:
        c = SseClient(live.port)
        assert c.status == 200 and c.headers["content-type"] == "text/event-stream", c.headers
        led = live.rig.organs[0]
        live.call(lambda: setattr(led, "alive", False))
        got = c.until(lambda e, d: e == "offline", 30)
        off = got[-1][1]
        assert off["port"] == 0 and off["module_id"] == "LED_001" and "t_ms" in off, off
        live.call(lambda: setattr(led, "alive", True))
        got = c.until(lambda e, d: e == "registered", 15)
        back = got[-1][1]
        assert back["module_id"] == "LED_001" and back["again"] is True, back
        assert "led_blink" in back["capabilities"], back
        status, rep = live.plan(plan(step("b", "led_blink", count=1, period_ms=100)))
        assert status == 200 and rep["ok"], rep
        got = c.until(lambda e, d: e == "plan", 10)
        steps = [(d["status"], d["task_id"], d["action"]) for e, d in got if e == "step"]
        assert steps[0] == ("sent", "b", "led_blink"), got
        assert ("done", "b", "led_blink") in steps, got
        assert steps.index(("sent", "b", "led_blink")) < steps.index(("done", "b", "led_blink"))
        assert [e for e, d in got if e == "event"] == ["event"], got  # the blink's EVENT
        times = [d["t_ms"] for e, d in got]
        assert times == sorted(times), times
        assert got[-1][1]["ok"] is True, got[-1]
        c.close()
    finally:
        live.stop()


def test_stalled_client_loses_oldest_with_a_count_and_holds_nobody_up():
    live = LiveRig(config={"events": {"queue": 8}}).start()
    try:
        stalled = SseClient(live.port, rcvbuf=2048)
        reader = SseClient(live.port)
        t0 = time.monotonic()
        status, rep = live.plan(chain(16))
        base = time.monotonic() - t0
        assert status == 200 and rep["ok"], rep
        reader.until(lambda e, d: e == "plan", 10)
        # stalled reads nothing while many plans run; every item is big enough to fill sockets
        worst = 0
        for _ in range(25):
            t0 = time.monotonic()
            status, rep = live.plan(chain(16))
            worst = max(worst, time.monotonic() - t0)
            assert status == 200 and rep["ok"], rep
            reader.until(lambda e, d: e == "plan", 10)
        print("plan of 16 steps: alone %.3f s, worst with a stalled stream %.3f s" % (base, worst))
        assert worst < base + 0.1, (base, worst)
        st = http(live.port, "GET", "/status")[1]
        assert st["events"]["lost"] > 0 and st["events"]["subscribers"] == 2, st["events"]
        items = []
        lost = None
        while True:
            it = stalled.next(5)
            items.append(it)
            if it[0] == "lost":
                lost = it[1]
                break
        assert lost["count"] > 0, lost
        # after the lost item the stream goes on with the newest items, ending with a plan
        rest = stalled.until(lambda e, d: e == "plan" and d["plan"] == 26, 10)
        assert rest[-1][1]["ok"] is True
        stalled.close()
        reader.close()
    finally:
        live.stop()


def test_one_stream_more_than_max_subscribers_gets_503():
    live = LiveRig(config={"events": {"max_subscribers": 2}}).start()
    try:
        a, b = SseClient(live.port), SseClient(live.port)
        assert a.status == 200 and b.status == 200
        c = SseClient(live.port)
        assert c.status == 503 and c.headers.get("retry-after") == "5", c.headers
        assert "2 event streams already" in c.read_body()["error"]
        # streams do not take the request slots: plans and /status still go through
        for _ in range(6):
            assert http(live.port, "GET", "/status")[0] == 200
        a.close()
        deadline = time.monotonic() + 5
        while True:  # the server notices the closed stream at its next write (a keep-alive)
            st = http(live.port, "GET", "/status")[1]["events"]
            live.plan(plan(step("x", "led_on")))
            if st["subscribers"] < 2 or time.monotonic() > deadline:
                break
        assert st["subscribers"] == 1, st
        d = SseClient(live.port)
        assert d.status == 200
        b.close()
        d.close()
    finally:
        live.stop()


def test_token_is_required_for_the_stream():
    live = LiveRig(http_config={"token": "s3cret"}).start()
    try:
        c = SseClient(live.port)
        assert c.status == 401 and "bearer token" in c.read_body()["error"], c.status
        c = SseClient(live.port, headers={"Authorization": "Bearer s3cret"})
        assert c.status == 200
        c.close()
        c = SseClient(live.port, headers={"Authorization": "Bearer s3cret", "Origin": "http://x"})
        assert c.status == 403
    finally:
        live.stop()


def test_status_ring_keeps_asked_happened_and_refused():
    live = LiveRig().start()
    try:
        status, rep = live.plan(plan(step("a", "led_blink", count=2, period_ms=100)))
        assert status == 200
        status, rep = live.plan(plan(step("z", "led_disco")))
        assert status == 422
        st = http(live.port, "GET", "/status")[1]
        assert st["nudges"] == {"url": None, "sent": 0, "failed": 0, "dropped": 0}, st["nudges"]
        assert "idle" not in st, "no idle loop unless configured"
        ring = st["recent"]
        kinds = [e["event"] for e in ring]
        assert kinds[:2] == ["registered", "registered"], kinds
        p = [e for e in ring if e["event"] == "plan"][-1]
        assert p["steps"][0]["action"] == "led_blink" and p["steps"][0]["status"] == "done", p
        assert p["steps"][0]["params"] == {"count": 2, "period_ms": 100}, p
        r = ring[-1]
        assert r["event"] == "rejected" and "led_disco" in r["problems"][0], r
        assert [e["t_ms"] for e in ring] == sorted(e["t_ms"] for e in ring)
    finally:
        live.stop()
