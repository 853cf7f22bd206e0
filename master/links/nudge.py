# Body Protocol nudges: the body wakes the soul (POST {"reason"} to nudge_url), coalesced, rate limited, from its own task.
#
# `Nudger` is a hub subscriber that only appends a plain sentence to a short list of pending
# reasons (full: the reason is dropped and counted). Its own task (`run`) waits for a reason,
# gathers the rest of the burst for `gather_ms`, keeps at least `min_s` between two POSTs,
# joins the reasons into one nudge and POSTs it with a timeout: a slow or dead receiver costs
# that task its wait and the bus nothing. Counted in /status "nudges".
import json

import asyncio

from organbus import log
from organbus.ticks import ticks_diff
from master.bus.outcome import GOOD, OFFLINE, REFUSED, STOPPED, TIMEOUT
from master.net import http

DEFAULTS = {
    "nudge_url": None,  # http://HOST:PORT/PATH of the soul's nudge endpoint; None: no nudges
    "nudge_min_s": 10,  # at most one nudge per this many seconds
    "nudge_timeout_ms": 3000,  # a POST not answered within this has failed
    "nudge_gather_ms": 100,  # a burst's reasons that come this soon after the first go along
}
HEARS = ("offline", "registered", "step", "plan")
MAX_PENDING = 8
MAX_REASON = 600  # characters of one joined nudge


def parse_url(url):
    """(host, port, path) of an http:// URL (master/net/http.py's rules); ValueError with the
    reason for anything else."""
    return _parts(url)[1:]


def _parts(url):
    if not isinstance(url, str) or not url.startswith("http://"):
        raise ValueError("nudge_url must be an http://HOST:PORT/PATH URL, not %r" % (url,))
    try:
        return http.parse_url(url, ("http",))
    except http.NetError as e:
        raise ValueError("nudge_%s" % e)


def reason_of(event, port, data):
    """One plain sentence for a hub event worth waking the soul for, else None."""
    if event == "offline":
        d = data.organ
        return "The %s organ %s went offline, so its abilities are gone." % (
            d["module_type"],
            d["module_id"],
        )
    if event == "registered" and data.again:
        d = data.organ
        return "The %s organ %s is back online." % (d["module_type"], d["module_id"])
    if event == "step" and data.own is not None:
        cap = data.own[1]
        if cap.get("exec_type") != "continuous":
            return None
        if data.status == STOPPED:
            return "%s stopped before it finished (%s)." % (data.action, data.reason or "stopped")
        if data.status in (REFUSED, TIMEOUT, OFFLINE):
            return "%s failed: %s." % (data.action, data.reason or data.status)
        return None
    if event == "plan":
        r = data.report()
        if r["ok"]:
            return None
        bad = ["%s %s" % (s["action"], s["status"]) for s in r["steps"] if s["status"] not in GOOD]
        return "Plan %d failed (%s)." % (data.seq, ", ".join(bad))
    return None


class Nudger:
    """`on_event` (hub), `run()` (its task), `stats()`; `post(url_parts, body, ms, buf)` is the
    sender (tests may pass their own), `clock()` ms ticks."""

    def __init__(self, hub, clock, config=None, post=None):
        cfg = dict(DEFAULTS)
        if config:
            for k in DEFAULTS:
                if k in config:
                    cfg[k] = config[k]
        self.cfg = cfg
        self.target = _parts(cfg["nudge_url"])
        self._buf = bytearray(256)  # the answer's head read through it: the status line's start
        self.clock = clock
        self.post = post or post_json
        self.pending = []
        self.wake = asyncio.Event()
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self.coalesced = 0  # reasons that went out inside another's nudge
        self.last_error = None
        self.last_reason = None
        self.t_last = None
        hub.subscribe(self.on_event, HEARS)

    def on_event(self, event, port, data):
        why = reason_of(event, port, data)
        if why is None or why in self.pending:
            return
        if len(self.pending) >= MAX_PENDING:
            self.dropped += 1
            return
        self.pending.append(why)
        self.wake.set()

    async def run(self):
        cfg = self.cfg
        while True:
            while not self.pending:
                self.wake.clear()
                await self.wake.wait()
            await asyncio.sleep(cfg["nudge_gather_ms"] / 1000)
            if self.t_last is not None:
                left = cfg["nudge_min_s"] * 1000 - ticks_diff(self.clock(), self.t_last)
                if left > 0:
                    await asyncio.sleep(left / 1000)
            reasons, self.pending = self.pending, []
            self.coalesced += len(reasons) - 1
            text = " ".join(reasons)
            if len(text) > MAX_REASON:
                text = text[: MAX_REASON - 3] + "..."
            self.t_last = self.clock()
            self.last_reason = text
            try:
                status = await self.post(
                    self.target, json.dumps({"reason": text}), cfg["nudge_timeout_ms"], self._buf
                )
                if 200 <= status < 300:
                    self.sent += 1
                    self.last_error = None
                else:
                    self.failed += 1
                    self.last_error = "HTTP %d" % status
            except (asyncio.TimeoutError, http.NetTimeout):
                self.failed += 1
                self.last_error = "no answer within %d ms" % cfg["nudge_timeout_ms"]
            except http.NetError as e:  # the receiver is down or answers nonsense: counted
                self.failed += 1
                self.last_error = str(e)[:160]
            except Exception as e:  # never raised into the bus
                self.failed += 1
                self.last_error = repr(e)

    def stats(self):
        return {
            "url": self.cfg["nudge_url"],
            "min_s": self.cfg["nudge_min_s"],
            "sent": self.sent,
            "failed": self.failed,
            "dropped": self.dropped,
            "coalesced": self.coalesced,
            "pending": len(self.pending),
            "last_reason": self.last_reason,
            "last_error": self.last_error,
        }


async def post_json(parts, text, timeout_ms, buf=None):
    """POST `text` (JSON) to the URL of `parts` (master/net/http.py's parse_url); the answer's
    status, its head read through `buf`. NetError on a dead, slow (`timeout_ms` for the whole
    exchange: NetTimeout) or nonsensical receiver."""
    status, _ = await http.request(
        "POST",
        parts,
        (("Content-Type", "application/json"),),
        text,
        buf,
        timeout_ms,
        read_body=False,
    )
    return status


def start(body, config):
    """The link's entry: the Nudger of config's nudge_url as its own task, its counters in
    /status; None when the config is refused (said on the event log)."""
    try:
        n = Nudger(body, body.clock, config)
    except ValueError as e:
        log.emit("error", [("where", "nudge_url"), ("error", str(e))])
        return None
    asyncio.create_task(n.run())
    body.add_status_section("nudges", n.stats)
    return n
