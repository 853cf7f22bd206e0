# The update's HTTP routes (POST /ota streamed, GET /ota, POST /ota/rollback) and the trial's supervisor task.
import asyncio
import gc

from organbus import log
from organbus.ticks import ticks_diff, ticks_ms
from master.links import httpd
from master.ota import service as ota

MAX_BUNDLE = 1024 * 1024  # bytes of one upload (the free flash is checked too)
RESET_AFTER_MS = 300  # the answer leaves before the board resets
UPLOAD_MS = 120000  # a whole upload's deadline (config.json "ota": {"upload_ms"}): 1 MB at 9 KB/s

try:
    _sleep_ms = asyncio.sleep_ms
except AttributeError:  # CPython (the host tests)

    def _sleep_ms(ms):
        return asyncio.sleep(ms / 1000)


def service(body, settings):
    """A Service from the master's OTA settings: {"flash": root, "key": hex, "token": bearer,
    "reset": callable, "upload_ms": deadline}; the online organs come from the Body."""

    def online():
        return [o["module_id"] for o in body.online_organs()]

    key = settings.get("key")
    try:
        key = ota.key_bytes(key) if key else None
    except ValueError as e:  # said on the log; uploads are refused (403), the body runs
        log.emit("error", [("file", "config.json"), ("error", "ota.key: %s" % e)])
        key = None
    upload_ms = settings.get("upload_ms", UPLOAD_MS)
    if not isinstance(upload_ms, int) or isinstance(upload_ms, bool) or upload_ms < 1000:
        log.emit(
            "error",
            [
                ("file", "config.json"),
                ("error", "ota.upload_ms: at least 1000; %d used" % UPLOAD_MS),
            ],
        )
        upload_ms = UPLOAD_MS
    return ota.Service(
        settings.get("flash", ""),
        key,
        settings.get("token"),
        online,
        settings.get("reset"),
        upload_ms=upload_ms,
    )


async def _reset_soon(svc):
    await _sleep_ms(RESET_AFTER_MS)
    if svc.reset is not None:
        svc.reset()


async def _take(svc, rx, stream, clock):
    # Every piece of the body into the Receiver; a stalled, cut or overlong upload is an
    # OtaError with what came and where it stopped (the whole-upload deadline is checked as
    # each piece comes: a stall is cut by the stream's own idle deadline first).
    t0 = clock()
    while True:
        try:
            chunk = await stream.read()
        except asyncio.TimeoutError:
            raise ota.OtaError(
                408,
                "bundle: upload stalled after %d of %d bytes, %s: nothing came for %d ms"
                % (rx.total, rx.length or 0, rx.where(), stream.idle_ms),
            )
        except (EOFError, OSError) as e:
            raise ota.OtaError(
                400,
                "upload cut after %d of %d bytes, %s: the client stopped sending (%s)"
                % (rx.total, rx.length or 0, rx.where(), type(e).__name__),
            )
        if not chunk:
            break
        rx.feed(chunk)
        chunk = None
        if ticks_diff(clock(), t0) > svc.upload_ms:
            raise ota.OtaError(
                408,
                "bundle: upload not done within its deadline of %d ms (%d of %d bytes came)"
                % (svc.upload_ms, rx.total, rx.length or 0),
            )
        await _sleep_ms(0)  # the bus's tasks run between pieces
    rx.finish()


def routes(svc, clock=ticks_ms):
    """{(method, path): handler} of the update for master.links.httpd.serve."""

    async def post_ota(req):
        try:
            rx = svc.receiver(int(req.headers.get("content-length") or 0))
        except ota.OtaError as e:
            svc.refuse(e.status, e.reason)
            raise httpd.HttpError(e.status, e.reason)
        try:
            await _take(svc, rx, req.stream, clock)
        except ota.OtaError as e:
            svc.ended(rx, e)
            raise httpd.HttpError(e.status, e.reason)
        except MemoryError:  # said in GET /ota too: what the update lacked (docs/master.md)
            rx.close()
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
        except OSError as e:  # the flash's (the stream's are in _take): full, or failing
            why = "bundle: writing to the flash failed after %d bytes, %s: %s" % (
                rx.total,
                rx.where(),
                e,
            )
            svc.ended(rx, ota.OtaError(500, why))
            raise httpd.HttpError(500, why)
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
        why = svc.rollback_refusal()
        if why or not svc.roll_back("asked by POST /ota/rollback"):
            raise httpd.HttpError(409, why or "no rollback now")
        asyncio.create_task(_reset_soon(svc))
        return 200, svc.document(), None

    return {
        ("POST", "/ota"): httpd.Stream(post_ota, MAX_BUNDLE),
        ("GET", "/ota"): get_ota,
        ("POST", "/ota/rollback"): post_rollback,
    }


async def _http_answers(host, port):
    # The server answers a request of its own (GET /ota) on the loopback (master/net/http.py).
    from master.net import http

    url = "http://%s:%d/ota" % ("127.0.0.1" if host == "0.0.0.0" else host, port)
    try:
        status, _ = await http.request("GET", url, ms=2000, read_body=False)
    except Exception:
        return False
    return status == 200 or status == 401


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
        await _sleep_ms(step_ms)
    svc.fail_trial("trial of %d ms ended: %s" % (trial_ms, why))
    await _reset_soon(svc)


def start(body, config):
    """The update's entry: its Service from config "ota" ({"key", "upload_ms"}), the HTTP
    token and the board's flash root and reset, the trial's supervisor task; returns the
    update's routes."""
    brd = config["board"]
    o = dict(config.get("ota") or {})
    o["token"] = (config.get("http") or {}).get("token")
    o["flash"] = brd["flash"]
    o["reset"] = brd["reset"]
    svc = service(body, o)
    asyncio.create_task(supervise(svc, brd["http"], brd["trial_ms"], ticks_ms, ticks_diff))
    return routes(svc)
