# CPython stand-in for the `micropython` module, for host tools and tests only; never shipped to a board.


def const(x):
    return x


def heap_lock():
    return 0


def heap_unlock():
    return 0


def mem_info(*args):
    pass
