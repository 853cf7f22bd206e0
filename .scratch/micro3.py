import gc
from organbus import frame, rxscan
import micropython
import bench

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
got = [0]
def on_frame(t, p, n):
    got[0] += 1
dec = frame.Decoder(on_frame)
mem = dec._mem
j1 = bytes(1)
junk = bytes(128)
HB = frame.HEARTBEAT_FRAME
b6 = cnt(nop, 1, 2, 3, 4, 5, 6)
b2 = cnt(nop, 1, 2)
print("run 1 junk", cnt(rxscan.run, dec, mem, j1, 1, 0, 0) - b6)
print("run 128 junk", cnt(rxscan.run, dec, mem, junk, 128, 0, 0) - b6)
print("run HB", cnt(rxscan.run, dec, mem, HB, 8, 0, 0) - b6)
print("on_frame", cnt(on_frame, 1, 2, 3) - cnt(nop, 1, 2, 3))
print("feed 1 junk (minus nop2)", cnt(dec.feed, j1, 0) - b2)
print("feed HB", cnt(dec.feed, HB, 0) - b2)
big = frame.encode(frame.COMMAND, bytes(120))
print("run 128-frame", cnt(rxscan.run, dec, mem, big, 128, 0, 0) - b6)
class Null:
    def feed(self, ch, now): pass
nd = Null()
print("null feed call", cnt(nd.feed, j1, 0) - b2)
print("nop6 call", b6, "nop2", b2)
