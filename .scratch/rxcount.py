# Scratch: instruction counts of the decoder on the bench mix (RV32 image).
import gc
import bench
from organbus import frame
from organbus.crc16 import crc16, crc16_raw, TABLE
import micropython


@micropython.asm_rv32
def instret() -> uint:
    csrrs(a0, zero, 0xB02)  # minstret, low word


def _pair():
    a = instret()
    b = instret()
    return (b - a) & 0xFFFFFFFF


PAIR = min(_pair() for _ in range(8))  # what a back-to-back instret() pair itself costs


def count(fn, *args):
    """(instructions spent in fn(*args), its result), the counter's own cost taken off."""
    a = instret()
    r = fn(*args)
    b = instret()
    return ((b - a) & 0xFFFFFFFF) - PAIR, r


rnd = bench.Rand(7)
frames, stream = bench.build_mix(rnd, 20)
chunks = bench.chunked(rnd, stream)
got = [0]


def on_frame(ftype, payload, n):
    got[0] += 1


dec = frame.Decoder(on_frame)


def run():
    now = 0
    for ch in chunks:
        dec.feed(ch, now)
        now += 1
    dec.idle(now + 100)


run()
assert got[0] >= len(frames)
gc.collect()
n, _ = count(run)
# loop overhead alone
def empty():
    now = 0
    for ch in chunks:
        now += 1
gc.collect()
e, _ = count(empty)
buf = bytearray(1024)
c, _ = count(crc16_raw, 0xFFFF, buf, TABLE, 0, 1024)
print("frames", len(frames), "bytes", len(stream), "reads", len(chunks))
print("decoder insn", n - e, "per byte %.1f" % ((n - e) / len(stream)), "per frame %.0f" % ((n - e) / len(frames)))
ipb = (n - e) / len(stream)
print("c6_rx_line_rate_multiple at CPI 2.0: %.1f" % (160e6 / (2.0 * ipb) / 23040))
print("crc insn/byte %.2f" % (c / 1024))
