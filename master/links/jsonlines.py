# The JSON-lines link (`--console link`): one request per line in, one JSON reply line out (docs/master.md).
#
# Requests: {"op": "menu"}, {"op": "status"}, {"op": "plan", "plan": {...} or "<plan JSON text>"};
# an optional "id" is echoed. Replies carry "op", "status" (the HTTP route's code for the same
# outcome, master/links/routes.py) and "reply"; event log lines carry "event". A line is read with
# the strict reader (organbus.jsonread), so a duplicate key inside the plan is a problem of the
# plan, as it is over HTTP; a plan given as text goes to the Body as it is.
import json
import sys

import asyncio

from organbus import jsonread
from organbus import plan as _plan

from master.bus.outcome import CODE

_ENVELOPE = 64  # {"op": "plan", "id": ..., "plan": ...} around a plan
MAX_LINE = _plan.MAX_PLAN_BYTES + _ENVELOPE  # the one plan limit, plus the request around it
OPS = ("menu", "plan", "status")


def _reply(op, status, obj, rid):
    r = {"op": op, "status": status, "reply": obj}
    if rid is not None:
        r["id"] = rid
    return r


def _plan_dups(dups):
    # duplicate keys inside "plan", renamed relative to the plan (as plan.parse would name them)
    out = []
    for path, k in dups:
        if path == "plan":
            out.append(("", k))
        elif path.startswith("plan.") or path.startswith("plan["):
            out.append((path[5:] if path[4] == "." else path[4:], k))
    return out


async def handle(body, line):
    """The reply dict for one request line (bytes or str)."""
    if len(line) > MAX_LINE:
        return _reply(
            None, 413, {"problems": ["line: %d bytes, more than %d" % (len(line), MAX_LINE)]}, None
        )
    try:
        req, dups = jsonread.read(line)
    except jsonread.JsonError:
        return _reply(None, 400, {"problems": ["line: not JSON"]}, None)
    if not isinstance(req, dict):
        return _reply(None, 400, {"problems": ['line: expected an object with "op"']}, None)
    op = req.get("op")
    rid = req.get("id")
    outside = [d for d in dups if not (d[0] == "plan" or d[0][:5] in ("plan.", "plan["))]
    if outside:
        return _reply(
            op, 400, {"problems": ["line: duplicate key %s" % json.dumps(outside[0][1])]}, rid
        )
    if op == "menu":
        return _reply(op, 200, body.menu(), rid)
    if op == "status":
        return _reply(op, 200, body.status(), rid)
    if op == "plan":
        if "plan" not in req:
            return _reply(
                op, 400, {"problems": ["plan: missing (the plan object or its JSON text)"]}, rid
            )
        kind, obj = await body.execute(req["plan"], None, _plan_dups(dups))
        return _reply(op, CODE[kind], obj, rid)
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


def start(body, config):
    """The link's entry: serve stdin/stdout until its input ends (await it)."""
    return serve(body)
