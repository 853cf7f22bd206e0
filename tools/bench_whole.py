#!/usr/bin/env python3
# The whole master at once at 64 KB for data: uploads, a 16-step plan a second, 3 /events streams, an MCP stream and the xiaozhi link; every refusal for want of memory counted.
"""The whole master's load at once on the virtual body (issue 28), its heap and its refusals.

  .venv/bin/python tools/bench_whole.py                 # 60 s at --heap 64k
  .venv/bin/python tools/bench_whole.py --soak 600      # the issue's 10 minutes
  .venv/bin/python tools/bench_whole.py --heap 80k      # the documented heap

At the same time, for the whole soak: a signed 256 KB update pushed again and again at 128 KB/s
(each read whole and refused at its last file's hash, so the board never resets: the upload path
end to end), a 16-step LED plan every second, GET /status every 2 s, three GET /events streams,
one MCP session holding its GET stream, and the xiaozhi link (tools/xiaozhi_server.py's stand-
in: a `ping` every 2 s, a `tools/call chime` every 10 s). Counted as a refusal for want of
memory: any answer 503 "short of memory", an upload refused "short of memory", a xiaozhi request
that fails, a xiaozhi `no_memory`, and any MemoryError the master prints. The heap: the master's
gc.mem_alloc() after gc.collect(), reported once a second.
"""

import argparse
import json
import os
import statistics
import threading
import time

import toolpath  # noqa: F401  (the tree, lib/ and tools/ on sys.path)
from bench_body import plan_of
from bench_events import Stream, mcp_session
from deploy import ota as tool
from master.ota import service as ota
from vbody.body import VirtualBody
from xiaozhi_server import ServerThread

KEY = "5a" * 32
TOKEN = "whole-token"
UPLOAD_BPS = 131072
PLAN16 = plan_of(["led_on", "led_off"] * 8)


def refused_bundle():
    """256 KB in 41 files (the role's entry modules, empty, and 36 pads), refused at the last
    file's hash: read whole every time, never committed;
    pushed at UPLOAD_BPS."""
    files = [(m + ".py", b"") for m in ota.ENTRY]
    files += [("master/pad%d.bin" % i, os.urandom(7282)) for i in range(36)]
    data = bytearray(tool.bundle(bytes.fromhex(KEY), files, "soak"))
    data[-1] ^= 1
    return bytes(data)


def _short(status, answer):
    return status == 503 and "short of memory" in json.dumps(answer)


class Load(threading.Thread):
    """Calls `fn()` every `period_s` until stopped; counts its outcomes."""

    def __init__(self, name, fn, period_s):
        super().__init__(daemon=True, name=name)
        self.fn, self.period_s = fn, period_s
        self.done = threading.Event()
        self.outcomes = {}  # outcome -> count
        self.first = {}  # outcome -> what came with its first
        self.short = []  # the refusals for want of memory (at most 10 kept)
        self.n_short = 0

    def run(self):
        while not self.done.is_set():
            t = time.monotonic()
            try:
                out = self.fn()
            except Exception as e:  # an answer that broke off or never came
                out = ("failed", repr(e)[:200])
            if out[0] not in self.outcomes:
                self.first[out[0]] = str(out[1])[:300]
            self.outcomes[out[0]] = self.outcomes.get(out[0], 0) + 1
            if out[0] == "short":
                self.n_short += 1
                if len(self.short) < 10:
                    self.short.append(out[1])
            pause = self.period_s if out[0] not in ("short", "failed") else 1.0  # Retry-After
            self.done.wait(max(0.0, pause - (time.monotonic() - t)))

    def stop(self):
        self.done.set()
        self.join(30)


def soak(body, st, soak_s, setup):
    """`setup`: what did not attach (run's link); the streams' refusals join it."""
    auth = {"Authorization": "Bearer " + TOKEN}

    def attached(open_one):
        for _ in range(5):
            try:
                return open_one()
            except Exception as e:  # refused, or closed unanswered
                setup.append(str(e) if isinstance(e, RuntimeError) else repr(e))
                time.sleep(1.0)
        return None  # the soak goes on without it; each refusal is counted

    streams = [attached(lambda: Stream(body.http, headers=auth).ready()) for _ in range(3)]
    streams = [s for s in streams if s is not None]
    sid, mstream = attached(lambda: mcp_session(body.http, auth)) or (None, None)
    push = tool.Master("http://%s:%d" % body.http, TOKEN)
    data = refused_bundle()

    def paced(sent, total):  # a LAN client's pace: 128 KB/s, 2 s an upload
        time.sleep(2048 / UPLOAD_BPS)

    def upload():
        status, answer = push.push(data, paced, chunk=2048)
        if _short(status, answer) or "short of memory" in answer.get("error", ""):
            return ("short", "upload %d %s" % (status, answer))
        return ("422" if status == 422 else "other %d" % status, answer)

    def outcome(what, status, answer, ok=(200,)):
        if _short(status, answer):
            return ("short", "%s %d %s" % (what, status, answer))
        return ("ok" if status in ok else "other %d" % status, answer)

    def plan():
        status, answer = body.plan(PLAN16)
        return outcome("plan", status, answer)

    def status():
        status, answer = body.request("GET", "/status")
        return outcome("status", status, answer)

    calls = [0]

    def xiaozhi():
        s = st.server.session
        if s is None or not s.ready.is_set():
            return ("no session", None)
        calls[0] += 1
        name = "tools/call" if calls[0] % 5 == 0 else "ping"
        params = {"name": "chime", "arguments": {}} if name == "tools/call" else {}

        async def go(srv):
            return await s.request(name, params, timeout=20)

        p = st.call(go, timeout=30)
        if "result" not in p:
            return ("short" if "memory" in json.dumps(p) else "other", "xiaozhi %s" % p)
        return ("ok", None)

    loads = [
        Load("upload", upload, 0.0),
        Load("plan", plan, 1.0),
        Load("status", status, 2.0),
        Load("xiaozhi", xiaozhi, 2.0),
    ]
    time.sleep(3.0)  # heap reports with the streams attached
    since = body.mark()
    t0 = time.monotonic()
    for x in loads:
        x.start()
    time.sleep(soak_s)
    for x in loads:
        x.stop()
    time.sleep(2.5)
    h = [
        e["alloc"]
        for e in body.select(lambda e: e.get("src") == "master" and e.get("event") == "heap", since)
    ]
    st_doc = body.status()
    xz = st_doc.get("xiaozhi") or {}
    mem_errors = [
        e.get("line", "")
        for e in body.select(lambda e: e.get("src") == "master", since)
        if "MemoryError" in e.get("line", "")
    ]
    out = {
        "heap": body.heap,
        "soak_s": round(time.monotonic() - t0, 1),
        "loads": {x.name: x.outcomes for x in loads},
        "first": {x.name: x.first for x in loads},
        "short_of_memory": sum(x.n_short for x in loads)
        + len(mem_errors)
        + xz.get("no_memory", 0)
        + len(setup),
        "setup_refusals": setup,
        "short_examples": [s for x in loads for s in x.short][:10] + mem_errors[:5],
        "xiaozhi_no_memory": xz.get("no_memory"),
        "sse_items": [len(s.items) for s in streams],
        "sse_lost": (st_doc.get("events") or {}).get("lost"),
        "mcp_stream_items": None if mstream is None else len(mstream.items),
        "master_heap_first": h[0] if h else None,
        "master_heap_last": h[-1] if h else None,
        "master_heap_max": max(h) if h else None,
        "master_heap_every_30s": h[::30],
        "master_median_early": statistics.median(h[10:40]) if len(h) > 40 else None,
        "master_median_late": statistics.median(h[-30:]) if len(h) > 40 else None,
        "mcp_session": sid is not None,
    }
    for s in streams + ([mstream] if mstream else []):
        s.close()
    return out


def run(soak_s=60, heap="64k", out_dir=None):
    """The soak's figures ({"whole": ...}), printed as well."""
    with ServerThread() as st:
        body = VirtualBody(
            out_dir=out_dir,
            heap=heap,
            heap_report_ms=1000,
            xiaozhi=st.server.ota_url,
            master_config={"http": {"token": TOKEN}, "ota": {"key": KEY}},
        ).start()
        try:
            if body.wait_menu(["led_on", "chime"], 30) is None:
                raise RuntimeError("the body never came up (logs in %s)" % body.out_dir)
            setup = []
            try:
                st.wait(lambda: st.server.session and st.server.session.ready.is_set(), 30)
            except TimeoutError:  # a result at this heap: the soak goes on without the link
                try:
                    xz = body.status().get("xiaozhi")
                except Exception as e:  # (at this heap /status may be refused too)
                    xz = repr(e)
                setup.append("the xiaozhi link did not come up in 30 s (its /status: %s)" % xz)
            f = soak(body, st, soak_s, setup)
        finally:
            body.stop()
    show(f)
    return {"whole": f}


def show(f):
    print(
        "the whole master at --heap %s for %.0f s: %d refusals for want of memory"
        % (f["heap"], f["soak_s"], f["short_of_memory"])
    )
    for name, outcomes in sorted(f["loads"].items()):
        print("  %-8s %s" % (name, ", ".join("%s %d" % kv for kv in sorted(outcomes.items()))))
        for k, v in sorted(f["first"][name].items()):
            if k not in ("ok", "422", "short"):
                print("    first %s: %s" % (k, v[:160]))
    for s in f["setup_refusals"]:
        print("  attaching: %s" % s[:160])
    for s in f["short_examples"]:
        print("  short: %s" % str(s)[:160])
    print(
        "  /events items per stream %s (lost %s), MCP stream items %s, xiaozhi no_memory %s"
        % (f["sse_items"], f["sse_lost"], f["mcp_stream_items"], f["xiaozhi_no_memory"])
    )
    print(
        "  master heap in use: first %s B, last %s B, max %s B; every 30 s %s"
        % (f["master_heap_first"], f["master_heap_last"], f["master_heap_max"],
           f["master_heap_every_30s"])
    )  # fmt: skip
    if f["master_median_early"] is not None:
        print(
            "  median 10..40 s in %d B, median of the last 30 s %d B: %+d B"
            % (f["master_median_early"], f["master_median_late"],
               f["master_median_late"] - f["master_median_early"])
        )  # fmt: skip


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--soak", type=float, default=60, help="seconds of soak (600: the issue's)")
    p.add_argument("--heap", default="64k", help="the master's heap for data (default 64k)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    f = run(args.soak, args.heap)
    if args.json:
        print(json.dumps(f))
    return 0 if f["whole"]["short_of_memory"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
