import gc
import micropython

@micropython.asm_rv32
def instret() -> uint:
    csrrs(a0, zero, 0xB02)

class C:
    def __init__(self):
        for i in range(20):
            setattr(self, "a%d" % i, i)
        self.x = 0
    def m(self):
        pass
    def attr100(self):
        for _ in range(100):
            self.x
    def inc100(self):
        for _ in range(100):
            self.x += 1
    def call100(self):
        for _ in range(100):
            self.m()
    def loop100(self):
        for _ in range(100):
            pass
    def local100(self):
        y = 0
        for _ in range(100):
            y += 1

G = 5
def glob100():
    for _ in range(100):
        G
def f(): pass
def fcall100():
    for _ in range(100):
        f()

@micropython.viper
def v(a: ptr8, b: int) -> int:
    return b
buf = bytearray(10)
def vcall100():
    for _ in range(100):
        v(buf, 1)
@micropython.viper
def v0() -> int:
    return 1
def v0call100():
    for _ in range(100):
        v0()

c = C()
def run(name, fn):
    gc.collect()
    best = None
    for _ in range(3):
        x = instret(); fn(); y = instret()
        d = (y - x) & 0xFFFFFFFF
        best = d if best is None or d < best else best
    print(name, best)
run("loop100", c.loop100)
run("local100", c.local100)
run("attr100", c.attr100)
run("inc100", c.inc100)
run("call100", c.call100)
run("glob100", glob100)
run("fcall100", fcall100)
run("vcall100 ptr8", vcall100)
run("v0call100", v0call100)
