# Benchmark: bursts of concurrent HTTP clients against the virtual body's master (unix port); issue 17's stall.
"""Every run opens CLIENTS connections at once to the master's HTTP port (loopback), each sends
`GET /status` and reads its answer; a client counts as answered when a status line (200, 429,
503, ...) arrives within --deadline seconds. Prints one line per run and a summary, plus the
kernel's listen-queue counters (ListenOverflows / ListenDrops from /proc/net/netstat): when the
accept queue (the listen backlog) is full, Linux drops the client's final ACK, the client thinks
it is connected and sends its request, and the server only learns of it when its SYN-ACK is
retransmitted (1, 3, 7, 15, 31 s): those clients wait 1 to 31 s for an answer.

    python tools/bench_stall.py [--runs 20] [--clients 300] [--backlog N] [--deadline 30]

--backlog sets the master's `http.backlog` (default: httpd's DEFAULTS); --backlog 5 is the
old value (MicroPython's asyncio default) and reproduces the stall. Exit status 1 when any
client of any run got no answer within the deadline.
"""

import argparse
import asyncio
import sys
import tempfile
import time

import toolpath  # noqa: F401  (the tree, lib/ and tools/ on sys.path)
from vbody.body import VirtualBody


def listen_counters():
    """(ListenOverflows, ListenDrops) of the whole machine, or None off Linux."""
    try:
        with open("/proc/net/netstat") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for i in range(0, len(lines) - 1, 2):
        if lines[i].startswith("TcpExt:"):
            names, vals = lines[i].split()[1:], lines[i + 1].split()[1:]
            d = dict(zip(names, vals))
            return int(d.get("ListenOverflows", 0)), int(d.get("ListenDrops", 0))
    return None


async def one_client(host, port, deadline):
    t0 = time.monotonic()
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection(host, port), deadline)
    except (OSError, asyncio.TimeoutError):
        return None, time.monotonic() - t0, "connect"
    connected = time.monotonic() - t0
    try:
        w.write(b"GET /status HTTP/1.1\r\nHost: body\r\n\r\n")
        left = deadline - (time.monotonic() - t0)
        line = await asyncio.wait_for(r.readline(), max(left, 0.01))
        if not line.startswith(b"HTTP/1.1 "):
            return None, time.monotonic() - t0, "closed"
        status = int(line[9:12])
        try:
            await asyncio.wait_for(r.read(), 5)
        except (OSError, asyncio.TimeoutError):
            pass
        return status, time.monotonic() - t0, "%.2f" % connected
    except asyncio.TimeoutError:
        return None, time.monotonic() - t0, "silent"  # connected, no answer in time
    except OSError:
        return None, time.monotonic() - t0, "reset"
    finally:
        w.close()


async def burst(host, port, n, deadline):
    return await asyncio.gather(*[one_client(host, port, deadline) for _ in range(n)])


def run(args):
    cfg = {"http": {"backlog": args.backlog}} if args.backlog is not None else None
    out = tempfile.mkdtemp(prefix="bench-stall-")
    body = VirtualBody(out_dir=out, master_config=cfg).start()
    failed = 0
    worst = 0.0
    try:
        if not body.wait_http(20):
            print("bench_stall: the master's HTTP port did not open")
            return 2
        host, port = body.http
        for k in range(args.runs):
            c0 = listen_counters()
            res = asyncio.run(burst(host, port, args.clients, args.deadline))
            c1 = listen_counters()
            times = sorted(t for s, t, _ in res if s is not None)
            bad = [(why, round(t, 1)) for s, t, why in res if s is None]
            counts = {}
            for s, _, _ in res:
                counts[s] = counts.get(s, 0) + 1
            slow = max(times) if times else 0.0
            worst = max(worst, slow)
            over = "-" if c0 is None else "%d/%d" % (c1[0] - c0[0], c1[1] - c0[1])
            print(
                "run %2d: %d clients, answered %d (%s), slowest %.2f s, median %.2f s, "
                "no answer %d %s, listen overflows/drops %s"
                % (
                    k + 1,
                    args.clients,
                    len(times),
                    ", ".join("%s: %d" % (s, c) for s, c in sorted(counts.items(), key=str)),
                    slow,
                    times[len(times) // 2] if times else 0.0,
                    len(bad),
                    bad[:5] if bad else "",
                    over,
                )
            )
            failed += bool(bad)
            time.sleep(args.pause)
    finally:
        body.stop()
    print(
        "bench_stall: %d runs of %d clients, backlog %s: %d runs with a client unanswered in "
        "%.0f s; slowest answer %.2f s"
        % (args.runs, args.clients, args.backlog or "default", failed, args.deadline, worst)
    )
    return 1 if failed else 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--clients", type=int, default=300)
    p.add_argument("--backlog", type=int, default=None)
    p.add_argument("--deadline", type=float, default=30.0)
    p.add_argument("--pause", type=float, default=1.5, help="seconds between runs")
    args = p.parse_args(argv)
    if args.runs < 1 or args.clients < 1 or args.deadline <= 0:
        p.error("--runs, --clients and --deadline must be positive")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
