# Guest side: exact instruction counts on the RV32 image (minstret is the executed count under -icount).
import micropython


@micropython.asm_rv32
def instret() -> uint:
    csrrs(a0, zero, 0xB02)  # minstret, low word


@micropython.asm_rv32
def instreth() -> uint:
    csrrs(a0, zero, 0xB82)  # minstreth, high word


def instret64():
    """The whole 64-bit count (allocates: not for hot paths)."""
    while True:
        h = instreth()
        lo = instret()
        if instreth() == h:
            return (h << 32) | lo


def _pair():
    a = instret()
    b = instret()
    return (b - a) & 0xFFFFFFFF


PAIR = min(_pair() for _ in range(8))  # what a back-to-back instret() pair itself costs


def count(fn, *args):
    """(instructions spent in fn(*args), its result), the counter's own cost taken off."""
    a = instret()
    r = fn(*args)
    b = instret()
    return ((b - a) & 0xFFFFFFFF) - PAIR, r


def count64(fn, *args):
    """count() for runs that may pass 2**32 instructions."""
    a = instret64()
    r = fn(*args)
    b = instret64()
    return b - a - PAIR, r
