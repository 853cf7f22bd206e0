# Fakes of the xiaozhi tests: the fake body as a xiaozhi Facade (subscribe, quiet, reset), a log recorder.
try:
    import asyncio  # noqa: F401
except ImportError:  # pragma: no cover
    import uasyncio as asyncio  # noqa: F401

from fake_body import FakeBody

EXPRESS = {"name": "express", "description": "Show an emotion on the face.",
           "exec_type": "immediate", "resource_group": "face", "max_duration_ms": 0,
           "params": [{"name": "emotion", "type": "string", "min": 1, "max": 32, "unit": ""}]}  # fmt: skip
ANNOUNCE = {"name": "announce", "description": "Play an attention chime, then say the text.",
            "exec_type": "continuous", "resource_group": "audio", "max_duration_ms": 30000,
            "params": [{"name": "text", "type": "string", "min": 1, "max": 240, "unit": ""}]}  # fmt: skip


class Log:
    def __init__(self):
        self.lines = []

    def emit(self, event, pairs=()):
        d = {"event": event}
        for k, v in pairs:
            d[k] = v
        self.lines.append(d)

    def what(self, w):
        return [d for d in self.lines if d.get("what") == w]


class Facade(FakeBody):
    """The fake body plus what the xiaozhi link needs: subscribe, quiet, reset; extra abilities."""

    def __init__(self, extra=(), many=0, **kw):
        super().__init__(**kw)
        self.extra = list(extra)
        self.many = many
        self.subscribers = []
        self.resets = 0
        self.times = []  # (action, start ms, end ms) of every plan run

    def menu(self):
        m = super().menu()
        caps = m["capabilities"]
        for c in self.extra:
            d = dict(c)
            d["module_id"] = "EXT_001"
            caps.append(d)
        for i in range(self.many):
            caps.append({"name": "tool_%03d" % i, "description": "d" * 150, "exec_type": "immediate",
                         "resource_group": "", "max_duration_ms": 0, "module_id": "BIG_001",
                         "params": [{"name": "level", "type": "int", "min": 0, "max": 9, "unit": ""}]})  # fmt: skip
        return m

    def _caps(self):
        d = {}
        for c in self.menu()["capabilities"]:
            d[c["name"]] = c
        return d

    async def execute(self, plan, on_accept=None, dups=()):
        t0 = _ms()
        r = await super().execute(plan, on_accept, dups)
        self.times.append((plan["steps"][0]["action"], t0, _ms()))
        return r

    def subscribe(self, fn):
        self.subscribers.append(fn)

    def publish(self, kind, data):
        for fn in self.subscribers:
            fn(kind, data)

    def quiet(self):
        return self.playing == 0

    def reset(self):
        self.resets += 1


def _ms():
    import time

    if hasattr(time, "ticks_ms"):
        return time.ticks_ms()
    return int(time.monotonic() * 1000)


async def stop_link(link, task):
    """End a xiaozhi Link running as `task` and close its socket (a test rig's teardown)."""
    link.stop()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    await link.sock.abort()
