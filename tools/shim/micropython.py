# CPython stand-in for the `micropython` module, for host tools and tests only; never shipped to a board.


def const(x):
    return x


def heap_lock():
    return 0


def heap_unlock():
    return 0


def mem_info(*args):
    pass


def native(f):
    # the code emitters are MicroPython's compiler: on CPython the function runs as written
    # (only for code whose viper lines mean the same in Python: master/bus/port.py)
    return f


viper = native
