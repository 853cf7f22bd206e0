# Plain loopback HTTP for host tools and tests: one request read to its end, and SSE items out of a byte buffer.
import json
import socket


def request(addr, method, path, obj=None, headers=None, timeout=10):
    """(status, headers dict with lowercase names, body bytes) of one request on a fresh
    connection to `addr` (host, port); `obj` is sent as JSON; the answer is read to its end."""
    body = b"" if obj is None else json.dumps(obj).encode()
    head = "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n" % (method, path, len(body))
    for k, v in (headers or {}).items():
        head += "%s: %s\r\n" % (k, v)
    s = socket.create_connection(addr, timeout=timeout)
    try:
        s.sendall(head.encode() + b"\r\n" + body)
        data = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            data += c
    finally:
        s.close()
    head, _, content = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    hdrs = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return int(lines[0].split(" ")[1]), hdrs, content


def open_stream(addr, path="/events", headers=None, rcvbuf=None, timeout=10):
    """A connected socket that has sent GET `path` asking for an event stream."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    s.connect(addr)
    head = "GET %s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n" % path
    for k, v in (headers or {}).items():
        head += "%s: %s\r\n" % (k, v)
    s.sendall(head.encode() + b"\r\n")
    return s


def sse_items(buf):
    """(items, rest, comments): the complete SSE items at the front of `buf` as (event, data
    dict) pairs, the bytes after the last complete item, and how many comment lines were seen."""
    items, comments = [], 0
    while True:
        i = buf.find(b"\n\n")
        if i < 0:
            return items, buf, comments
        block, buf = buf[:i], buf[i + 2 :]
        event, data = None, None
        for line in block.decode("utf-8", "replace").split("\n"):
            if line.startswith(":"):
                comments += 1
            elif line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
        if event is not None:
            items.append((event, data))
