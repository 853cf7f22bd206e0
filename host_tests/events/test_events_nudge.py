# Body Protocol nudges to a loopback receiver: soon after an organ goes offline, bursts coalesced under the rate limit, a dead receiver costs nothing.
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from events_rig import LiveRig, http
from master.links.nudge import parse_url, reason_of  # noqa: F401


class Receiver:
    """A loopback HTTP server that records every nudge: [(monotonic time, reason)]."""

    def __init__(self, status=200):
        self.got = []
        me = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers["Content-Length"])
                me.got.append((time.monotonic(), json.loads(self.rfile.read(n))["reason"]))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d/nudge" % self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def wait(self, n, timeout):
        end = time.monotonic() + timeout
        while len(self.got) < n and time.monotonic() < end:
            time.sleep(0.01)
        return len(self.got) >= n

    def close(self):
        self.srv.shutdown()


def blink_plan(tid="b"):
    return {"heard_req": 0, "can_execute": True, "missing": [], "response": "",
            "steps": [{"task_id": tid, "action": "led_blink", "params": {"count": 2,
                       "period_ms": 100}, "priority": 5, "depends_on": []}]}  # fmt: skip


def test_a_nudge_within_a_second_of_an_organ_going_offline():
    rx = Receiver()
    live = LiveRig(speed=4, config={"nudge_url": rx.url, "nudge_min_s": 1})
    seen = []
    live.extra.append(lambda lv: _watch(lv, seen))
    live.start()
    try:
        led = live.rig.organs[0]
        live.call(lambda: setattr(led, "alive", False))
        end = time.monotonic() + 30
        while not seen and time.monotonic() < end:
            time.sleep(0.01)
        assert seen, "the master never declared the LED offline"
        assert rx.wait(1, 3), "no nudge"
        t, reason = rx.got[0]
        assert t - seen[0] < 1.0, "nudge %.3f s after offline" % (t - seen[0])
        assert reason == "The led organ LED_001 went offline, so its abilities are gone.", reason
        live.call(lambda: setattr(led, "alive", True))
        assert rx.wait(2, 10), rx.got
        assert rx.got[1][1] == "The led organ LED_001 is back online.", rx.got
        # the receiver records a nudge before it answers; the master counts it sent on the answer
        st = _nudges_when(live, lambda st: st["sent"] + st["failed"] >= 2)
        assert st["sent"] == 2 and st["failed"] == 0 and st["dropped"] == 0, st
    finally:
        live.stop()
        rx.close()


def _nudges_when(live, pred, timeout=5):
    """GET /status's "nudges" once pred(it) holds (or after timeout s)."""
    end = time.monotonic() + timeout
    while True:
        st = http(live.port, "GET", "/status")[1]["nudges"]
        if pred(st) or time.monotonic() > end:
            return st
        time.sleep(0.02)


async def _watch(live, seen):
    def on(event, port, data):
        if event == "offline":
            seen.append(time.monotonic())

    live.rig.hub.subscribe(on)


def test_a_burst_is_coalesced_under_the_rate_limit():
    rx = Receiver()
    live = LiveRig(config={"nudge_url": rx.url, "nudge_min_s": 2}).start()
    try:
        live.call(lambda: setattr(live.rig.organs[0], "resp", 1))  # the LED refuses every COMMAND
        for i in range(5):
            status, rep = live.plan(blink_plan("b%d" % i))
            assert status == 200 and not rep["ok"], rep
            time.sleep(0.25)  # past the first nudge's 100 ms gathering
        assert rx.wait(2, 6), rx.got
        time.sleep(2.5)  # nothing else is pending: no third nudge
        assert len(rx.got) == 2, rx.got
        (t1, r1), (t2, r2) = rx.got
        assert t2 - t1 >= 2 * 0.97, "two nudges %.2f s apart under nudge_min_s 2" % (t2 - t1)
        assert r1.startswith("led_blink failed: LED_001 answered 1"), r1
        assert "Plan 1 failed" in r1 and "Plan 2" not in r1, r1
        every = r1 + " " + r2
        for i in range(1, 6):
            assert "Plan %d failed (led_blink refused)." % i in every, every
        st = http(live.port, "GET", "/status")[1]["nudges"]
        assert st["sent"] == 2 and st["coalesced"] >= 3, st
    finally:
        live.stop()
        rx.close()


def test_a_dead_receiver_costs_the_bus_nothing():
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    dead.listen(8)  # connections complete in the backlog and are never answered
    url = "http://127.0.0.1:%d/nudge" % dead.getsockname()[1]
    live = LiveRig(config={"nudge_url": url, "nudge_min_s": 0, "nudge_timeout_ms": 400}).start()
    try:
        live.call(lambda: setattr(live.rig.organs[0], "resp", 1))
        times = []
        for i in range(6):
            t0 = time.monotonic()
            status, rep = live.plan(blink_plan("d%d" % i))
            times.append(time.monotonic() - t0)
            assert status == 200 and not rep["ok"], rep
            time.sleep(0.2)
        time.sleep(1.0)
        st = http(live.port, "GET", "/status")[1]["nudges"]
        assert st["sent"] == 0 and st["failed"] >= 2, st
        assert st["last_error"] == "no answer within 400 ms", st
        assert max(times) < 0.2, "a refused step's plan took %.3f s" % max(times)
    finally:
        live.stop()
        dead.close()


@pytest.mark.parametrize(
    "url,why",
    [
        ("https://x/n", "must be an http://HOST:PORT/PATH URL"),
        ("http://:80/n", "has no host"),
        ("http://h:eighty/n", "the port is not a number"),
    ],
)
def test_a_bad_nudge_url_is_refused_with_its_reason(url, why):
    with pytest.raises(ValueError) as e:
        parse_url(url)
    assert why in str(e.value)
    assert parse_url("http://127.0.0.1:8765/nudge") == ("127.0.0.1", 8765, "/nudge")
