#!/usr/bin/env python3
# Benchmark of the master's update over the air in the virtual body: its heap and the COMMAND delay of plans during an upload.
"""Figures of issue 16 on the real unix-port processes (master, LED and speaker organs):

  .venv/bin/python tools/bench_ota.py                  # --heap 64k, 256 KB uploads, 40 plans
  .venv/bin/python tools/bench_ota.py --heap 128k --plans 100 --json

1. Heap: the master reports gc.mem_alloc() after gc.collect() every 100 ms; the figure is the
   highest report while one 256 KB upload streams in alone against the highest over 2 s of
   idle just before (both organs registered, the menu read, N plans run), and the lowest
   gc.mem_free() seen.
   Each upload is a signed bundle of 41 files, as many as the master role has (its 5 entry
   modules, empty, and 36 pads of 7,282 B: 256 KB) whose last byte is flipped: the master
   checks, writes and hashes all of it and refuses it at the last file's hash (422), so the
   running code stays and no reset interrupts the figures.
2. COMMAND delay: one-step plans (led_on / led_off in turn), one at a time over HTTP; a plan's
   delay runs from its POST /plan leaving this process to its COMMAND's bytes written by the
   master into the LED cable (the bus's own timestamp, before the wire's pacing). It holds the
   HTTP request (connect, head, body, the strict read and check of the plan) and the master's
   dispatch. Median and max over N plans idle, then over N plans while uploads stream in
   (only plans whose POST and COMMAND both fall inside an upload count).
The machine's load is printed beside the figures (os.getloadavg, and the CPU count).
"""

import argparse
import json
import os
import statistics
import sys
import threading
import time

import toolpath  # noqa: F401  (the tree, lib/ and tools/ on sys.path)
from bench_body import FrameTimes, plan_of
from deploy import ota as tool
from organbus import frame
from vbody.body import VirtualBody

KEY = "5a" * 32
TOKEN = "bench-ota-token"
UPLOAD_FILES = 36  # beside the role's 5 entry modules (empty): 41 files, as many as the role's
FILE_BYTES = 7282
IDLE_S = 2.0


def refused_bundle():
    """A 256 KB bundle whose last byte is wrong: read, written and hashed whole, then refused."""
    files = [(m + ".py", b"") for m in tool._ota.ENTRY]  # the role's entry modules, empty
    files += [("master/pad%d.bin" % i, os.urandom(FILE_BYTES)) for i in range(UPLOAD_FILES)]
    data = bytearray(tool.bundle(bytes.fromhex(KEY), files, "bench"))
    data[-1] ^= 1
    return bytes(data)


def _paced(sent, total):
    time.sleep(0.002)  # 2 KB every 2 ms or slower: an upload lasts several heap reports


def _heap(vb, t0, t1):
    hs = [e for e in vb.events if e.get("event") == "heap" and e.get("src") == "master"]
    hs = [e for e in hs if t0 <= e["t"] <= t1]
    if not hs:
        return None, None
    return max(e["alloc"] for e in hs), min(e["free"] for e in hs)


def _delays(vb, sent, n, i0, busy=None, windows=None):
    """COMMAND delays (ms) of n one-step plans; with `busy` (a thread) only those inside one
    of `windows` ([t0, t1] of each upload) while it runs."""
    out = []
    i = i0
    while len(out) < n and (busy is None or busy.is_alive()):
        t0 = time.monotonic()
        status, rep = vb.plan(plan_of(["led_on" if i % 2 == 0 else "led_off"]))
        i += 1
        if status != 200 or not rep.get("ok"):
            raise RuntimeError("a plan failed: %s %s" % (status, rep))
        cmds = sent.of(frame.COMMAND, t0)
        if not cmds:
            raise RuntimeError("a plan's COMMAND never reached the LED cable")
        t1 = cmds[0][0]
        if windows is not None:
            time.sleep(0.001)
            if not any(a <= t0 and t1 <= (b if b else time.monotonic()) for a, b in windows):
                continue
        out.append((t1 - t0) * 1000.0)
    return out, i


def _figures(ms):
    return {
        "median_ms": round(statistics.median(ms), 2),
        "max_ms": round(max(ms), 2),
        "plans": len(ms),
    }


def run(heap="64k", plans=40, out_dir=None):
    vb = VirtualBody(
        out_dir=out_dir,
        heap=heap,
        heap_report_ms=100,
        master_config={"http": {"token": TOKEN}, "ota": {"key": KEY}},
    ).start()
    try:
        if not vb.wait_http(30):
            raise RuntimeError("the master's HTTP never came up: %s" % vb.failure())
        names = ["chime", "led_off", "led_on"]
        if vb.wait_menu(names, 30) is None or not set(names) <= set(vb.menu_names() or ()):
            raise RuntimeError("the organs never came on the menu: %s" % vb.failure())
        sent = FrameTimes(vb.cable("led").ab, delivered=False)
        idle, i = _delays(vb, sent, plans, 0)
        data = refused_bundle()
        # the heap: 2 s idle, then one upload alone (no plan in flight beside it)
        t_idle = time.monotonic()
        time.sleep(IDLE_S)
        t_up = time.monotonic()
        alone = tool.Master("http://%s:%d" % vb.http, TOKEN).push(data, _paced, chunk=2048)
        t_end = time.monotonic()
        if alone[0] != 422:
            raise RuntimeError("the upload alone was not read whole: %s" % (alone,))
        time.sleep(0.3)
        idle_alloc, idle_free = _heap(vb, t_idle, t_up)
        up_alloc, up_free = _heap(vb, t_up, t_end)
        # the COMMAND delay: plans while uploads stream in, one after the other
        windows = []
        answers = []
        stop = threading.Event()

        def uploads():
            m = tool.Master("http://%s:%d" % vb.http, TOKEN)
            while not stop.is_set():
                w = [time.monotonic(), None]
                windows.append(w)
                answers.append(m.push(data, _paced, chunk=2048))
                w[1] = time.monotonic()

        th = threading.Thread(target=uploads, daemon=True)
        th.start()
        try:
            during, _ = _delays(vb, sent, plans, i, th, windows)
            delay_upload = _figures(during)
        except RuntimeError as e:  # said beside the figures that were taken
            delay_upload = {"error": str(e)}
        stop.set()
        th.join(120)
        bad = [a for a in answers if a[0] != 422 or "pad%d" % (UPLOAD_FILES - 1) not in str(a[1])]
        if bad and "error" not in delay_upload:
            delay_upload = {"error": "an upload beside the plans was refused: %s" % (bad[0],)}
        answers.append(alone)
        if idle_alloc is None or up_alloc is None:
            raise RuntimeError("no heap reports from the master")
        load = os.getloadavg()
        return {
            "heap": heap,
            "upload_bytes": len(data),
            "uploads": len(answers),  # the one alone for the heap, then those beside plans
            "heap_idle_alloc": idle_alloc,
            "heap_upload_alloc": up_alloc,
            "heap_over_idle": up_alloc - idle_alloc,
            "heap_min_free_idle": idle_free,
            "heap_min_free_upload": up_free,
            "command_delay_idle": _figures(idle),
            "command_delay_upload": delay_upload,
            "load": [round(x, 2) for x in load],
            "cpus": os.cpu_count(),
        }
    finally:
        vb.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--heap", default="64k", help="each board's heap for data (default 64k)")
    ap.add_argument("--plans", type=int, default=40, help="plans idle and during uploads")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    if args.plans < 1:
        ap.error("--plans: at least 1")
    try:
        r = run(args.heap, args.plans)
    except (RuntimeError, ValueError) as e:
        print("bench_ota: %s" % e, file=sys.stderr)
        sys.exit(1)
    if args.json:
        print(json.dumps(r))
        return
    print("master heap at --heap %s, gc.mem_alloc() after gc.collect() every 100 ms:" % r["heap"])
    print(
        "  idle %d B, during an upload of %d B %d B: %+d B over idle (min free %d B idle, %d B"
        " during)"
        % (
            r["heap_idle_alloc"],
            r["upload_bytes"],
            r["heap_upload_alloc"],
            r["heap_over_idle"],
            r["heap_min_free_idle"],
            r["heap_min_free_upload"],
        )
    )
    for k, what in (("command_delay_idle", "idle"), ("command_delay_upload", "during uploads")):
        d = r[k]
        if "error" in d:
            print("COMMAND delay during uploads: not measured: %s" % d["error"])
            continue
        print(
            "COMMAND delay (POST /plan sent -> its COMMAND written on the LED cable), %s:"
            " median %.1f ms, max %.1f ms (%d plans)"
            % (what, d["median_ms"], d["max_ms"], d["plans"])
        )
    print("  (%d uploads beside the plans)" % (r["uploads"] - 1))
    print("machine: load %s over %d CPUs" % (" ".join(str(x) for x in r["load"]), r["cpus"]))


if __name__ == "__main__":
    main()
