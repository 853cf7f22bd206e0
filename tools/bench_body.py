#!/usr/bin/env python3
# Benchmarks of the virtual body: command round trips vs the wire limit, POST /plan latency, heap flatness.
"""Figures of the whole body on the paced bus (real unix-port processes, real time).

  .venv/bin/python tools/bench_body.py                 # short soak (30 s)
  .venv/bin/python tools/bench_body.py --soak 600      # the 10-minute soak of the README

1. Round trips: plans of 16 alternating led_on/led_off steps on the LED cable; whole command
   cycles (COMMAND, organ turnaround, COMMAND_RESP, master turnaround) per second from the
   master's first COMMAND byte to its last, against the wire limit for those frame sizes at
   115200 8N1, both directions (ratio target >= 0.90). Two floors measured the same way: the
   bus alone (a CPython test echo at both ends) and the bus with a MicroPython unix-port echo
   process at each end (the same UART layer and process wake-ups as the boards, no protocol).
2. Latency from POST /plan (one led_on step) to the first COMMAND byte on the cable.
3. Heap: every board reports gc.mem_alloc() after gc.collect() once a second; the soak runs
   plans while the bus flips bits, drops bytes and injects junk; the figure is the heap in
   use at the end against its value after boot (a few seconds after registration).
"""

import argparse
import json
import os
import random
import socket
import statistics
import threading
import time

import toolpath  # the tree, lib/ and tools/ on sys.path
from vbody import bus, launch
from vbody.body import VirtualBody
from organbus import frame
from organbus import command

MIX = ("led_on", "led_off", "led_blink", "chime")  # the soaks' abilities


def random_plan(rng):
    """A plan of 1..4 steps drawn from MIX (a blink kept short)."""
    p = plan_of([rng.choice(MIX) for _ in range(rng.randrange(1, 5))])
    for s in p["steps"]:
        if s["action"] == "led_blink":
            s["params"] = {"count": 1, "period_ms": 100}
    return p


def plan_of(actions):
    return {
        "heard_req": 0,
        "steps": [
            {"task_id": "t%d" % (i + 1), "action": a, "params": {}, "priority": 5, "depends_on": []}
            for i, a in enumerate(actions)
        ],
        "can_execute": True,
        "missing": [],
        "response": "",
    }


class FrameTimes:
    """Times (monotonic) at which frames of a wire began (sender side) or ended (receiver side).

    The tap runs in the bus's own threads, on the path being timed: it only keeps the chunk and
    its time (one list append, no lock); frames are decoded when the figures are taken."""

    def __init__(self, wire, delivered):
        self.items = []  # (t, type, payload)
        self.raw = []  # (t, bytes) as the tap saw them, not yet decoded
        self.done = 0  # how many of raw are decoded
        self.t = 0.0
        self.dec = frame.Decoder(self._on)
        (wire.delivered_taps if delivered else wire.taps).append(self._feed)

    def _feed(self, t, data):
        self.raw.append((t, data))

    def _on(self, ftype, payload, n):
        self.items.append((self.t, ftype, bytes(payload[:n])))

    def of(self, ftype, t0=0.0):
        raw = self.raw
        while self.done < len(raw):
            self.t, data = raw[self.done]
            self.done += 1
            self.dec.feed(data, int(self.t * 1000))
        return [x for x in self.items if x[1] == ftype and x[0] >= t0]


def wire_s(nbytes):
    return nbytes * bus.BYTE_S


def cycles(cmds):
    """(wire time, elapsed) of the whole command cycles in `cmds` (the COMMANDs as the master
    wrote them: (t, type, payload), in order). A cycle runs from one COMMAND's first byte to the
    next one's: the COMMAND on the wire, the organ's turnaround, the COMMAND_RESP (9 bytes) on
    the wire back, the master's turnaround. Its wire limit counts both frames at 115200 8N1."""
    elapsed = cmds[-1][0] - cmds[0][0]
    limit = sum(
        wire_s(len(p) + frame.OVERHEAD) + wire_s(1 + frame.OVERHEAD) for _, _, p in cmds[:-1]
    )
    return limit, elapsed


def bench_round_trips(body, plans=20, steps=16):
    cable = body.cable("led")
    sent = FrameTimes(cable.ab, delivered=False)  # master wrote the COMMAND (first byte starts)
    back = FrameTimes(cable.ba, delivered=True)  # the RESP reached the master (last byte ended)
    at_organ = FrameTimes(cable.ab, delivered=True)  # the COMMAND reached the organ
    answered = FrameTimes(cable.ba, delivered=False)  # the organ wrote its RESP
    ratios, rates, beyond = [], [], []
    total_limit = total_elapsed = 0.0
    hops = {"organ": [], "master": []}
    for _ in range(plans):
        actions = ["led_on" if i % 2 == 0 else "led_off" for i in range(steps)]
        t0 = time.monotonic()
        status, rep = body.plan(plan_of(actions))
        if status != 200 or not rep.get("ok"):
            raise RuntimeError("round-trip plan failed: %s %s" % (status, rep))
        time.sleep(0.05)
        cmds = sent.of(frame.COMMAND, t0)
        resps = back.of(frame.COMMAND_RESP, t0)
        if len(cmds) != steps or len(resps) < steps:
            raise RuntimeError(
                "saw %d COMMANDs and %d RESPs for %d steps" % (len(cmds), len(resps), steps)
            )
        limit, elapsed = cycles(cmds)
        arrived = at_organ.of(frame.COMMAND, t0)
        written = answered.of(frame.COMMAND_RESP, t0)
        for i in range(min(len(arrived), len(written), steps)):
            hops["organ"].append(written[i][0] - arrived[i][0])
        for i in range(steps - 1):
            hops["master"].append(cmds[i + 1][0] - resps[i][0])
        ratios.append(limit / elapsed)
        beyond.append((elapsed - limit) / (steps - 1))
        rates.append((steps - 1) / elapsed)
        total_limit += limit
        total_elapsed += elapsed
    per_rt_bytes = statistics.mean(len(p) + frame.OVERHEAD for _, _, p in cmds) + 1 + frame.OVERHEAD
    return {
        "round_trips_per_s": round(statistics.median(rates), 1),
        "wire_limit_per_s": round(1.0 / wire_s(per_rt_bytes), 1),
        "ratio": round(statistics.median(ratios), 3),
        "ratio_min": round(min(ratios), 3),
        # every cycle of every plan together: stalls count in full, not only in the median
        "ratio_pooled": round(total_limit / total_elapsed, 3),
        # per cycle beyond its wire time, median over the plans (ms)
        "beyond_wire_ms": round(statistics.median(beyond) * 1000, 3),
        "plans": plans,
        "steps_per_plan": steps,
        # where a round trip's time beyond the wire goes (ms): COMMAND in -> RESP out at the
        # organ, RESP in -> next COMMAND out at the master (times taken by the bus's threads)
        "organ_ms": _spread(hops["organ"]),
        "master_ms": _spread(hops["master"]),
    }


def _spread(xs):
    xs = sorted(x * 1000.0 for x in xs)
    if not xs:
        return None
    return {
        "median": round(statistics.median(xs), 3),
        "mean": round(statistics.mean(xs), 3),
        "p90": round(xs[int(len(xs) * 0.9)], 3),
        "max": round(xs[-1], 3),
    }


def bench_bus_floor(n=320):
    """The bus alone: a 15-byte 'COMMAND' answered at once with a 9-byte 'RESP' by a test echo."""
    c = bus.Cable("floor", "listen:127.0.0.1:0", "listen:127.0.0.1:0").start()
    a = socket.create_connection(("127.0.0.1", c.a.port))
    b = socket.create_connection(("127.0.0.1", c.b.port))
    for x in (a, b):
        x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.a.connected.wait(2)
    c.b.connected.wait(2)
    cmd = frame.encode(frame.COMMAND, command.encode_command("led_on"))
    stop = threading.Event()

    def organ():
        got = b""
        while not stop.is_set():
            try:
                got += b.recv(100)
            except OSError:
                return
            while len(got) >= len(cmd):
                got = got[len(cmd) :]
                b.sendall(frame.RESP_OK_FRAME)

    threading.Thread(target=organ, daemon=True).start()
    cmds = []
    payload = cmd[5:-3]
    for _ in range(n):
        cmds.append((time.monotonic(), frame.COMMAND, payload))
        a.sendall(cmd)
        got = b""
        while len(got) < len(frame.RESP_OK_FRAME):
            got += a.recv(100)
    stop.set()
    a.close()
    b.close()
    c.close()
    return floor_figures(cmds)


def floor_figures(cmds, steps=16):
    """A floor's figures from its COMMAND times, cut into runs of `steps` COMMANDs like the
    body's plans: the median ratio of the runs, the worst, and all cycles pooled."""
    runs = [cycles(cmds[i : i + steps]) for i in range(0, len(cmds) - steps + 1, steps)]
    ratios = [lim / el for lim, el in runs]
    limit, elapsed = cycles(cmds)
    return {
        "ratio": round(statistics.median(ratios), 3),
        "ratio_min": round(min(ratios), 3),
        "ratio_pooled": round(limit / elapsed, 3),
        "round_trips_per_s": round((len(cmds) - 1) / elapsed, 1),
        # per cycle beyond its wire time, median over the runs (ms)
        "beyond_wire_ms": round(
            statistics.median((el - lim) / (steps - 1) for lim, el in runs) * 1000, 3
        ),
    }


# Both ends of the cable as MicroPython unix-port processes on the simulated UART (tools/simhw),
# each doing nothing but answer: the "organ" writes a COMMAND_RESP as soon as a whole COMMAND is
# in, the "master" writes the next COMMAND as soon as the whole COMMAND_RESP is in. Same asyncio
# IO wait, same UART layer and the same two process wake-ups per round trip as the firmware,
# no protocol work: what any firmware in this simulator can at best reach.
_ECHO = """
import asyncio, os, machine
from organbus import frame, command
ON = frame.encode(frame.COMMAND, command.encode_command("led_on"))
OFF = frame.encode(frame.COMMAND, command.encode_command("led_off"))
RESP = frame.RESP_OK_FRAME
N = int(os.getenv("ECHO_N"))
async def organ(u):
    s = asyncio.StreamReader(u)
    buf = bytearray(64)
    got = 0
    k = 0
    while True:
        n = await s.readinto(buf)
        got += n or 0
        need = len(OFF) if k & 1 else len(ON)
        while got >= need:
            got -= need
            k += 1
            u.write(RESP)
            need = len(OFF) if k & 1 else len(ON)
async def master(u):
    s = asyncio.StreamReader(u)
    buf = bytearray(64)
    await asyncio.sleep_ms(300)
    for i in range(N):
        u.write(OFF if i & 1 else ON)
        got = 0
        while got < len(RESP):
            got += await s.readinto(buf) or 0
    print("done")
if os.getenv("ECHO_ROLE") == "organ":
    asyncio.run(organ(machine.UART(1)))
else:
    asyncio.run(master(machine.UART(0)))
"""


def bench_unix_floor(n=320):
    """The bus with a MicroPython echo process at each end (see _ECHO): ratio against the wire."""
    import subprocess

    c = bus.Cable("echo", "listen:127.0.0.1:0", "listen:127.0.0.1:0").start()
    sent = FrameTimes(c.ab, delivered=False)
    back = FrameTimes(c.ba, delivered=True)
    procs = []
    try:
        for role, uart, end in (("organ", 1, c.b), ("master", 0, c.a)):
            e = dict(launch.sim_env({uart: end.peer_spec}), ECHO_N=str(n), ECHO_ROLE=role)
            procs.append(
                subprocess.Popen(
                    [launch.micropython_exe(), "-c", _ECHO],
                    cwd=toolpath.ROOT,
                    env=e,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                )
            )
        out, _ = procs[1].communicate(timeout=60)
        if b"done" not in out:
            raise RuntimeError("unix-port echo failed: %s" % out.decode("utf-8", "replace")[-300:])
        time.sleep(0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        c.close()
    cmds = sent.of(frame.COMMAND)
    resps = back.of(frame.COMMAND_RESP)
    if len(cmds) != n or len(resps) != n:
        raise RuntimeError(
            "unix-port echo: %d COMMANDs, %d RESPs of %d" % (len(cmds), len(resps), n)
        )
    return floor_figures(cmds)


def bench_latency(body, n=20):
    cable = body.cable("led")
    sent = FrameTimes(cable.ab, delivered=False)
    lat = []
    for i in range(n):
        t0 = time.monotonic()
        status, rep = body.plan(plan_of(["led_on" if i % 2 == 0 else "led_off"]))
        if status != 200:
            raise RuntimeError("latency plan failed: %s %s" % (status, rep))
        cmds = sent.of(frame.COMMAND, t0)
        if cmds:
            lat.append((cmds[0][0] - t0) * 1000.0)
    return {
        "post_to_first_command_ms_median": round(statistics.median(lat), 2),
        "post_to_first_command_ms_max": round(max(lat), 2),
        "samples": len(lat),
    }


def bench_heap(body, soak_s, seed=1):
    rng = random.Random(seed)

    def heaps(role, since=0):
        return [
            e["alloc"]
            for e in body.select(lambda e: e.get("src") == role and e.get("event") == "heap", since)
        ]

    time.sleep(3.0)  # a few reports after registration: the value "after boot"
    start = {r: (heaps(r) or [None])[-1] for r in body.boards}
    for name in body.cables:
        body.cable(name).set_faults(flip=1e-4, drop=1e-4)
    t_end = time.monotonic() + soak_s
    plans = refused = 0
    while time.monotonic() < t_end:
        p = random_plan(rng)
        status, _ = body.plan(p)
        plans += 1
        refused += status != 200
        if rng.random() < 0.2:
            body.cable(rng.choice(list(body.cables))).junk(rng.randrange(8, 64))
    for name in body.cables:
        body.cable(name).set_faults(flip=0, drop=0)
    time.sleep(2.5)
    out = {"soak_s": soak_s, "plans": plans, "plans_refused": refused}
    for r in body.boards:
        h = heaps(r)
        end = h[-1] if h else None
        out[r] = {
            "after_boot": start[r],
            "after_soak": end,
            "delta": None if end is None or start[r] is None else end - start[r],
            "max": max(h) if h else None,
        }
    return out


def run(soak_s=30, plans=20, latency_n=20, heap=None, out_dir=None):
    """All figures as a dict. Round trips and latency run on a body without heap reports (their
    gc.collect() every second would stall the path being timed); the soak on a second body."""
    figures = {"bus_floor": bench_bus_floor(), "unix_floor": bench_unix_floor()}
    sub = (lambda name: os.path.join(out_dir, name)) if out_dir else (lambda name: None)
    body = VirtualBody(out_dir=sub("timing"), heap=heap, organs=("led",)).start()
    try:
        if body.wait_menu(["led_on", "led_off"], 15) is None:
            raise RuntimeError("the body never came up (logs in %s)" % body.out_dir)
        figures["round_trips"] = bench_round_trips(body, plans)
        figures["latency"] = bench_latency(body, latency_n)
    finally:
        body.stop()
    body = VirtualBody(out_dir=sub("soak"), heap=heap, heap_report_ms=1000).start()
    try:
        if body.wait_menu(["led_on", "led_off", "chime"], 15) is None:
            raise RuntimeError("the body never came up (logs in %s)" % body.out_dir)
        figures["heap_soak"] = bench_heap(body, soak_s)
    finally:
        body.stop()
    return figures


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--soak", type=float, default=30, help="seconds of soak (600 = the README figure)"
    )
    p.add_argument("--plans", type=int, default=20, help="16-step plans for the round-trip figure")
    p.add_argument("--heap", help="unix-port heap size of the boards, e.g. 64k")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    f = run(args.soak, args.plans, heap=args.heap)
    if args.json:
        print(json.dumps(f))
        return
    rt, fl, la, hs = f["round_trips"], f["bus_floor"], f["latency"], f["heap_soak"]
    uf = f["unix_floor"]
    print("command round trips (led_on/led_off, one paced cable):")
    print(
        "  %.1f /s, wire limit %.1f /s: ratio %.3f (min %.3f, all cycles pooled %.3f;"
        " target >= 0.90)"
        % (
            rt["round_trips_per_s"],
            rt["wire_limit_per_s"],
            rt["ratio"],
            rt["ratio_min"],
            rt["ratio_pooled"],
        )
    )
    for hop in ("organ", "master"):
        h = rt["%s_ms" % hop]
        if h:
            print(
                "  %-6s per step: median %.3f ms, mean %.3f, p90 %.3f, max %.3f"
                % (hop, h["median"], h["mean"], h["p90"], h["max"])
            )
    print("  the bus alone (test echo, no firmware): ratio %.3f" % fl["ratio"])
    print(
        "  the bus with a MicroPython echo process at each end (no protocol work): ratio %.3f"
        % uf["ratio"]
    )
    wire = 1000.0 / rt["wire_limit_per_s"]
    print(
        "  per cycle: %.3f ms on the wire; beyond it the bus alone %+.3f ms, with the echo"
        " processes %+.3f ms, the body %+.3f ms (ratio 0.90 allows %+.3f ms)"
        % (
            wire,
            fl["beyond_wire_ms"],
            uf["beyond_wire_ms"],
            rt["beyond_wire_ms"],
            wire / 0.90 - wire,
        )
    )
    print(
        "POST /plan to the first COMMAND byte on the cable: median %.2f ms, max %.2f ms (%d plans)"
        % (la["post_to_first_command_ms_median"], la["post_to_first_command_ms_max"], la["samples"])
    )
    print(
        "heap in use after a %.0f s soak (%d plans, faults on), gc.mem_alloc() after gc.collect():"
        % (hs["soak_s"], hs["plans"])
    )
    for role in ("master", "led", "speaker"):
        h = hs.get(role)
        if h:
            print(
                "  %-8s after boot %s B, after soak %s B, delta %s B (max %s B)"
                % (role, h["after_boot"], h["after_soak"], h["delta"], h["max"])
            )


if __name__ == "__main__":
    main()
