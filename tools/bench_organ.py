# Benchmark: LED organ round trips, heap and allocation per round trip (unix port, tools/sim.py).
"""Plays master on the organ's TCP cable: ACK, then N led_on/led_off COMMANDs, each sent when the
previous COMMAND_RESP has arrived. Prints round trips per second, the wire limit for those frame
sizes at 115200 8N1 (10 bits a byte), and the board's heap in use before and after.

    .venv/bin/python tools/bench_organ.py [--count 500] [--no-pace]
    .venv/bin/python tools/bench_organ.py --alloc

--alloc instead runs the organ's Link inside one unix-port process, on a simulated UART whose
other end is a socket of the same process, and prints the bytes allocated per led_on round
trip (gc disabled) for the IO wait (poll_ms=0) and for polling (poll_ms=1).
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time

import toolpath  # the tree, lib/ and tools/ on sys.path
from organbus import frame
from organbus.command import encode_command

ROOT = toolpath.ROOT

_ALLOC = """
import asyncio, gc, socket, sys, time
import machine
from organbus import frame
from organbus.command import encode_command
from organs.led import LedOrgan, Light
from organs.runtime import Link
mode, port = int(sys.argv[1]), int(sys.argv[2])
uart = machine.UART(1)
c = socket.socket()
c.connect(socket.getaddrinfo("127.0.0.1", port)[0][-1])
c.setblocking(False)
class Pin:
    def value(self, x=None):
        pass
led = LedOrgan(Light(pin=Pin()), log=lambda line: None)
led.organ.start(time.ticks_ms())
link = Link(led.organ, uart, poll_ms=mode)
ON = frame.encode(frame.COMMAND, encode_command("led_on"))
buf = bytearray(64)
async def main():
    asyncio.create_task(link.reader())
    asyncio.create_task(link.writer())
    if not mode:
        asyncio.create_task(link.timers())
    await asyncio.sleep_ms(50)
    c.write(frame.ACK_FRAME)
    await asyncio.sleep_ms(50)
    gc.collect()
    gc.disable()
    a0, t0 = gc.mem_alloc(), time.ticks_us()
    for i in range(200):
        c.write(ON)
        while True:
            await asyncio.sleep_ms(mode)
            try:
                n = c.readinto(buf)
            except OSError:
                n = None
            if n:
                break
    a1, t1 = gc.mem_alloc(), time.ticks_us()
    gc.enable()
    print("%d %d" % ((a1 - a0) // 200, time.ticks_diff(t1, t0) // 200))
asyncio.run(main())
"""


def alloc():
    """Bytes allocated and microseconds per led_on round trip, for poll_ms 0 and 1."""
    from vbody import launch

    exe = launch.micropython_exe()
    figures = {}
    for mode in (0, 1):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        env = launch.sim_env({1: "listen:127.0.0.1:%d" % port})
        r = subprocess.run(
            [exe, "-c", _ALLOC, str(mode), str(port)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if r.returncode != 0:
            raise RuntimeError("alloc run (poll_ms=%d) failed: %s" % (mode, r.stderr.strip()))
        nbytes, us = map(int, r.stdout.split()[-2:])
        print(
            "poll_ms=%d: %d bytes allocated per round trip, %.2f ms each (in-process socket)"
            % (mode, nbytes, us / 1000)
        )
        figures["organ_alloc_bytes_poll%d" % mode] = nbytes
        figures["organ_alloc_rt_ms_poll%d" % mode] = round(us / 1000, 3)
    return figures


def round_trips(count=500, pace=True):
    """led_on/led_off round trips against a simulated LED board under tools/sim.py."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    ls.settimeout(20)
    port = ls.getsockname()[1]
    cmd = [sys.executable, os.path.join(ROOT, "tools", "sim.py"), "board", "led"]
    cmd += ["--uart", "1=connect:127.0.0.1:%d" % port, "--heap-report-ms", "500"]
    cmd += ["--out", os.path.join(ROOT, "sim-out", "bench-organ")]
    if not pace:
        cmd.append("--no-pace")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    heap = []

    def read_stdout():
        for line in proc.stdout:
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if obj.get("event") == "heap":
                    heap.append(obj["alloc"])

    threading.Thread(target=read_stdout, daemon=True).start()
    try:
        conn, _ = ls.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        got = []
        dec = frame.Decoder(lambda t, p, n: got.append(t))
        conn.sendall(frame.ACK_FRAME)
        time.sleep(1.5)
        h0 = heap[-1] if heap else None
        on = frame.encode(frame.COMMAND, encode_command("led_on"))
        off = frame.encode(frame.COMMAND, encode_command("led_off"))
        t0 = time.perf_counter()
        for i in range(count):
            conn.sendall(on if i & 1 else off)
            while frame.COMMAND_RESP not in got:
                data = conn.recv(256)
                if not data:
                    raise RuntimeError("the LED board closed the cable")
                dec.feed(data)
            got.clear()
        dt = time.perf_counter() - t0
        time.sleep(1.2)
        h1 = heap[-1] if heap else None
    finally:
        proc.terminate()
        proc.wait(10)
        ls.close()
    per = dt / count
    wire = (len(on) + len(frame.RESP_OK_FRAME)) * 10 / 115200
    print(
        "LED organ, %d led_on/led_off round trips%s: %.0f per s, %.2f ms each"
        % (count, " (paced 115200)" if pace else " (no pacing)", 1 / per, per * 1000)
    )
    print("wire limit %.2f ms per round trip: ratio %.2f" % (wire * 1000, wire / per))
    print("board heap in use: %s bytes before, %s after (gc.collect each report)" % (h0, h1))
    key = "organ_rt_" if pace else "organ_rt_nopace_"
    return {
        key + "ms": round(per * 1000, 3),
        key + "wire_ratio": round(wire / per, 3),
        "organ_heap_before": h0,
        "organ_heap_after": h1,
    }


def run():
    """tools/bench.py area `organ`: paced round trips and the allocation per round trip."""
    figures = round_trips()
    figures.update(alloc())
    return figures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--no-pace", action="store_true", help="no 115200 pacing on the cable")
    ap.add_argument("--alloc", action="store_true", help="bytes allocated per round trip")
    args = ap.parse_args()
    if args.alloc:
        alloc()
    else:
        round_trips(args.count, not args.no_pace)


if __name__ == "__main__":
    main()
