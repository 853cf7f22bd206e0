# Millisecond and microsecond ticks: MicroPython's own, or on CPython the same 30-bit wrapping arithmetic as an ESP32-C6.
try:
    from time import ticks_add, ticks_diff, ticks_ms, ticks_us  # noqa: F401
except ImportError:  # CPython host
    import time

    PERIOD = 1 << 30  # ticks_ms() and ticks_us() wrap here on a 32-bit port (the C6)
    _HALF = PERIOD >> 1
    _MASK = PERIOD - 1

    def ticks_ms():
        return int(time.monotonic() * 1000) & _MASK

    def ticks_us():
        return int(time.monotonic() * 1000000) & _MASK

    def ticks_add(a, d):
        return (a + d) & _MASK

    def ticks_diff(a, b):
        return ((a - b + _HALF) & _MASK) - _HALF
