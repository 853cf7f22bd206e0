# The JSON-lines console link: one request per line in, one JSON reply line out (docs/master.md).
#
# Requests: {"op": "menu"}, {"op": "status"}, {"op": "plan", "plan": {...}}; an optional "id"
# is echoed. Replies carry "op" (and "status", "reply"); event log lines carry "event".
import json
import sys

try:
    import asyncio
except ImportError:  # pragma: no cover
    asyncio = None

MAX_LINE = 16384
OPS = ("menu", "plan", "status")


def _reply(op, status, obj, rid):
    r = {"op": op, "status": status, "reply": obj}
    if rid is not None:
        r["id"] = rid
    return r


async def handle(body, line):
    """The reply dict for one request line (bytes or str)."""
    if len(line) > MAX_LINE:
        return _reply(
            None, 413, {"problems": ["line: %d bytes, more than %d" % (len(line), MAX_LINE)]}, None
        )
    try:
        req = json.loads(line)
    except ValueError:
        return _reply(None, 400, {"problems": ["line: not JSON"]}, None)
    if not isinstance(req, dict):
        return _reply(None, 400, {"problems": ['line: expected an object with "op"']}, None)
    op = req.get("op")
    rid = req.get("id")
    if op == "menu":
        return _reply(op, 200, body.menu(), rid)
    if op == "status":
        return _reply(op, 200, body.status(), rid)
    if op == "plan":
        if "plan" not in req:
            return _reply(
                op, 400, {"problems": ["plan: missing (the plan object or its JSON text)"]}, rid
            )
        status, obj = await body.execute(req["plan"])
        return _reply(op, status, obj, rid)
    return _reply(
        op, 400, {"problems": ["op: unknown %s (ops: %s)" % (json.dumps(op), ", ".join(OPS))]}, rid
    )


async def serve(body, stream=None, write=None):
    """Read request lines from `stream` (stdin) until EOF; plans run concurrently."""
    if stream is None:
        stream = sys.stdin
    if write is None:
        write = print
    reader = asyncio.StreamReader(stream)

    async def one(line):
        write(json.dumps(await handle(body, line)))

    while True:
        line = await reader.readline()
        if not line:
            return
        if not line.strip():
            continue
        asyncio.create_task(one(line))
