# JSON-RPC 2.0 for the master's links (MCP over HTTP, xiaozhi's MCP over WebSocket): the error codes and the two envelopes, once.
from micropython import const

PARSE_ERROR = const(-32700)
INVALID_REQUEST = const(-32600)
METHOD_NOT_FOUND = const(-32601)
INVALID_PARAMS = const(-32602)
INTERNAL_ERROR = const(-32603)
RESOURCE_NOT_FOUND = const(-32002)


def error(mid, code, message, data=None):
    err = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": mid, "error": err}


def result(mid, result):
    return {"jsonrpc": "2.0", "id": mid, "result": result}


def kind(v):
    # what a JSON value is, for messages (bool before int: True is an int in Python)
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    return "an array" if isinstance(v, list) else "an object"


def id_ok(mid):
    # MCP: a request id is a string or an integer, never null (nor a float, a bool, ...)
    return isinstance(mid, str) or isinstance(mid, int) and not isinstance(mid, bool)


def not_finite(v, where, depth=0):
    """(path, value) of the first NaN or infinity in a decoded JSON value, else None."""
    if isinstance(v, float):
        return (where, v) if v - v != 0 else None  # inf - inf and nan - nan are nan
    if depth > 16:
        return None
    if isinstance(v, dict):
        for k in v:
            bad = not_finite(v[k], "%s.%s" % (where, k), depth + 1)
            if bad:
                return bad
    elif isinstance(v, list):
        for i, x in enumerate(v):
            bad = not_finite(x, "%s[%d]" % (where, i), depth + 1)
            if bad:
                return bad
    return None
