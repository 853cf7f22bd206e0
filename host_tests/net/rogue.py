# A rogue HTTP server on loopback (CPython, a background thread): endless lines, endless heads, trickles, recorded requests.
import asyncio
import hashlib
import base64
import json
import threading

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class Rogue:
    """`with Rogue() as r:` serves on r.port; the request path picks the behaviour:

    /line10m      a header line of 10 MB without its end, as fast as the client reads
    /headers      a head of 100,000 short header lines
    /trickle      a status line, then one byte every 50 ms for ever
    /silent       takes the request and never answers
    /record/...   keeps the request's head (r.heads) and answers 400
    /ota?u=N      a xiaozhi discovery answer whose websocket url/token are r.answers[N]
    /ws           a real WebSocket upgrade (101), then `r.after_upgrade` bytes, then silence
    """

    def __init__(self):
        self.port = None
        self.heads = []  # raw request heads of /record, in order
        self.answers = []  # (url, token) handed out by /ota
        self.after_upgrade = b""
        self._loop = None
        self._ready = threading.Event()

    def __enter__(self):
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("rogue server did not start")
        return self

    def __exit__(self, *exc):
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5)

    def url(self, path, scheme="http"):
        return "%s://127.0.0.1:%d%s" % (scheme, self.port, path)

    async def _main(self):
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        srv = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        self.port = srv.sockets[0].getsockname()[1]
        self._ready.set()
        async with srv:
            await self._stop.wait()

    async def _conn(self, r, w):
        try:
            head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 10)
            path = head.split(b" ", 2)[1].decode("latin-1")
            for ln in head.split(b"\r\n"):  # the body read first: a close with unread bytes resets
                if ln.lower().startswith(b"content-length:"):
                    await asyncio.wait_for(r.readexactly(int(ln.split(b":", 1)[1])), 10)
            if path.startswith("/record"):
                self.heads.append(head)
                w.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            elif path == "/line10m":
                w.write(b"HTTP/1.1 200 OK\r\nX-Long: ")
                chunk = b"a" * 65536
                for _ in range(160):
                    w.write(chunk)
                    await w.drain()
            elif path == "/headers":
                w.write(b"HTTP/1.1 200 OK\r\n")
                for _ in range(100000):
                    w.write(b"X-A: b\r\n")
                    await w.drain()
            elif path == "/trickle":
                w.write(b"HTTP/1.1 200 OK\r\n")
                while True:
                    await w.drain()
                    await asyncio.sleep(0.05)
                    w.write(b"X")
            elif path == "/silent":
                await asyncio.sleep(30)
            elif path.startswith("/ota"):
                n = int(path.split("u=")[1])
                url, token = self.answers[n]
                ws = {"url": url}
                if token is not None:
                    ws["token"] = token
                body = json.dumps({"websocket": ws}).encode()
                w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            elif path == "/ws":
                key = [
                    ln.split(b":", 1)[1].strip()
                    for ln in head.split(b"\r\n")
                    if ln.lower().startswith(b"sec-websocket-key:")
                ][0]
                accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
                w.write(
                    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                    b"Connection: Upgrade\r\nSec-WebSocket-Accept: "
                    + accept
                    + b"\r\n\r\n"
                    + self.after_upgrade
                )
                await w.drain()
                await asyncio.sleep(30)
            await w.drain()
        except Exception:
            pass
        finally:
            w.close()
