import gc
import micropython
from organbus import frame
from organbus.command import encode_command, name_is

@micropython.asm_rv32
def instret() -> uint:
    csrrs(a0, zero, 0xB02)

def cnt(fn, *a):
    gc.collect()
    x = instret(); fn(*a); y = instret()
    return (y - x) & 0xFFFFFFFF

class _Uart:
    def __init__(self):
        self.rx = bytearray(64); self.n = 0; self.tx = bytearray(256); self.tx_n = 0
    def inject(self, data):
        self.rx[: len(data)] = data; self.n = len(data)
    def readinto(self, buf):
        n = self.n
        if not n: return None
        for i in range(n): buf[i] = self.rx[i]
        self.n = 0
        return n
    def write(self, f):
        k = len(f); self.tx[self.tx_n : self.tx_n + k] = f; self.tx_n += k
        return k
class _Pin:
    def __init__(self): self.level = 0
    def value(self, x=None):
        if x is None: return self.level
        self.level = x
from organs.led import LedOrgan, Light
from organs.runtime import Link
pin = _Pin()
led = LedOrgan(Light(pin=pin), log=lambda line: None)
led.organ.start(0)
led.organ.feed(frame.ACK_FRAME, 1000)
uart = _Uart()
link = Link(led.organ, uart, poll_ms=1)
on = frame.encode(frame.COMMAND, encode_command("led_on"))
off = frame.encode(frame.COMMAND, encode_command("led_off"))
link.write_once(1000)
now = 1050
for cmd, nm in ((off, "off"), (on, "on"), (off, "off"), (on, "on")):
    uart.tx_n = 0
    uart.inject(cmd)
    now += 50
    a = cnt(link.read_once, now)
    b = cnt(link.write_once, now)
    print(nm, "read_once", a, "write_once", b)
uart.inject(on)
print("readinto alone", cnt(uart.readinto, link._rx))
print("organ.poll", cnt(led.organ.poll, now))
print("dec.idle", cnt(led.organ._decoder.idle, now))
print("pending", cnt(led.organ._decoder.pending))
print("name_is", cnt(name_is, on[5:], 7, b"led_on"))
print("light.set", cnt(led.light.set, True))
print("led.poll", cnt(led.poll, now))
print("flush", cnt(link.flush))
org = led.organ
pv = memoryview(on)[5:]
print("_command", cnt(org._command, pv, 7, now))
print("led_on", cnt(led.led_on, (), None, now))
uart.tx_n = 0
print("_queue+flush", cnt(org._queue, frame.RESP_OK_FRAME))
print("log", cnt(org._log, "x"))
print("organ.feed", cnt(org.feed, bytes(1), now, 1))
uart.tx_n = 0
print("uart.write", cnt(uart.write, frame.RESP_OK_FRAME))
from organbus.ticks import ticks_diff
print("ticks_diff", cnt(ticks_diff, 5, 3))
