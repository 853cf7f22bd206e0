# The master's own HTTP routes (GET /menu, POST /plan, GET /status) and the one map from a Body outcome to a status code.
#
# The core and the Body say what happened (an outcome kind); this table alone turns it into
# an HTTP status, and the JSON-lines link reuses it so both links answer alike.
from master import outcome

STATUS = {
    outcome.ACCEPTED: 200,
    outcome.REPORT: 200,
    outcome.PROBLEMS: 422,
    outcome.UNREADABLE: 400,
    outcome.TOO_LARGE: 413,
}


def status_of(kind):
    """The HTTP status for a Body outcome kind."""
    return STATUS[kind]


def answer(kind, obj):
    """(status, payload) of a Body outcome for an HTTP route: a body the server could not
    read also says why in "error", as every refusal of the HTTP server does."""
    if kind == outcome.UNREADABLE or kind == outcome.TOO_LARGE:
        obj = {"error": obj["problems"][0], "problems": obj["problems"]}
    return STATUS[kind], obj


def routes(body):
    """{(method, path): handler} for master.httpd.serve over a Body."""

    async def get_menu(req):
        return 200, body.menu(), None

    async def post_plan(req):
        kind, obj = await body.execute(req.content)  # the raw bytes: one strict parse, in the Body
        status, payload = answer(kind, obj)
        return status, payload, None

    async def get_status(req):
        return 200, body.status(), None

    return {
        ("GET", "/menu"): get_menu,
        ("POST", "/plan"): post_plan,
        ("GET", "/status"): get_status,
    }
