# The update's HTTP routes (POST /ota streamed, GET /ota, POST /ota/rollback) and the trial's supervisor task.
import asyncio
import gc

from organbus import log
from master import httpd, ota

MAX_BUNDLE = 1024 * 1024  # bytes of one upload (the free flash is checked too)
RESET_AFTER_MS = 300  # the answer leaves before the board resets


def service(body, settings):
    """A Service from the master's OTA settings: {"flash": root, "key": hex, "token": bearer,
    "reset": callable}; the online organs come from the Body's registry."""

    def online():
        return [s.organ["module_id"] for s in body.registry.online()]

    key = settings.get("key")
    try:
        key = ota.key_bytes(key) if key else None
    except ValueError as e:  # said on the log; uploads are refused (403), the body runs
        log.emit("error", [("file", "config.json"), ("error", "ota.key: %s" % e)])
        key = None
    return ota.Service(
        settings.get("flash", ""),
        key,
        settings.get("token"),
        online,
        settings.get("reset"),
    )


async def _reset_soon(svc):
    await asyncio.sleep_ms(RESET_AFTER_MS)
    if svc.reset is not None:
        svc.reset()


def routes(svc):
    """{(method, path): handler} of the update for master.httpd.serve."""

    async def post_ota(req):
        try:
            rx = svc.receiver(int(req.headers.get("content-length") or 0))
        except ota.OtaError as e:
            svc.refuse(e.status, e.reason)
            raise httpd.HttpError(e.status, e.reason)
        try:
            while True:
                chunk = await req.stream.read()
                if not chunk:
                    break
                rx.feed(chunk)
                chunk = None
                await asyncio.sleep_ms(0)  # the bus's tasks run between pieces
            rx.finish()
        except ota.OtaError as e:
            svc.ended(rx, e)
            raise httpd.HttpError(e.status, e.reason)
        except MemoryError:  # said in GET /ota too: what the update lacked (docs/master.md)
            rx.manifest = None
            gc.collect()
            free = gc.mem_free() if hasattr(gc, "mem_free") else -1
            if rx.files is None:
                what = "reading its manifest of %d bytes" % rx.manifest_len
            else:
                what = "its files"
            why = "the master is short of memory for the update after %d bytes: %s (%d free)" % (
                rx.total,
                what,
                free,
            )
            svc.ended(rx, ota.OtaError(503, why))
            raise httpd.HttpError(503, why, {"Retry-After": "1"})
        except (EOFError, OSError, asyncio.TimeoutError) as e:
            why = "upload cut after %d bytes (%s)" % (rx.total, type(e).__name__)
            svc.ended(rx, ota.OtaError(400, why))
            raise
        except BaseException as e:  # a cancel or a bug: the slot is never left half written
            svc.ended(rx, ota.OtaError(500, "upload stopped: %r" % e))
            raise
        result = svc.ended(rx)
        gc.collect()
        asyncio.create_task(_reset_soon(svc))
        doc = svc.document()
        doc["result"] = result
        return 200, doc, None

    async def get_ota(req):
        return 200, svc.document(), None

    async def post_rollback(req):
        if not svc.token:
            raise httpd.HttpError(401, "updates need a bearer token: set http.token in config.json")
        if not svc.roll_back("asked by POST /ota/rollback"):
            raise httpd.HttpError(409, "no previous slot to go back to")
        asyncio.create_task(_reset_soon(svc))
        return 200, svc.document(), None

    return {
        ("POST", "/ota"): httpd.Stream(post_ota, MAX_BUNDLE),
        ("GET", "/ota"): get_ota,
        ("POST", "/ota/rollback"): post_rollback,
    }


async def _http_answers(host, port):
    # The server answers a request of its own (GET /ota) on the loopback.
    try:
        r, w = await asyncio.open_connection("127.0.0.1" if host == "0.0.0.0" else host, port)
        w.write(b"GET /ota HTTP/1.1\r\nHost: self\r\n\r\n")
        await w.drain()
        line = await asyncio.wait_for(r.readline(), 2)
        w.close()
        return line.startswith(b"HTTP/1.1 200") or line.startswith(b"HTTP/1.1 401")
    except Exception:
        return False


async def supervise(svc, http, trial_ms, clock, diff, step_ms=500):
    """While the running code is on trial: commit once the HTTP server answered and every organ
    online before the update registered again, within `trial_ms`; else roll back and reset."""
    if svc.st.get("state") != ota.TRIAL:
        return
    t0 = clock()
    http_ok = http is None
    why = "not checked"
    while diff(clock(), t0) < trial_ms:
        if not http_ok:
            http_ok = await _http_answers(http[0], http[1])
        why = svc.trial_check(http_ok)
        if not why:
            svc.commit("booted, HTTP answered, every organ registered again")
            return
        await asyncio.sleep_ms(step_ms)
    svc.roll_back("trial of %d ms ended: %s" % (trial_ms, why))
    await _reset_soon(svc)
