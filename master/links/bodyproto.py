# Body Protocol v1 routes (POST /status /speak /look /express): honest answers, never a fake 200.
#
# A step is answered as soon as its organ accepted (or refused) the COMMAND, never after the
# organ finished playing it; one that waits for its resource group behind an earlier plan (an
# utterance still playing) is answered 202 at once, queued, as the protocol allows ("2xx after
# the utterance is queued or played"). So a request never waits for the speaker longer than
# the organ's own answer (the scheduler's 1 s COMMAND_RESP timeout, `ANSWER_MS` at most) and
# never holds a connection slot meanwhile: 8 /speak at once took every slot for seconds. A
# queued step holds its plan in the scheduler (2.3 KB on the 64-bit unix port), so at most
# `MAX_QUEUED` wait; one more is answered 503 with Retry-After.
import asyncio

from micropython import const

from organbus import jsonread
from organbus.plan import one_step
from organbus.utf8 import MAX_TEXT

from master.links.bodyclamp import Clamp, Overflow
from master.links.httpmsg import Fed, HttpError
from master.bus.outcome import ACCEPTED, GOOD, OFFLINE, REFUSED, TIMEOUT
from master.bus.outcome import CODE

ANSWER_MS = const(2000)  # the most a request waits for its organ's COMMAND_RESP
MAX_QUEUED = const(2)  # steps answered 202 still waiting for their group
# Every body is read as it comes through `Clamp` (master/links/bodyclamp.py, an httpd.Fed route):
# its strings cut to the MAX_TEXT bytes the master forwards, never kept or cut out whole (a
# 3.9 KB /speak found no such block at 80 KB); the buffer holds the body once cut ({"text"}
# with 480 bytes of escaped JSON fits). The Clamp (about 1.4 KB on the 64-bit unix port once
# it has read, its buffer and its state) is made at the first Body Protocol request and kept:
# taken at boot it cost the 64 KB master its tour (a plan 503 in 3 of 3 runs).
_CLAMPED = const(512)

LOOK_TEXT = "This body has no camera: it cannot see anything."

# HTTP status for a step that did not get accepted by its organ, by final step status.
_FAIL_STATUS = {REFUSED: 502, TIMEOUT: 504, OFFLINE: 503}
_WHY = {
    REFUSED: "the organ refused the command",
    TIMEOUT: "the organ did not answer in time",
    OFFLINE: "the organ went offline",
}


def _names(menu):
    return [c["name"] for c in menu.get("capabilities", ())]


def express_action(menu, emotion):
    """(action, params) that shows `emotion` on this menu, or None. Exact names only:
    a capability `express_<emotion>` without params, or `express` with one string param
    `emotion`. Nothing is guessed or mapped to a nearest ability."""
    caps = {}
    for c in menu.get("capabilities", ()):
        caps[c["name"]] = c
    c = caps.get("express_" + emotion)
    if c is not None and not c.get("params"):
        return c["name"], {}
    c = caps.get("express")
    if c is not None:
        ps = c.get("params") or []
        if len(ps) == 1 and ps[0]["name"] == "emotion" and ps[0]["type"] == "string":
            return "express", {"emotion": emotion}
    return None


class BodyProtocol:
    """Routes of Body Protocol v1 over a master Body (see docs/DESIGN.md)."""

    def __init__(self, body):
        self.body = body
        self.waiting = []  # Runs answered 202 whose step has not started yet
        self.queued = 0  # steps answered 202
        self.busy = 0  # steps refused: MAX_QUEUED were waiting
        self.last_report = None  # (HTTP status, report) of the last plan that ended
        self.clamp = None  # made by lend()

    def lend(self, req=None):
        """The feeder of a /speak or /express body (httpd.Fed)."""
        if self.clamp is None:
            self.clamp = Clamp(_CLAMPED, MAX_TEXT)
        return self.clamp.lend()

    def _message(self, req):
        """(the body's JSON value or None when empty, notes), strictly read as it came, its
        strings clamped (req.fed). Raises HttpError: 400 not JSON, 413 too long even clamped."""
        fed = getattr(req, "fed", None)
        if fed is None:  # called without the server (a test's request): read it so now
            fed = self.lend()
            for p in req.pieces:
                fed.feed(p)
            fed.close()
        if not fed.pos:
            return None, ()
        try:
            value, dups, cut = fed.finish()
        except jsonread.JsonError as e:
            why = "body: not JSON: %s" % e.msg
            raise HttpError(400, why, None, [why])
        except Overflow as e:
            raise HttpError(413, "body: %s" % e)
        notes = [
            "a string of %d bytes was cut to %d at a character boundary as the body came (the "
            "master forwards %d bytes of a text)" % (n, MAX_TEXT, MAX_TEXT)
            for n in cut
        ]
        return value, notes

    async def status(self, req):
        return 200, {"online": bool(self.body.speak_ready())}, None

    async def look(self, req):
        return 200, {"text": LOOK_TEXT}, None

    async def speak(self, req):
        msg, notes = self._message(req)
        text = msg.get("text") if isinstance(msg, dict) else None
        if not isinstance(text, str) or not text.strip():
            return 400, {"error": 'send {"text": "..."} with the words to say'}, None
        if not self.body.speak_ready():
            why = "cannot speak now: no speaker organ with speak is online and free"
            return 503, {"error": why}, {"Retry-After": "5"}
        return _noted(await self.run_step("speak", {"text": text}), notes)

    async def express(self, req):
        msg, notes = self._message(req)
        emotion = msg.get("emotion") if isinstance(msg, dict) else None
        if not isinstance(emotion, str) or not emotion:
            return 400, {"error": 'send {"emotion": "..."}'}, None
        menu = self.body.menu()
        found = express_action(menu, emotion)
        if found is None:
            return (
                501,
                {
                    "error": "this body cannot express %r: no ability on its menu shows it "
                    "(looked for express_%s or express with an emotion param)" % (emotion, emotion),
                    "abilities": _names(menu),
                },
                None,
            )
        return _noted(await self.run_step(found[0], found[1]), notes)

    async def run_step(self, action, params):
        """Submit a one-step plan; answer once the organ accepted (or refused) its COMMAND, or
        at once 202 when the step waits for its resource group. The plan plays on after the
        answer; its report is kept in `last_report` when it ends."""
        answered = asyncio.Event()
        seen = []

        def on_accept(task_id, status):
            if not seen:
                seen.append(status)
                answered.set()

        def on_done(run):
            self.last_report = (200, run.report())
            answered.set()

        self.waiting = [
            r for r in self.waiting if not r.finished and r.steps[0].status == "pending"
        ]
        if len(self.waiting) >= MAX_QUEUED:
            self.busy += 1
            why = "%s: %d requests wait for the organ already, the most this body queues" % (
                action,
                len(self.waiting),
            )
            return 503, {"error": why}, {"Retry-After": "2"}
        kind, run = self.body.submit(one_step(action, params), on_accept, on_done)
        if kind != ACCEPTED:
            problems = run.get("problems", [])
            return CODE[kind], {"error": "; ".join(problems), "problems": problems}, None
        st = run.steps[0]
        if not run.finished and st.status == "pending":
            self.queued += 1
            self.waiting.append(run)
            return 202, {"queued": True}, None
        if not run.finished and not seen:
            try:
                await asyncio.wait_for(answered.wait(), ANSWER_MS / 1000)
            except asyncio.TimeoutError:
                why = "%s failed: the organ did not answer within %d ms" % (action, ANSWER_MS)
                return 504, {"error": why}, None
        if seen and seen[0] == 0:
            return 200, {}, None  # accepted: the organ plays on, the answer goes now
        # Not accepted: the step has its final status now, and the report holds the reason.
        status = st.status
        if status in GOOD:
            return 200, {}, None
        why = st.reason or _WHY.get(status, status)
        return _FAIL_STATUS.get(status, 502), {"error": "%s failed: %s" % (action, why)}, None


def _noted(answer, notes):
    # a 2xx answer carries the notes of how its body was read
    if notes and answer[0] < 300:
        out = dict(answer[1])
        out["notes"] = notes
        return answer[0], out, answer[2]
    return answer


def start(body, config):
    """The link's entry: the Body Protocol v1 routes for httpd.serve."""
    bp = BodyProtocol(body)
    return {
        ("POST", "/status"): Fed(bp.status, _drop),  # bodies these two never read: not kept
        ("POST", "/speak"): Fed(bp.speak, bp.lend),
        ("POST", "/look"): Fed(bp.look, _drop),
        ("POST", "/express"): Fed(bp.express, bp.lend),
    }


class _Drop:
    def feed(self, piece):
        pass

    def close(self):
        pass


_DROP = _Drop()


def _drop(req):
    return _DROP
