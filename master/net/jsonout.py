# A JSON message for the network built in pieces of at most PIECE bytes: no large block of the heap for a large message.
#
# json.dumps of a whole tools/list page (up to 8 KB) asks the heap for one block that long, and
# a master's heap at the documented 80 KB is fragmented into far smaller free runs
# (docs/links.md). `pieces(obj)` walks the value and packs its JSON text into bytearrays of
# PIECE bytes (only a leaf, one string or number, is dumped whole); the WebSocket client sends
# the list as one message (master/net/ws.py). join(pieces) is json.dumps's text.
import sys

import json

from micropython import const

_MP = sys.implementation.name == "micropython"

PIECE = const(256)


class _Pieces:
    def __init__(self):
        self.out = []
        self.cur = bytearray(PIECE)
        self.n = 0

    def add(self, s):
        b = memoryview(s) if _MP else s.encode()  # MicroPython: a str's UTF-8 bytes, no copy
        i = 0
        end = len(b)
        while i < end:
            k = min(PIECE - self.n, end - i)
            self.cur[self.n : self.n + k] = b[i : i + k]
            self.n += k
            i += k
            if self.n == PIECE:
                self.out.append(self.cur)
                self.cur = bytearray(PIECE)
                self.n = 0

    def walk(self, obj):
        if isinstance(obj, dict):
            self.add("{")
            sep = ""
            for k in obj:
                self.add(sep)
                self.add(json.dumps(k))
                self.add(": ")
                self.walk(obj[k])
                sep = ", "
            self.add("}")
        elif isinstance(obj, (list, tuple)):
            self.add("[")
            sep = ""
            for v in obj:
                self.add(sep)
                self.walk(v)
                sep = ", "
            self.add("]")
        else:
            self.add(json.dumps(obj))


def pieces(obj):
    """The JSON text of `obj` as a list of bytes-like pieces of at most PIECE bytes each."""
    p = _Pieces()
    p.walk(obj)
    if p.n:
        p.out.append(memoryview(p.cur)[: p.n])
    return p.out


def join(parts):
    """The message as one bytes (tests, logs): json.dumps's text, UTF-8."""
    return b"".join([bytes(p) for p in parts])


def size(parts):
    """Bytes of a message in pieces."""
    n = 0
    for p in parts:
        n += len(p)
    return n
