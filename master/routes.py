# The master's own HTTP routes (GET /menu, POST /plan, GET /status) and the one map from a Body outcome to a status code.
#
# The core and the Body say what happened (an outcome kind); this table alone turns it into
# an HTTP status, and the JSON-lines link reuses it so both links answer alike.
from master import body as _body

STATUS = {
    _body.ACCEPTED: 200,
    _body.REPORT: 200,
    _body.PROBLEMS: 422,
    _body.UNREADABLE: 400,
    _body.TOO_LARGE: 413,
}


def status_of(kind):
    """The HTTP status for a Body outcome kind."""
    return STATUS[kind]


def routes(body):
    """{(method, path): handler} for master.httpd.serve over a Body."""

    async def get_menu(req):
        return 200, body.menu(), None

    async def post_plan(req):
        kind, obj = await body.execute(req.body)  # the raw bytes: one strict parse, in the Body
        return STATUS[kind], obj, None

    async def get_status(req):
        return 200, body.status(), None

    return {
        ("GET", "/menu"): get_menu,
        ("POST", "/plan"): post_plan,
        ("GET", "/status"): get_status,
    }
