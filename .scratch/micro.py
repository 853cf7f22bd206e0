import gc
from organbus import frame
from organbus.crc16 import crc16_raw, TABLE
import micropython

@micropython.asm_rv32
def instret() -> uint:
    csrrs(a0, zero, 0xB02)

def cnt(fn, *a):
    gc.collect()
    best = None
    for _ in range(3):
        x = instret(); fn(*a); y = instret()
        d = (y - x) & 0xFFFFFFFF
        best = d if best is None or d < best else best
    return best

def nop(): pass
base = cnt(nop)
got = [0]
def on_frame(t, p, n):
    got[0] += 1
dec = frame.Decoder(on_frame)
HB = frame.HEARTBEAT_FRAME
print("nop", base)
print("feed HB", cnt(dec.feed, HB, 0) - base)
junk = bytes(128)
print("feed 128 junk (no AA)", cnt(dec.feed, junk, 0) - base)
big = frame.encode(frame.COMMAND, bytes(120))
print("feed 128-byte frame", cnt(dec.feed, big, 0) - base)
buf = bytearray(520)
print("find_sof 128", cnt(frame._find_sof, junk, 0, 128) - base)
print("copy 128", cnt(frame._copy, buf, 0, junk, 0, 128) - base)
print("crc 128", cnt(crc16_raw, 0xFFFF, buf, TABLE, 1, 125) - base)
print("on_frame", cnt(on_frame, 3, dec.payload, 0) - base)
def halves():
    dec.feed(big[:64], 0); dec.feed(big[64:], 0)
print("two halves", cnt(halves) - base)
from organbus.ticks import ticks_diff
print("ticks_diff", cnt(ticks_diff, 5, 3) - base)
