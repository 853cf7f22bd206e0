import micropython, sys
@micropython.viper
def sx(x: int, s: int) -> int:
    return (x << s) >> s
print(sys.maxsize, sx(-5, 2), sx(0x7fffffff, 2), sx(3, 2), sx(-(1<<29)-1, 2))
@micropython.viper
def d32(now: int, mem: ptr8, s: int) -> int:
    w = ptr32(mem)
    x = now - w[0]
    return (x << s) >> s
import struct
b = bytearray(4)
@micropython.viper
def st(mem: ptr8, v: int):
    w = ptr32(mem)
    w[0] = v
S = 2 if sys.maxsize < (1 << 32) else 32
for last, now in ((2**30 - 20, 30), ((1<<62) - 20, 30), (5, 100), (100, 5)):
    st(b, last)
    print(last, now, d32(now, b, S))
