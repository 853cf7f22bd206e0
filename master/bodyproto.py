# Body Protocol v1 routes (POST /status /speak /look /express): honest answers, never a fake 200.
import asyncio

from organbus.plan import one_step

from master.outcome import PROBLEMS, REPORT
from master.routes import STATUS

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
        self.running = []  # plans still playing after their answer was sent
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
            return (
                503,
                {"error": "cannot speak now: no speaker organ with speak is online and free"},
                None,
            )
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
        """Run a one-step plan; answer as soon as the organ accepted (or refused) its COMMAND.

        The plan keeps running after the answer (speech plays on); its report is kept
        in `last_report` when it ends."""
        plan = one_step(action, params)
        answered = asyncio.Event()
        ended = asyncio.Event()
        seen = []

        def on_accept(task_id, status):
            if not seen:
                seen.append(status)
                answered.set()

        async def run():
            try:
                kind, out = await self.body.execute(plan, on_accept)
                r = (STATUS[kind], out)
            except Exception as e:
                r = (500, {"error": "internal error: %r" % e})
            self.last_report = r
            ended.set()
            answered.set()
            if task in self.running:
                self.running.remove(task)

        task = asyncio.create_task(run())
        self.running.append(task)
        await answered.wait()
        if seen and seen[0] == 0:
            return 200, {}, None  # accepted: the organ plays on, the answer goes now
        # Not accepted: a one-step plan ends at once, and its report holds the reason.
        try:
            await asyncio.wait_for(ended.wait(), 5)
        except asyncio.TimeoutError:
            return (
                502,
                {"error": "%s failed: %s" % (action, seen[0] if seen else "no answer")},
                None,
            )
        code, out = self.last_report
        if code == STATUS[PROBLEMS]:
            problems = out.get("problems", [])
            return code, {"error": "; ".join(problems), "problems": problems}, None
        if code != STATUS[REPORT]:
            return code, out, None
        step = (out.get("steps") or [{}])[0]
        status = step.get("status")
        if status in ("done", "started"):
            return 200, {}, None
        why = step.get("reason") or _WHY.get(status, status)
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
