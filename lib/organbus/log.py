# Event log lines (docs/DESIGN.md): one JSON object per line, key "event" first, on every interpreter.
import json


def line(event, pairs=()):
    """The log line for `event` with (key, value) pairs, in that order (a dict's order is not
    kept on MicroPython, so no dict is ever dumped whole)."""
    parts = ['{"event": ' + json.dumps(event)]
    for k, v in pairs:
        parts.append(json.dumps(k) + ": " + json.dumps(v))
    return ", ".join(parts) + "}"


def write(text):
    """Write one line built by line() (built once ahead where the path must not allocate)."""
    print(text)


def emit(event, pairs=()):
    write(line(event, pairs))


def crash(e):
    """The crash line of a board about to reset: the exception's type and text, then its trace
    where the interpreter can print one."""
    emit("crash", [("reason", "%s: %s" % (type(e).__name__, e))])
    print_exception(e)


def print_exception(e):
    try:
        from sys import print_exception as _pe  # MicroPython
    except ImportError:  # CPython
        import traceback

        traceback.print_exception(type(e), e, e.__traceback__)
        return
    _pe(e)
