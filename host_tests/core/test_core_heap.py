# The receive path allocates nothing: 10,000 heartbeats and command responses (plus junk, corrupt
# frames and abandoned candidates) decoded on the unix port under micropython.heap_lock().
import json

import pytest

from support import run_micropython

FRAMES = 10000

SCRIPT = r"""
import gc, json, sys
from array import array
import micropython
from organbus import frame

N = %(n)d
counts = array("I", [0] * 256)
status = array("I", [0, 0])


def on_frame(ftype, payload, n):
    counts[ftype] += 1
    if ftype == 0x11:
        status[payload[0] & 1] += 1


dec = frame.Decoder(on_frame)
# one cycle as it comes off a link: frames, junk, a frame with a bad CRC, a corrupt header
bad = bytearray(frame.HEARTBEAT_FRAME)
bad[5] ^= 0x40
cycle = (
    frame.HEARTBEAT_FRAME + frame.RESP_OK_FRAME + b"\x00\x13" + frame.HEARTBEAT_FRAME
    + frame.RESP_FAIL_FRAME + bytes(bad) + frame.HEARTBEAT_FRAME + b"\xaa\x03\x10"
)
GOOD_PER_CYCLE = 5
rx = bytearray(64)
tx = bytearray(64)
payload = bytearray(b"\x00")
L = len(cycle)


def run(cycles):
    pos = 0
    now = 0
    left = cycles * L
    k = 1
    while left:
        # a UART read of 1..61 bytes, copied byte by byte (a slice would allocate)
        k = (k * 7 + 3) %% 61 + 1
        if k > L - pos:
            k = L - pos  # a read ends where the line goes quiet
        for i in range(k):
            rx[i] = cycle[pos]
            pos += 1
            if pos == L:
                pos = 0
        dec.feed(rx, now, k)
        left -= k
        now += 1
        if pos == 0:
            now += 60  # the line goes quiet after each cycle: the cut-off header is abandoned
            dec.idle(now)
        frame.encode_into(tx, 0x11, payload, 1)


cycles = N // GOOD_PER_CYCLE
err = before = after = None  # globals exist before the measurement (a new one grows the dict)
run(2)  # warm up (first calls may allocate caches)
for i in range(256):
    counts[i] = 0
status[0] = status[1] = 0
dec.reset_counters()
gc.collect()
before = gc.mem_alloc()
err = None
micropython.heap_lock()
try:
    run(cycles)
except Exception as e:
    err = e
micropython.heap_unlock()
after = gc.mem_alloc()
if err is not None:
    sys.print_exception(err)
out = {
    "error": None if err is None else repr(err),
    "heartbeats": counts[3],
    "ok": status[0],
    "fail": status[1],
    "alloc": after - before,
    "cycles": cycles,
}
c = dec.counters()
for k in frame.COUNTER_NAMES:
    out[k] = c[k]
print(json.dumps(out))
"""


@pytest.mark.parametrize("heapsize", [None, "64k"])
def test_decode_under_heap_lock(heapsize):
    r = run_micropython(["-c", SCRIPT % {"n": FRAMES}], heapsize=heapsize, timeout=300)
    assert r.returncode == 0, "unix port run failed:\n%s%s" % (r.stdout, r.stderr)
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["error"] is None, "allocation under heap_lock: %s\n%s" % (res["error"], r.stdout)
    cycles = res["cycles"]
    assert res["heartbeats"] == 3 * cycles, "heartbeats decoded: %r" % res
    assert res["ok"] == cycles and res["fail"] == cycles, "command responses decoded: %r" % res
    assert res["heartbeats"] + res["ok"] + res["fail"] == FRAMES, "10,000 frames: %r" % res
    assert res["frames"] == FRAMES, "frames counter: %r" % res
    assert res["crc_errors"] == cycles, "one bad CRC per cycle: %r" % res
    assert res["abandoned"] == cycles, "one abandoned header per cycle: %r" % res
    assert res["alloc"] == 0, "the heap grew by %d bytes" % res["alloc"]
