# The live menu as MCP tools: a tool per capability, a call's arguments checked, its report as a tool result, list cursors.
import json

from master.bus.outcome import OFFLINE, REFUSED, SKIPPED, STOPPED, TIMEOUT
from organbus.menu import param_schema

from master.links import jsonrpc
from master.links.jsonrpc import INVALID_PARAMS, error, kind, not_finite

_FAILED = {
    REFUSED: "the organ refused the command (it answered status 1)",
    TIMEOUT: "the organ did not answer the command within 1 s",
    OFFLINE: "the organ went offline",
    STOPPED: "the organ stopped before finishing",
    SKIPPED: "the step was skipped",
}


def tool_for(cap):
    """The MCP tool of one menu capability."""
    props = {}
    names = []
    for p in cap.get("params", ()):
        props[p["name"]] = param_schema(p)
        names.append(p["name"])
    return {
        "name": cap["name"],
        "description": cap.get("description", ""),
        "inputSchema": {
            "type": "object",
            "properties": props,
            "required": names,
            "additionalProperties": False,
        },
    }


def tools(menu):
    return [tool_for(c) for c in menu.get("capabilities", ())]


def summary(step):
    """One honest line for a step of the report."""
    line = "%s: %s" % (step.get("action"), step.get("status"))
    if "ms" in step:
        line += " (%s ms)" % step["ms"]
    why = step.get("reason") or _FAILED.get(step.get("status"))
    if why:
        line += ": " + why
    return line


def listed(names):
    """The tools as a refusal lists them (made only for a refusal: a str costs)."""
    return ", ".join(names) if names else "none (no organ is online)"


def call_args(mid, params, names):
    """(name, args, names) of a tools/call, or an error response."""
    name = params.get("name")
    args = params.get("arguments")
    if not isinstance(name, str) or name not in names:
        return error(
            mid,
            INVALID_PARAMS,
            "unknown tool %r; available tools: %s" % (name, listed(names)),
            {"tools": names},
        )
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return error(
            mid,
            INVALID_PARAMS,
            "arguments of %r must be an object; available tools: %s" % (name, listed(names)),
            {"tools": names},
        )
    bad = not_finite(args, "arguments")
    if bad:  # NaN or an infinity (json.loads takes both, 1e999 is inf): JSON carries neither
        why = "%s: %s is not a number JSON can carry" % bad
        return error(
            mid,
            INVALID_PARAMS,
            "invalid arguments for %r: %s; available tools: %s" % (name, why, listed(names)),
            {"problems": [why], "tools": names},
        )
    return name, args, names


def problems(mid, name, out, names):
    problems = out.get("problems", [])
    return error(
        mid,
        INVALID_PARAMS,
        "invalid arguments for %r: %s; available tools: %s"
        % (name, "; ".join(problems), listed(names)),
        {"problems": problems, "tools": names},
    )


def tool_result(mid, name, out, version, said=None):
    """The result of a call: a line per step (or `said`, for a step still under way: no
    error), the master's notes, the report as JSON."""
    if said is None:
        steps = out.get("steps") or [{"action": name, "status": "missing from report"}]
        lines = [summary(s) for s in steps]
    else:
        lines = [said]
    for n in out.get("notes", ()):
        lines.append("note: " + n)
    # The line for people first, then the master's report as JSON text (the spec asks
    # for the serialized JSON beside structuredContent, and 2025-03-26 has only this).
    result = {
        "content": [
            {"type": "text", "text": "\n".join(lines)},
            {"type": "text", "text": json.dumps(out)},
        ],
        "isError": said is None and not out.get("ok", False),
    }
    if version != "2025-03-26":
        result["structuredContent"] = out
    return jsonrpc.result(mid, result)


def cursor_index(cursor, count):
    """The list index a pagination cursor names: None or "" is the first page, a cursor this
    server gave is the decimal index of a page's first item (0..count). Raises ValueError with
    the reason for any other (MCP: an invalid cursor is error -32602). The HTTP link answers
    every list whole, so it never gives one; the xiaozhi link pages its tools/list."""
    if cursor is None or cursor == "":
        return 0
    if not isinstance(cursor, str):
        raise ValueError("cursor must be a string from nextCursor, not %s" % kind(cursor))
    if not cursor.isdigit() or len(cursor) > 6 or int(cursor) > count:
        raise ValueError("invalid cursor %r: not one this server gave" % cursor[:20])
    return int(cursor)


def cursor_or_error(mid, params, count):
    try:
        return cursor_index(params.get("cursor"), count)
    except ValueError as e:
        return error(mid, INVALID_PARAMS, str(e))


def arg_dups(dups, prefix):
    # duplicate keys inside a tools/call's arguments, named as the one-step plan's params
    out = []
    for path, k in dups:
        if path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "["):
            out.append(("steps[0].params" + path[len(prefix) :], k))
    return out
