# A JSON document written in small pieces through one buffer: an answer is never built whole on a small heap.
import asyncio
import json
import sys

from micropython import const

from master.bus.pairs import GENERATOR, Pairs

_MP = sys.implementation.name == "micropython"
OUT = const(512)  # bytes of a JSON answer given to the socket at once (never built whole)


class Each:
    """A JSON array made afresh at each pass: fn(x) for x in items, one at a time (the menu's
    entries, master/links/routes.py): json_pieces walks it like a list, twice with json_length, and
    only one entry's objects exist at once."""

    def __init__(self, fn, items):
        self.fn = fn
        self.items = items

    def __iter__(self):
        for x in self.items:
            yield self.fn(x)


_OPEN = {
    dict: (b"{", b"}"),
    Pairs: (b"{", b"}"),
    list: (b"[", b"]"),
    tuple: (b"[", b"]"),
    Each: (b"[", b"]"),
    GENERATOR: (b"[", b"]"),
}


WRITTEN = tuple(_OPEN)  # what write_json takes: the types an answer is written in pieces for


def json_pieces(obj):
    """The bytes of json.dumps(obj) as a generator of small pieces (a container's brackets,
    keys, separators and each scalar): a large answer (the menu) is never one string, so a
    fragmented heap without one large free block still serves it. A `bytes` (or memoryview)
    value is JSON text already (the /status ring's entries, kept as text) and goes out as it
    is; a `Pairs` (master/bus/pairs.py) is a JSON object as its (key, value) pairs, and a
    generator an array made as it is walked."""
    # One generator with a stack of (container, iterator): a nested generator per level would
    # take a frame of some 170 bytes each, more than a fragmented 64 KB heap has in one block.
    stack = []
    v = obj
    while True:
        t = type(v)
        if t is bytes or t is memoryview:
            yield v
        elif t not in _OPEN:
            yield json.dumps(v).encode()
        else:
            yield _OPEN[t][0]
            stack.append(v)
            stack.append(iter(v))
            first = True
        while stack:  # the next value, after the brackets of what it closes
            c = stack[-2]
            try:
                v = next(stack[-1])
            except StopIteration:
                stack.pop()
                stack.pop()
                yield _OPEN[type(c)][1]
                first = False
                continue
            if not first:
                yield b", "
            first = False
            t = type(c)
            if t is dict or t is Pairs:
                if t is Pairs:
                    k, v = v
                else:
                    k, v = v, c[v]
                yield json.dumps(k if isinstance(k, str) else str(k)).encode()
                yield b": "
            break
        else:
            return


def json_length(obj):
    """Bytes of json.dumps(obj).encode(), counted piece by piece (for Content-Length)."""
    n = 0
    for p in json_pieces(obj):
        n += len(p)
    return n


def made_as_walked(obj):
    """True for a document made as it is walked (Pairs of a function: /status), whose two
    walks (json_length, write_json) each make it again."""
    return type(obj) is Pairs and type(obj.pairs) is not list


def _held(writer):
    """True unless `writer` is MicroPython's stream holding nothing: its drain() then only
    yields, with no need of the timeout (asyncio.wait_for takes a task and a coroutine, some
    300 bytes, at every piece of an answer)."""
    return not _MP or bool(getattr(writer, "out_buf", True))


async def write_json(writer, obj, timeout_s, buf=None):
    """Write obj's JSON to an asyncio writer through one buffer (`buf`, else a new one of OUT
    bytes), draining (within `timeout_s`) each time it fills: at most that much is ever held
    for the socket. MicroPython's writer copies what the socket did not take before write()
    returns, so one buffer serves every connection (HttpServer.out); CPython's may keep a view
    of it, so there each answer gets its own.

    A document made as it is walked (Pairs of a function: /status) is counted by one walk
    (Content-Length) and written by this one: no other task may run between them (a frame
    counted meanwhile would make the text longer than its length), so it is written without
    a pause while the socket takes it all (a board's socket takes /status whole)."""
    if buf is None:
        buf = bytearray(OUT)
    live = made_as_walked(obj)
    size = len(buf)
    mv = memoryview(buf)
    n = 0
    for p in json_pieces(obj):
        k = len(p)
        if n + k > size:
            if n:
                writer.write(mv[:n])
                if not live or _held(writer):
                    await _drain(writer, timeout_s)
                n = 0
            if k > size:  # a long scalar (a description): as it is
                writer.write(p)
                if not live or _held(writer):
                    await _drain(writer, timeout_s)
                continue
        mv[n : n + k] = p
        n += k
    if n:
        writer.write(mv[:n])
    await _drain(writer, timeout_s)


async def _drain(writer, timeout_s):
    # wait_for (a task and a timer) only when the stream holds bytes the socket has not taken
    if _held(writer):
        await asyncio.wait_for(writer.drain(), timeout_s)
    else:
        await writer.drain()
