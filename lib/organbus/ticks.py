# Millisecond ticks: MicroPython's own, or on CPython the same 30-bit wrapping arithmetic as an ESP32-C6.
try:
    from time import ticks_add, ticks_diff, ticks_ms  # noqa: F401
except ImportError:  # CPython host
    import time

    PERIOD = 1 << 30  # time.ticks_ms() wraps here on a 32-bit port (the C6)
    _HALF = PERIOD >> 1

    def ticks_ms():
        return int(time.monotonic() * 1000) & (PERIOD - 1)

    def ticks_add(a, d):
        return (a + d) & (PERIOD - 1)

    def ticks_diff(a, b):
        return ((a - b + _HALF) & (PERIOD - 1)) - _HALF
