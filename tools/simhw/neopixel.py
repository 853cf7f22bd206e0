# Simulated `neopixel` for the unix port: the WS2812 colour of pixel 0 goes to the pin log on write().
import machine


class NeoPixel:
    ORDER = (1, 0, 2, 3)  # GRB on the wire, as micropython-lib's neopixel

    def __init__(self, pin, n, bpp=3, timing=1):
        self.pin = pin
        self.n = n
        self.bpp = bpp
        self.buf = bytearray(n * bpp)
        self._last = -1
        pin.init(pin.OUT)

    def __len__(self):
        return self.n

    def __setitem__(self, i, v):
        off = i * self.bpp
        for k in range(self.bpp):
            self.buf[off + self.ORDER[k]] = v[k]

    def __getitem__(self, i):
        off = i * self.bpp
        if self.bpp == 3:
            return (self.buf[off + 1], self.buf[off], self.buf[off + 2])
        return (self.buf[off + 1], self.buf[off], self.buf[off + 2], self.buf[off + 3])

    def fill(self, v):
        for i in range(self.n):
            self[i] = v

    def write(self):
        b = self.buf
        key = (b[1] << 16) | (b[0] << 8) | b[2]
        if key != self._last:
            self._last = key
            machine.neopixel_changed(self.pin, b[1], b[0], b[2])
