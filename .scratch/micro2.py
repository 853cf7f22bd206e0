import gc
from organbus import frame, rxscan
from organbus.ticks import ticks_diff
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

def nop(*a): pass
base = cnt(nop, 1, 2, 3, 4, 5, 6)
got = [0]
def on_frame(t, p, n):
    got[0] += 1
dec = frame.Decoder(on_frame)
junk = bytes(128)
j1 = bytes(1)
HB = frame.HEARTBEAT_FRAME
mem = dec._mem
print("nop6", base)
print("scan 128 junk", cnt(rxscan.scan, dec, mem, junk, 128, 0, 0) - base)
print("scan 1 junk", cnt(rxscan.scan, dec, mem, j1, 1, 0, 0) - base)
print("scan HB", cnt(rxscan.scan, dec, mem, HB, 8, 0, 0) - base)
b1 = cnt(nop, 1)
print("feed 1 junk", cnt(dec.feed, j1, 0) - b1)
print("feed HB", cnt(dec.feed, HB, 0) - b1)
print("word", cnt(rxscan.word, mem, 5) - cnt(nop, 1, 2))
