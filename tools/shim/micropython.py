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


def _cast(buf):
    return buf


# viper's pointer casts as built-ins: the same buffer, for viper code whose lines mean the same
# in Python (ptr8 over bytes or a bytearray, ptr32 over an array("i"): master/bus/recent.py,
# registry.py), so such code is one source on every interpreter
import builtins  # noqa: E402

for _name in ("ptr8", "ptr16", "ptr32"):
    if not hasattr(builtins, _name):
        setattr(builtins, _name, _cast)
