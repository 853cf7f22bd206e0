# Guest side: exact instruction counts on the RV32 image (minstret is the executed count under -icount).
import micropython


@micropython.asm_rv32
def instret() -> uint:
    csrrs(a0, zero, 0xB02)  # minstret, low word


@micropython.asm_rv32
def instret30() -> uint:
    # minstret's low 30 bits: always a small int, so reading it allocates nothing (a uint of
    # 2**30 or more becomes a long int on the heap, after the counter was read: inside a
    # count's window, at a cost that depends on the heap)
    csrrs(a0, zero, 0xB02)
    slli(a0, a0, 2)
    srli(a0, a0, 2)


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
    a = instret30()
    b = instret30()
    return (b - a) & 0x3FFFFFFF


PAIR = min(_pair() for _ in range(8))  # what a back-to-back instret30() pair itself costs
PAIR64 = min(-instret64() + instret64() for _ in range(8))  # and an instret64() pair


def count(fn, *args):
    """(instructions spent in fn(*args), its result), the counter's own cost taken off.
    Up to three arguments are passed as a plain call: `fn(*args)` allocates the argument
    array on the heap inside the window, a cost that depends on the heap's layout. For
    runs under 2**30 instructions (count64 beyond)."""
    k = len(args)
    if k == 0:
        a = instret30()
        r = fn()
        b = instret30()
    elif k == 1:
        x = args[0]
        a = instret30()
        r = fn(x)
        b = instret30()
    elif k == 2:
        x, y = args
        a = instret30()
        r = fn(x, y)
        b = instret30()
    elif k == 3:
        x, y, z = args
        a = instret30()
        r = fn(x, y, z)
        b = instret30()
    else:
        a = instret30()
        r = fn(*args)
        b = instret30()
    return ((b - a) & 0x3FFFFFFF) - PAIR, r


def count64(fn, *args):
    """count() for runs that may pass 2**32 instructions."""
    a = instret64()
    r = fn(*args)
    b = instret64()
    return b - a - PAIR64, r
