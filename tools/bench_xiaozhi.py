#!/usr/bin/env python3
# Benchmark of the xiaozhi link: the master's heap over a session of tool calls and TTS replies (virtual body).
"""The master's heap over a xiaozhi session (virtual body + the stand-in server).

  .venv/bin/python tools/bench_xiaozhi.py              # 30 s session
  .venv/bin/python tools/bench_xiaozhi.py --soak 600   # the 10-minute session of issue 13

The master reports gc.mem_alloc() after gc.collect() once a second (heap_report_ms, tools/vbody/launch.py).
The stand-in server keeps calling tools (led_on, led_off, led_blink, an unknown tool, tools/list)
and sends a TTS reply of two sentences (with stand-in audio frames) every few seconds; the
figure is the heap in use at the end against its value once the session was ready, and the
largest value seen.
"""

import argparse
import json
import sys
import time

import toolpath  # noqa: F401  (the tree, lib/ and tools/ on sys.path)
from vbody.body import VirtualBody
from xiaozhi_server import ServerThread

CPYTHON = True  # a host program: tools/bench.py runs it under CPython


def _heaps(body, since=0):
    return [
        e["alloc"]
        for e in body.select(lambda e: e.get("src") == "master" and e.get("event") == "heap", since)
    ]


def run(soak_s=30, heap=None, out_dir=None):
    """Prints the figures; returns {"xiaozhi": figures} (tools/bench.py merges it)."""
    f = session(soak_s, heap, out_dir)
    show(f)
    return {"xiaozhi": f}


def show(f):
    print(
        "  xiaozhi session %.0f s: %d tool calls (%d failed), %d TTS replies"
        % (f["soak_s"], f["tool_calls"], f["call_errors"], f["tts_replies"])
    )
    print(
        "  master heap in use (gc.mem_alloc() after gc.collect()): start %d, end %d, max %d, "
        "growth %+d bytes over %d samples"
        % (f["heap_start"], f["heap_end"], f["heap_max"], f["heap_growth"], f["samples"])
    )
    print(
        "  least in use over the first and the last stretch of samples: %d, %d (%+d bytes)"
        % (f["heap_floor_first"], f["heap_floor_last"], f["heap_floor_growth"])
    )


def session(soak_s=30, heap=None, out_dir=None):
    figures = {}
    with ServerThread() as st:
        srv = st.server
        body = VirtualBody(out_dir=out_dir, heap=heap, heap_report_ms=1000, xiaozhi=srv.ota_url)
        body.start()
        try:
            if body.wait_menu(["led_on", "led_off", "led_blink"], 20) is None:
                raise RuntimeError("the body never came up (logs in %s)" % body.out_dir)
            s = st.wait(lambda: srv.session if srv.session and srv.session.ready.is_set() else None)
            time.sleep(3)  # the first reports after the session is up
            m = body.mark()
            body.wait_for(lambda e: e.get("src") == "master" and e.get("event") == "heap", 5, m)
            start = _heaps(body, m)[0]
            speak = "speak" in (body.menu_names() or [])
            calls = replies = errors = 0

            async def one_round(srv, i):
                nonlocal calls, replies, errors
                for name, args in (
                    ("led_on", {}),
                    ("led_blink", {"count": 2, "period_ms": 100}),
                    ("led_off", {}),
                    ("led_fly", {}),
                ):
                    p = await s.request("tools/call", {"name": name, "arguments": args})
                    calls += 1
                    if "error" in p and name != "led_fly":
                        errors += 1
                if i % 5 == 0:
                    await s.list_tools()
                if speak and i % 3 == 0:
                    await s.say(["Round %d." % i, "All is well."], opus_frames=4)
                    replies += 1

            t_end = time.monotonic() + soak_s
            i = 0
            while time.monotonic() < t_end:
                st.call(one_round, i)
                i += 1
                time.sleep(0.5)
            quiet_by = time.monotonic() + 60  # the last speech plays out
            while time.monotonic() < quiet_by:
                x = body.status().get("xiaozhi") or {}
                if not x.get("speech_queued") and not body.status()["plans"]["running"]:
                    break
                time.sleep(0.5)
            time.sleep(3)
            hs = _heaps(body, m)
            k = min(60, max(1, len(hs) // 4))  # the floor: the least in use over a stretch
            figures = {
                "soak_s": soak_s,
                "tool_calls": calls,
                "call_errors": errors,
                "tts_replies": replies,
                "heap_start": start,
                "heap_end": hs[-1],
                "heap_max": max(hs),
                "heap_growth": hs[-1] - start,
                "heap_floor_first": min(hs[:k]),
                "heap_floor_last": min(hs[-k:]),
                "heap_floor_growth": min(hs[-k:]) - min(hs[:k]),
                "samples": len(hs),
                "link": body.status().get("xiaozhi"),
            }
        finally:
            body.stop()
    return figures


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--soak", type=float, default=30, help="seconds of session (600: issue 13)")
    p.add_argument("--heap", help="unix-port heap size of the boards, e.g. 64k")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    f = session(args.soak, args.heap)
    if not args.json:
        show(f)
    print(json.dumps({"xiaozhi": f}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
