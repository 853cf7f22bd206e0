# A scripted `websockets` server (CPython) in a background thread: one behaviour per path, for the ws client tests.
import asyncio
import hashlib
import json
import os
import subprocess
import tempfile
import threading

import websockets
from websockets.asyncio.server import serve


async def _handler(ws):
    path = ws.request.path.split("?")[0]
    if path == "/echo":
        async for msg in ws:
            if isinstance(msg, str) and msg.startswith("close:"):
                await ws.close(int(msg[6:]), "asked")
                return
            await ws.send(msg)
    elif path == "/digest":
        async for msg in ws:
            b = msg.encode() if isinstance(msg, str) else msg
            kind = "text" if isinstance(msg, str) else "binary"
            await ws.send("%s %d %s" % (kind, len(b), hashlib.sha1(b).hexdigest()))
    elif path == "/headers":
        await ws.send(json.dumps(dict((k.lower(), v) for k, v in ws.request.headers.raw_items())))
        await ws.wait_closed()
    elif path == "/fragments":
        await ws.send(["ab", "cd", "ef"])
        await ws.send([b"\x01\x02", b"\x03"])
        await ws.wait_closed()
    elif path == "/interleaved":
        # a ping between two fragments of one message (RFC 6455 section 5.4 allows it)
        ws.transport.write(b"\x01\x03abc")  # TEXT, not FIN
        ws.transport.write(b"\x89\x02hi")  # PING
        ws.transport.write(b"\x80\x03def")  # CONT, FIN
        await ws.wait_closed()
    elif path == "/ping":
        waiter = await ws.ping(b"hi")
        try:
            await asyncio.wait_for(waiter, 3)
            await ws.send("pong-ok")
        except asyncio.TimeoutError:
            await ws.send("no-pong")
        await ws.wait_closed()
    elif path == "/oversize":
        await ws.send("x" * 20000)
        await ws.send(["y" * 3000, "y" * 3000])  # fragmented, over a 4096-byte limit together
        await ws.send("after")
        await ws.wait_closed()
    elif path == "/close":
        await ws.close(4000, "bye")
    elif path == "/stall":
        ws.transport.write(b"\x81\x64" + b"0123456789")  # TEXT of 100 bytes, 10 sent
        await asyncio.sleep(30)
    elif path == "/silent":
        await asyncio.sleep(30)
    elif path == "/badutf8":
        ws.transport.write(b"\x81\x02\xc3\x28")
        await ws.wait_closed()
    elif path == "/masked":
        ws.transport.write(b"\x81\x81\x01\x02\x03\x04\x60")  # a masked frame: servers never mask
        await ws.wait_closed()
    else:
        await ws.close(4004, "no such path")


def _process_response(connection, request, response):
    if request.path == "/badaccept":
        response.headers["Sec-WebSocket-Accept"] = "dGhpcyBpcyBub3QgaXQ="
    return response


async def _process_request(connection, request):
    if request.path == "/slowupgrade":
        await asyncio.sleep(30)  # a server that takes the TCP connection and never upgrades
    if request.path == "/refuse":
        return connection.respond(403, "go away\n")
    return None


class WsRig:
    """`with WsRig() as rig:` serves on rig.port (and rig.tls_port with a self-signed cert)."""

    def __init__(self, tls=False):
        self.tls = tls
        self.port = self.tls_port = None
        self.cert_der = None
        self._loop = None
        self._ready = threading.Event()
        self._stop = None
        self._dir = None

    def __enter__(self):
        self._dir = tempfile.TemporaryDirectory()
        ctx = None
        if self.tls:
            ctx = self._tls_context()
        self._thread = threading.Thread(target=self._run, args=(ctx,), daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("websockets rig did not start")
        return self

    def __exit__(self, *exc):
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(5)
        self._dir.cleanup()

    def _tls_context(self):
        import ssl

        key = os.path.join(self._dir.name, "key.pem")
        crt = os.path.join(self._dir.name, "cert.pem")
        der = os.path.join(self._dir.name, "cert.der")
        subprocess.run(
            [
                "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", crt,
                "-days", "2", "-subj", "/CN=localhost",
                "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            ],
            check=True, capture_output=True,
        )  # fmt: skip
        subprocess.run(
            ["openssl", "x509", "-in", crt, "-outform", "DER", "-out", der],
            check=True,
            capture_output=True,
        )
        with open(der, "rb") as f:
            self.cert_der = f.read()
        self.cert_pem = crt
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        return ctx

    def _run(self, ctx):
        asyncio.run(self._main(ctx))

    async def _main(self, ctx):
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        kw = dict(
            ping_interval=None,
            max_size=1 << 20,
            process_request=_process_request,
            process_response=_process_response,
        )
        async with serve(_handler, "127.0.0.1", 0, **kw) as srv:
            self.port = srv.sockets[0].getsockname()[1]
            if ctx is not None:
                async with serve(_handler, "127.0.0.1", 0, ssl=ctx, **kw) as tsrv:
                    self.tls_port = tsrv.sockets[0].getsockname()[1]
                    self._ready.set()
                    await self._stop.wait()
            else:
                self._ready.set()
                await self._stop.wait()


assert websockets  # the PyPI package this rig stands on
