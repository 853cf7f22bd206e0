# Guest side: exact instruction counts on the RV32 image (minstret is the executed count under -icount).
import micropython


@micropython.asm_rv32
def instret() -> uint:
    csrrs(a0, zero, 0xB02)  # minstret, low word


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
