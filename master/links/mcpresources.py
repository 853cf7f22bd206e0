# The body's status and reports as MCP resources (read, subscribed to; updates pushed by mcp.py on hub events).
import json

from master.links import jsonrpc
from master.links.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, RESOURCE_NOT_FOUND

STATUS_URI = "organbus://status"
REPORTS_URI = "organbus://reports"
RESOURCES = [
    {
        "uri": STATUS_URI,
        "name": "status",
        "description": "The body's /status document: organs, ports, plans, the event ring.",
        "mimeType": "application/json",
    },
    {
        "uri": REPORTS_URI,
        "name": "reports",
        "description": "The last plan reports and refused plans, oldest first.",
        "mimeType": "application/json",
    },
]
# hub events after which a resource reads differently
STATUS_EVENTS = ("registered", "refused", "offline", "duplicate", "plan", "rejected")
REPORT_EVENTS = ("plan", "rejected")


def read(body, mid, params):
    uri = params.get("uri")
    if not isinstance(uri, str):
        return jsonrpc.error(
            mid, INVALID_PARAMS, "params.uri must be a string, not %s" % jsonrpc.kind(uri)
        )
    if uri == STATUS_URI:
        obj = body.status()
    elif uri == REPORTS_URI:
        obj = reports(body)
    else:
        return jsonrpc.error(
            mid,
            RESOURCE_NOT_FOUND,
            "no resource %r; this server has %s, %s" % (uri, STATUS_URI, REPORTS_URI),
            {"uri": uri},
        )
    text = json.dumps(obj)
    return jsonrpc.result(
        mid, {"contents": [{"uri": uri, "mimeType": "application/json", "text": text}]}
    )


def reports(body):
    ring = getattr(body, "recent", None)
    items = ring.items() if ring is not None else []
    return {"reports": [e for e in items if e["event"] in REPORT_EVENTS]}


def subscribe(mid, params, session, on):
    uri = params.get("uri")
    if not isinstance(uri, str):
        return jsonrpc.error(
            mid, INVALID_PARAMS, "params.uri must be a string, not %s" % jsonrpc.kind(uri)
        )
    if uri not in (STATUS_URI, REPORTS_URI):
        return jsonrpc.error(mid, RESOURCE_NOT_FOUND, "no resource %r to subscribe" % (uri,))
    if session is None:
        why = "resources/subscribe needs a session: send the Mcp-Session-Id of initialize"
        return jsonrpc.error(mid, INVALID_REQUEST, why)
    if on and uri not in session.subscribed:
        session.subscribed.append(uri)
    elif not on and uri in session.subscribed:
        session.subscribed.remove(uri)
    return jsonrpc.result(mid, {})
