# The update's HTTP handlers (master/ota/routes.py) over a scripted body stream: a cut, a stall, a trickle past the whole-upload deadline, a rollback during an upload or after a failed trial; both interpreters.
import asyncio

from master.links import httpd
from master.ota import service as ota
from master.ota import routes as otalink
from ota_rig import FILES, booted, bundle, svc as _svc, tmp, tree, upload

UNIX_PORT = True
RV32 = False  # the RV32 image under QEMU has no writable file system


class Stream:
    """A request body as master.links.httpd.BodyStream gives it: `pieces` in turn, then `end` raised
    (None: the body is whole); `gate` (an Event) holds the read after `hold_after` pieces."""

    def __init__(self, pieces, end=None, gate=None, hold_after=None):
        self.pieces = list(pieces)
        self.end = end
        self.gate = gate
        self.hold_after = hold_after
        self.idle_ms = 3000
        self.given = 0

    async def read(self):
        if self.gate is not None and self.given == self.hold_after:
            await self.gate.wait()
        if self.pieces:
            self.given += 1
            return self.pieces.pop(0)
        if self.end is not None:
            raise self.end
        return b""


class Req:
    def __init__(self, length, stream):
        self.headers = {"content-length": str(length)}
        self.stream = stream


class Clock:
    """ticks_ms that moves `step` ms at every call."""

    def __init__(self, step):
        self.t = 0
        self.step = step

    def __call__(self):
        self.t += self.step
        return self.t


def _pieces(data, n):
    return [data[i : i + n] for i in range(0, len(data), n)]


def _answer(coro):
    # (status, reason or the document) of one handler call
    async def run():
        try:
            r = await coro
            return r[0], r[1]
        except httpd.HttpError as e:
            return e.status, e.reason

    return asyncio.run(run())


def _post(svc, data, stream, clock=None):
    table = otalink.routes(svc) if clock is None else otalink.routes(svc, clock)
    return table[("POST", "/ota")].handler(Req(len(data), stream))


def _committed(d):
    # v1 uploaded, booted and committed: slot a runs, the USB install is its rollback target
    s = _svc(d)[0]
    assert upload(s, bundle(FILES, "v1"), 500)[0]["ok"]
    return booted(d)


def test_an_upload_cut_by_the_client_is_400_saying_where_it_stopped():
    for end, name in ((EOFError(), "EOFError"), (OSError(104), "OSError")):
        d = tmp()
        s = _svc(d)[0]
        before = tree(d)
        data = bundle(FILES)
        half = data[: len(data) - 300]
        status, why = _answer(_post(s, data, Stream(_pieces(half, 512), end)))
        assert status == 400, (status, why)
        assert why.startswith(
            "upload cut after %d of %d bytes, inside master/app.py"
            % (
                len(half),
                len(data),
            )
        ), why
        assert "the client stopped sending (%s)" % name in why, why
        doc = s.document()
        assert doc["result"]["status"] == 400 and doc["result"]["reason"] == why, doc
        assert tree(d) == before and not s.busy
        ota.rmtree(d)


def test_a_stalled_upload_is_408_and_frees_the_lock():
    d = tmp()
    s = _svc(d)[0]
    data = bundle(FILES)
    status, why = _answer(_post(s, data, Stream(_pieces(data[:30], 10), asyncio.TimeoutError())))
    assert status == 408 and "stalled after 30 of %d bytes, in its head" % len(data) in why, why
    assert "nothing came for 3000 ms" in why and not s.busy, why
    ota.rmtree(d)


def test_a_trickling_upload_is_cut_by_the_whole_upload_deadline():
    d = tmp()
    s = _svc(d)[0]
    s.upload_ms = 10000
    before = tree(d)
    data = bundle(FILES)
    # one byte a piece, 2.5 s apart on the clock: each read is within the idle deadline
    stream = Stream(_pieces(data, 1))
    status, why = _answer(_post(s, data, stream, Clock(2500)))
    assert status == 408 and "deadline of 10000 ms" in why, (status, why)
    assert stream.given < 10 and "(%d of %d bytes came)" % (stream.given, len(data)) in why, why
    assert not s.busy and tree(d) == before, "the lock or the stage was left behind"
    # the next upload is taken (no 409 "already uploading")
    status, doc = _answer(_post(s, data, Stream(_pieces(data, 4096)), Clock(1)))
    assert status == 200 and doc["state"] == "trial", (status, doc)
    ota.rmtree(d)


def test_a_rollback_during_an_upload_is_409_and_the_upload_goes_on():
    d = tmp()
    s = _committed(d)
    table = otalink.routes(s)
    data = bundle(FILES, "v2")

    async def run():
        gate = asyncio.Event()
        stream = Stream(_pieces(data, 256), gate=gate, hold_after=3)
        up = asyncio.create_task(table[("POST", "/ota")].handler(Req(len(data), stream)))
        while stream.given < 3 and not up.done():
            await asyncio.sleep(0)
        try:
            await table[("POST", "/ota/rollback")](None)
            rolled = None
        except httpd.HttpError as e:
            rolled = (e.status, e.reason)
        gate.set()
        return rolled, await up

    rolled, (status, doc, _) = asyncio.run(run())
    assert rolled is not None, "POST /ota/rollback during an upload was taken (200)"
    assert rolled[0] == 409 and "an update is uploading" in rolled[1], rolled
    assert status == 200 and doc["state"] == "trial" and doc["version"] == "v2", doc
    assert doc["previous"] == "v1" and doc["previous_slot"] == "a", doc
    ota.rmtree(d)


def test_a_rollback_after_a_failed_trial_is_409():
    d = tmp()
    s = _committed(d)
    assert upload(s, bundle(FILES, "v2"), 500)[0]["ok"]
    s = _svc(d)[0]
    s.fail_trial("trial of 8000 ms ended: the HTTP server has not answered")
    status, why = _answer(otalink.routes(s)[("POST", "/ota/rollback")](None))
    assert status == 409 and "no known-good code to go back to" in why, (status, why)
    assert s.st["slot"] == "a" and s.st["state"] == "rolled_back", s.st
    # and GET /ota says where a rollback would go: nowhere
    status, doc = _answer(otalink.routes(s)[("GET", "/ota")](None))
    assert status == 200 and doc["previous"] is None and doc["previous_slot"] is None, doc
    ota.rmtree(d)
