# The master's own HTTP routes (GET /menu, POST /plan, GET /status).
#
# The core and the Body say what happened (an outcome kind); outcome.CODE alone turns it into
# an HTTP status, and the JSON-lines link answers with the same codes.
from organbus import menu as _menu

from master.bus import outcome
from master.links.jsonout import Each


def status_of(kind):
    """The HTTP status for a Body outcome kind."""
    return outcome.CODE[kind]


def answer(kind, obj):
    """(status, payload) of a Body outcome for an HTTP route: a body the server could not
    read also says why in "error", as every refusal of the HTTP server does."""
    if kind == outcome.UNREADABLE or kind == outcome.TOO_LARGE:
        obj = {"error": obj["problems"][0], "problems": obj["problems"]}
    return outcome.CODE[kind], obj


def _entry(c):
    return _menu.menu_capability(c, c["module_id"])


def menu_pieces(body):
    """Body.menu()'s document for an answer written in pieces (jsonout.json_pieces): the same
    JSON, but each capability's entry and its branch of the plan schema are built when written,
    one at a time (the whole menu is 7 KB of objects on the 64-bit unix port, a block a 64 KB
    heap beside an upload may not have: docs/master.md)."""
    caps = body.capabilities()
    n = body.max_steps
    doc = _menu.build_menu((), n)  # every key in its place, no capability yet
    doc["capabilities"] = Each(_entry, caps)
    if caps:
        steps = doc["plan_schema"]["properties"]["steps"]
        steps["maxItems"] = n

        def branch(c):
            return _menu.plan_schema([_entry(c)], n)["properties"]["steps"]["items"]["anyOf"][0]

        steps["items"] = {"anyOf": Each(branch, caps)}
    return doc


def start(body, config):
    """The link's entry: {(method, path): handler} for httpd.serve over a Body."""

    async def get_menu(req):
        return 200, menu_pieces(body), None

    async def post_plan(req):
        kind, obj = await body.execute(req.content)  # the raw bytes: one strict parse, in the Body
        status, payload = answer(kind, obj)
        return status, payload, None

    async def get_status(req):
        # the ring's entries as their kept JSON text: parsed back into objects they took
        # ~10 KB of the 64 KB heap at once with a full ring; and the document is made as it
        # is written, a section at a time (master/bus/status.py, docs/master.md)
        return 200, body.status(text=True), None

    return {
        ("GET", "/menu"): get_menu,
        ("POST", "/plan"): post_plan,
        ("GET", "/status"): get_status,
    }
