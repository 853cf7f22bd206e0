# Body Protocol v1 routes (POST /status /speak /look /express): honest answers, never a fake 200.
#
# A step is answered as soon as its organ accepted (or refused) the COMMAND, never after the
# organ finished playing it; one that waits for its resource group behind an earlier plan (an
# utterance still playing) is answered 202 at once, queued, as the protocol allows ("2xx after
# the utterance is queued or played"). So a request never waits for the speaker longer than
# the organ's own answer (the scheduler's 1 s COMMAND_RESP timeout, `ANSWER_MS` at most) and
# never holds a connection slot meanwhile: 8 /speak at once took every slot for seconds.
import asyncio

from micropython import const

from organbus.plan import one_step

from master.outcome import ACCEPTED, PROBLEMS
from master.routes import STATUS

ANSWER_MS = const(2000)  # the most a request waits for its organ's COMMAND_RESP

LOOK_TEXT = "This body has no camera: it cannot see anything."

# HTTP status for a step that did not get accepted by its organ, by final step status.
_FAIL_STATUS = {"refused": 502, "timeout": 504, "offline": 503}
_WHY = {
    "refused": "the organ refused the command",
    "timeout": "the organ did not answer in time",
    "offline": "the organ went offline",
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
        self.queued = 0  # steps answered 202, waiting for their group
        self.last_report = None  # (HTTP status, report) of the last plan that ended

    async def status(self, req):
        return 200, {"online": bool(self.body.speak_ready())}, None

    async def look(self, req):
        return 200, {"text": LOOK_TEXT}, None

    async def speak(self, req):
        msg = req.json if req.json is not None else {}
        text = msg.get("text") if isinstance(msg, dict) else None
        if not isinstance(text, str) or not text.strip():
            return 400, {"error": 'send {"text": "..."} with the words to say'}, None
        if not self.body.speak_ready():
            why = "cannot speak now: no speaker organ with speak is online and free"
            return 503, {"error": why}, {"Retry-After": "5"}
        return await self.run_step("speak", {"text": text})

    async def express(self, req):
        msg = req.json if req.json is not None else {}
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
        return await self.run_step(found[0], found[1])

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

        kind, run = self.body.submit(one_step(action, params), on_accept, on_done)
        if kind != ACCEPTED:
            problems = run.get("problems", [])
            return STATUS[kind], {"error": "; ".join(problems), "problems": problems}, None
        st = run.steps[0]
        if not run.finished and st.status == "pending":
            self.queued += 1
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
        if status in ("done", "started"):
            return 200, {}, None
        why = st.reason or _WHY.get(status, status)
        return _FAIL_STATUS.get(status, 502), {"error": "%s failed: %s" % (action, why)}, None


def routes(body):
    """Body Protocol v1 routes for httpd.serve."""
    bp = BodyProtocol(body)
    return {
        ("POST", "/status"): bp.status,
        ("POST", "/speak"): bp.speak,
        ("POST", "/look"): bp.look,
        ("POST", "/express"): bp.express,
    }
