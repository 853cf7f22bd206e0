# Benchmark: LED organ command round trips (and its heap) as a real unix-port process under tools/sim.py board.
"""Plays master on the organ's TCP cable: ACK, then N led_on/led_off COMMANDs, each sent when the
previous COMMAND_RESP has arrived. Prints round trips per second, the wire limit for those frame
sizes at 115200 8N1 (10 bits a byte), and the board's heap in use before and after.

    .venv/bin/python tools/bench_organ.py [--count 500] [--no-pace]
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tools", "shim"), ROOT, os.path.join(ROOT, "lib")]

import frame  # noqa: E402
from command import encode_command  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--no-pace", action="store_true", help="no 115200 pacing on the cable")
    args = ap.parse_args()

    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    ls.settimeout(20)
    port = ls.getsockname()[1]
    cmd = [sys.executable, os.path.join(ROOT, "tools", "sim.py"), "board", "led"]
    cmd += ["--uart", "1=connect:127.0.0.1:%d" % port, "--heap-report-ms", "500"]
    cmd += ["--out", os.path.join(ROOT, "sim-out", "bench-organ")]
    if args.no_pace:
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
        for i in range(args.count):
            conn.sendall(on if i & 1 else off)
            while frame.COMMAND_RESP not in got:
                dec.feed(conn.recv(256))
            got.clear()
        dt = time.perf_counter() - t0
        time.sleep(1.2)
        h1 = heap[-1] if heap else None
    finally:
        proc.terminate()
        proc.wait(10)
    per = dt / args.count
    wire = (len(on) + len(frame.RESP_OK_FRAME)) * 10 / 115200
    print(
        "LED organ, %d led_on/led_off round trips%s: %.0f per s, %.2f ms each"
        % (args.count, " (no pacing)" if args.no_pace else " (paced 115200)", 1 / per, per * 1000)
    )
    print("wire limit %.2f ms per round trip: ratio %.2f" % (wire * 1000, wire / per))
    print("board heap in use: %s bytes before, %s after (gc.collect each report)" % (h0, h1))


if __name__ == "__main__":
    main()
