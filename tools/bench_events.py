#!/usr/bin/env python3
# Benchmarks of the body speaking up: master heap over a soak with 3 /events streams and an MCP session, and UART-to-SSE item latency.
"""Figures of GET /events and the MCP session streams on the virtual body (unix-port master).

  .venv/bin/python tools/bench_events.py               # 60 s soak
  .venv/bin/python tools/bench_events.py --soak 600    # the 10-minute soak of the issue
  .venv/bin/python tools/bench.py events               # the same through the bench runner

1. Heap: the master reports gc.mem_alloc() after gc.collect() once a second; three plain SSE
   clients read GET /events and one MCP session holds its GET /mcp stream and calls tools with
   a progress token while plans run (LED and speaker, one unplug/replug of the speaker per
   minute so tools/list_changed goes out too). The figure is the heap in use at the end
   against its value once the streams were attached.
2. Latency: from the last byte of a COMMAND_RESP (led_on) or an EVENT (led_blink) delivered
   to the master's UART on the paced cable, to the matching SSE item read by a client on
   loopback (the item leaving the socket, plus the loopback hop): median and worst.
"""

import argparse
import json
import os
import random
import socket
import statistics
import threading
import time

import toolpath  # noqa: F401  (the tree, lib/ and tools/ on sys.path)
import loopback
from bench_body import FrameTimes, plan_of, random_plan
from vbody.body import VirtualBody
from organbus import frame


class Stream(threading.Thread):
    """A reader of one SSE stream (GET `path`): items as (arrival monotonic, kind, data)."""

    def __init__(self, addr, path="/events", headers=None):
        super().__init__(daemon=True)
        self.items = []
        self.path = path
        self.s = loopback.open_stream(addr, path, headers, timeout=5)
        self.status = None
        self.answer = b""  # the body of an answer other than 200 (its reason)
        self.closed = False
        self.start()

    def run(self):
        buf = b""
        self.s.settimeout(None)
        while True:
            try:
                c = self.s.recv(65536)
            except OSError:
                break
            if not c:
                break
            t = time.monotonic()
            buf += c
            if self.status is None and b"\r\n\r\n" in buf:
                head, _, buf = buf.partition(b"\r\n\r\n")
                self.status = int(head.split(b" ")[1])
            if self.status is None:
                continue
            if self.status != 200:
                self.answer += buf
                buf = b""
                continue
            items, buf, _ = loopback.sse_items(buf)
            self.items.extend((t, kind, data) for kind, data in items)
        self.closed = True

    def ready(self, timeout=10):
        """Waits for the answer's head (a stream gives its request slot back then)."""
        end = time.monotonic() + timeout
        while self.status is None and not self.closed and time.monotonic() < end:
            time.sleep(0.01)
        if self.status != 200:
            time.sleep(0.05 if self.status else 0)  # the reason's bytes
            raise RuntimeError(
                "GET %s answered %s %s" % (self.path, self.status, self.answer[:200].decode())
            )
        return self

    def close(self):
        try:
            self.s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.s.close()


def post(addr, path, obj, headers=None, timeout=30):
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    h.update(headers or {})
    return loopback.request(addr, "POST", path, obj, h, timeout)


def mcp_session(addr, auth=None):
    """(session id, GET stream) of a raw MCP session (initialize, initialized, GET /mcp);
    `auth`: headers every request carries (a bearer token)."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "0"}}}  # fmt: skip
    status, hdrs, _ = post(addr, "/mcp", init, auth)
    sid = hdrs.get("mcp-session-id")
    if status != 200 or not sid:
        raise RuntimeError("MCP initialize answered %s without a session" % status)
    h = dict(auth or {}, **{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
    post(addr, "/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, h)
    return sid, Stream(addr, "/mcp", h).ready()


def heaps(body, since=0):
    sel = body.select(lambda e: e.get("src") == "master" and e.get("event") == "heap", since)
    return [e["alloc"] for e in sel]


def bench_soak(body, soak_s, seed=1):
    rng = random.Random(seed)
    streams = [Stream(body.http).ready() for _ in range(3)]
    sid, mstream = mcp_session(body.http)
    h = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
    time.sleep(3.0)  # heap reports with the streams attached: the value "after attach"
    start = (heaps(body) or [None])[-1]
    t_end = time.monotonic() + soak_s
    t_unplug = time.monotonic() + 30
    plans = calls = 0
    while time.monotonic() < t_end:
        p = random_plan(rng)
        body.plan(p)
        plans += 1
        if rng.random() < 0.3:
            call = {"jsonrpc": "2.0", "id": 100 + calls, "method": "tools/call",
                    "params": {"name": "led_blink", "arguments": {"count": 1, "period_ms": 100},
                               "_meta": {"progressToken": calls}}}  # fmt: skip
            post(body.http, "/mcp", call, h)
            calls += 1
        if time.monotonic() > t_unplug:
            t_unplug += 60
            body.unplug("speaker")
            time.sleep(16)
            body.replug("speaker")
            body.wait_menu(["chime"], 10)
    time.sleep(2.5)
    end = (heaps(body) or [None])[-1]
    h_all = heaps(body)
    st = body.status()
    out = {
        "soak_s": soak_s,
        "plans": plans,
        "mcp_calls": calls,
        "sse_items": [len(s.items) for s in streams],
        "mcp_notifications": len(mstream.items),
        "lost": st["events"]["lost"],
        "master_after_attach": start,
        "master_after_soak": end,
        "master_delta": None if start is None or end is None else end - start,
        "master_max": max(h_all) if h_all else None,
        "master_every_10s": h_all[::10],
        # flatness: the median of the reports 10..40 s in (the ring and the sessions full)
        # against the median of the last 30 (a report is one per second)
        "master_median_early": statistics.median(h_all[10:40]) if len(h_all) > 40 else None,
        "master_median_late": statistics.median(h_all[-30:]) if len(h_all) > 40 else None,
    }
    for s in streams + [mstream]:
        s.close()
    return out


def bench_latency(body, n=30):
    cable = body.cable("led")
    got = FrameTimes(cable.ba, delivered=True)  # organ -> master, as the master's UART got it
    sse = Stream(body.http).ready()
    resp_ms, event_ms = [], []
    for i in range(n):
        t0 = time.monotonic()
        status, rep = body.plan(plan_of(["led_on"]))
        if status != 200:
            raise RuntimeError("latency plan failed: %s %s" % (status, rep))
        p = plan_of(["led_blink"])
        p["steps"][0]["params"] = {"count": 1, "period_ms": 100}
        t1 = time.monotonic()
        status, rep = body.plan(p)
        if status != 200:
            raise RuntimeError("latency plan failed: %s %s" % (status, rep))
        time.sleep(0.15)
        resps = got.of(frame.COMMAND_RESP, t0)
        events = got.of(frame.EVENT, t1)
        done = [x for x in sse.items if x[0] >= t0 and x[1] == "step" and x[2]["status"] == "done"]
        evs = [x for x in sse.items if x[0] >= t1 and x[1] == "event"]
        if resps and done:
            resp_ms.append((done[0][0] - resps[0][0]) * 1000.0)
        if events and evs:
            event_ms.append((evs[0][0] - events[0][0]) * 1000.0)
    sse.close()

    def fig(xs):
        if not xs:
            return None
        return {"median": round(statistics.median(xs), 2), "worst": round(max(xs), 2),
                "samples": len(xs)}  # fmt: skip

    return {"command_resp_to_sse_ms": fig(resp_ms), "event_to_sse_ms": fig(event_ms)}


def run(soak_s=60, latency_n=30, heap=None, out_dir=None):
    sub = (lambda name: os.path.join(out_dir, name)) if out_dir else (lambda name: None)
    figures = {}
    body = VirtualBody(out_dir=sub("latency"), heap=heap).start()
    try:
        if body.wait_menu(["led_on", "led_blink"], 20) is None:
            raise RuntimeError("the body never came up (logs in %s)" % body.out_dir)
        figures["latency"] = bench_latency(body, latency_n)
    finally:
        body.stop()
    body = VirtualBody(out_dir=sub("soak"), heap=heap, heap_report_ms=1000).start()
    try:
        if body.wait_menu(["led_on", "chime"], 20) is None:
            raise RuntimeError("the body never came up (logs in %s)" % body.out_dir)
        figures["soak"] = bench_soak(body, soak_s)
    finally:
        body.stop()
    show(figures)
    return {"events": figures}


def show(f):
    la, so = f["latency"], f["soak"]
    for key, what in (("command_resp_to_sse_ms", "COMMAND_RESP"), ("event_to_sse_ms", "EVENT")):
        x = la[key]
        if x:
            print(
                "%s delivered on the master's UART -> its /events item read on loopback:"
                " median %.2f ms, worst %.2f ms (%d)"
                % (what, x["median"], x["worst"], x["samples"])
            )
    print(
        "master heap over a %.0f s soak (%d plans, %d MCP calls with progress, 3 /events"
        " streams + 1 MCP GET stream): after attach %s B, after soak %s B, delta %s B (max %s B);"
        " items per stream %s, MCP notifications %d, lost %d"
        % (so["soak_s"], so["plans"], so["mcp_calls"], so["master_after_attach"],
           so["master_after_soak"], so["master_delta"], so["master_max"], so["sse_items"],
           so["mcp_notifications"], so["lost"])
    )  # fmt: skip
    print("  master heap every 10 s: %s" % so["master_every_10s"])
    if so["master_median_early"] is not None:
        print(
            "  median 10..40 s in %d B, median of the last 30 s %d B: %+d B"
            % (so["master_median_early"], so["master_median_late"],
               so["master_median_late"] - so["master_median_early"])
        )  # fmt: skip


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--soak", type=float, default=60, help="seconds of soak (600: the issue's)")
    p.add_argument("--latency", type=int, default=30, help="plans of each kind timed")
    p.add_argument("--heap", help="unix-port heap size of the boards, e.g. 64k")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    f = run(args.soak, args.latency, heap=args.heap)
    if args.json:
        print(json.dumps(f))


if __name__ == "__main__":
    main()
