import micropython
@micropython.viper
def st(b: ptr8, v: int):
    w = ptr32(b)
    w[0] = v
@micropython.viper
def ld(b: ptr8) -> uint:
    w = ptr32(b)
    return uint(w[0])
@micropython.viper
def ldi(b: ptr8) -> int:
    w = ptr32(b)
    return w[0]
@micropython.viper
def cmp(b: ptr8) -> int:
    w = ptr32(b)
    x = w[0]
    if x > 5:
        return 1
    return 0
class D:
    def __init__(self):
        self.on = lambda a, b, c: print("cb", a, b, c)
        self.err = None
        self.m = bytearray(8)
    def boom(self, a, b, c):
        raise KeyError("x")
@micropython.viper
def call(d, k: int) -> int:
    x = 7
    d.on(k, x, d.m)
    return k + 1
b = bytearray(8)
st(b, -1)
print(ld(b), ldi(b), cmp(b), list(b[:4]))
st(b, 0x7fffffff)
print(ld(b), ldi(b), cmp(b))
d = D()
print(call(d, 3))
d.on = d.boom
try:
    call(d, 4)
except KeyError as e:
    print("raised", repr(e))
