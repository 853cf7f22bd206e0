# Plan validation (PROTOCOL.md section 8): one strict parse, one check against the menu's capabilities.
#
# One module for CPython and MicroPython: raw bytes -> parse() -> check() -> the scheduler, for
# every link. The core says *what* is wrong (a ParseError, or a list of problems each naming the
# field); only an HTTP route chooses a status code. No JSON Schema is built here (menu.py does
# that for GET /menu).
from organbus import jsonread
from organbus.jsonread import JsonError, Lone
from organbus.jsonread import quote as _quote
from organbus.utf8 import MAX_TEXT, ascii_str, clip_text, first_invalid

MAX_PLAN_BYTES = 4096  # the one size limit of a plan body, on every link (more: TooLarge)
MAX_DEPTH = jsonread.MAX_DEPTH
MAX_STEPS = 16  # the menu's max_steps unless a body says otherwise
TASK_ID_MAX = 15  # bytes
F32_MAX = 3.4028234663852886e38  # numbers travel as IEEE-754 binary32
_INF = float("inf")
# from text: a frozen build has no f32 for a 1e300 literal (mpy-tool refuses it)
_E300 = float("1e300")

TOP_KEYS = ("heard_req", "steps", "can_execute", "missing", "response")
STEP_KEYS = ("task_id", "action", "params", "priority", "depends_on")
SPEAKING = ("speak", "announce")  # abilities that say a text out loud
ONE_STEP_PRIORITY = 5

_MODULE_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"


class ParseError(ValueError):
    """The body is not one JSON text; `msg` names the cause and, inside the text, the offset."""

    def __init__(self, msg):
        super().__init__(msg)
        self.msg = msg


class TooLarge(ParseError):
    """The body is over MAX_PLAN_BYTES; refused unread (an HTTP route answers 413)."""


def parse(raw):
    """One plan body (bytes-like or str) -> (value, dups); raises ParseError (TooLarge).

    `dups` is jsonread's list of duplicate keys as (path, key); check() turns them into problems."""
    if isinstance(raw, str):
        try:
            raw = raw.encode()
        except UnicodeError:  # CPython: a lone surrogate; jsonread names it by its bytes
            raw = raw.encode("utf-8", "surrogatepass")
    elif not isinstance(raw, (bytes, bytearray, memoryview)):
        raise TypeError("plan.parse: expected bytes or str, got %s" % type(raw).__name__)
    if len(raw) > MAX_PLAN_BYTES:
        raise TooLarge("body: %d bytes, more than %d" % (len(raw), MAX_PLAN_BYTES))
    try:
        return jsonread.read(raw, MAX_DEPTH)
    except JsonError as e:
        raise ParseError("body: not JSON: " + e.msg)


def one_step(action, params, task_id="t1", response=""):
    """The plan of one step (PROTOCOL.md section 8): how a link runs a single ability that a
    person or a tool named (console direct steps, MCP tools/call, Body Protocol /speak)."""
    step = {
        "task_id": task_id,
        "action": action,
        "params": {} if params is None else params,
        "priority": ONE_STEP_PRIORITY,
        "depends_on": [],
    }
    return {
        "heard_req": 0,
        "steps": [step],
        "can_execute": True,
        "missing": [],
        "response": response,
    }


def _text_ok(s):
    # A str is text when it encodes to valid UTF-8: CPython refuses lone surrogates in encode();
    # a MicroPython str made by str() or json.loads may hold any bytes.
    if ascii_str(s):
        return True
    try:
        b = s.encode()
    except UnicodeError:
        return False
    return first_invalid(b) < 0


def _is_str(v):
    # a str the validator may take, quote back and send: UTF-8 text
    return isinstance(v, str) and (ascii_str(v) or _text_ok(v))


def _kind(v):
    if v is None:
        return "null"
    if v is True or v is False:
        return "a bool"
    if isinstance(v, int):
        return "an int"
    if isinstance(v, float):
        if v - v != 0:
            return "a non-finite number"
        return "a number with a fraction" if v != int(v) else "a number"
    if isinstance(v, Lone):
        return "a string with a lone surrogate \\u" + v.esc
    if isinstance(v, str):
        return "a string" if _text_ok(v) else "a string that is not UTF-8 text"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def _is_num(v):
    return v is not True and v is not False and isinstance(v, (int, float)) and v - v == 0


def _is_int(v):
    # an int takes any JSON number with no fractional part, 30.0 included
    return _is_num(v) and (isinstance(v, int) or v == int(v))


def _num(x):
    if isinstance(x, int) and (x > 10**15 or x < -(10**15)):
        # no str() of a huge int: CPython refuses past 4,300 digits (only a built plan has one)
        return "%g" % float(x) if -_E300 < x < _E300 else "an int beyond 1e300"
    if isinstance(x, float):
        if x == int(x) and abs(x) < 1e15:
            return str(int(x))
        return "%g" % x
    return str(x)


def _type_name(t):
    return {"int": "an int", "float": "a number", "bool": "a bool", "string": "a string"}[t]


def _step_at(i):
    return "steps[%d]" % i


def _param_at(i, name):
    return "steps[%d].params.%s" % (i, name)


def _check_param(i, name, p, v, problems, notes):
    # Returns the value to forward (text clamped), or None after a problem; the field's name
    # (steps[i].params.name) is formatted only for a problem or a note.
    t = p["type"]
    if t == "string":
        if not _is_str(v):
            problems.append("%s: expected a string, got %s" % (_param_at(i, name), _kind(v)))
            return None
        n = _utf8_len(v)
        if n > MAX_TEXT:
            v = clip_text(v, MAX_TEXT)
            notes.append(
                "%s: %d bytes, clamped to %d at a character boundary"
                % (_param_at(i, name), n, MAX_TEXT)
            )
        elif n < p["min"] or n > p["max"]:
            notes.append(
                "%s: %d bytes is outside %s..%s bytes; forwarded as given (the organ enforces it)"
                % (_param_at(i, name), n, _num(p["min"]), _num(p["max"]))
            )
        return v
    if t == "bool":
        if v is not True and v is not False:
            problems.append("%s: expected true or false, got %s" % (_param_at(i, name), _kind(v)))
            return None
        return v
    # (an int is the common case: taken without the two calls)
    ok = type(v) is int or (_is_int(v) if t == "int" else _is_num(v))
    if not ok:
        problems.append("%s: expected %s, got %s" % (_param_at(i, name), _type_name(t), _kind(v)))
        return None
    if v < p["min"] or v > p["max"]:
        wide = v > F32_MAX or v < -F32_MAX
        notes.append(
            "%s: %s is outside %s..%s; forwarded as given (the organ clamps)%s"
            % (
                _param_at(i, name),
                _num(v),
                _num(p["min"]),
                _num(p["max"]),
                (
                    "; beyond the wire's 32-bit float it travels as %sinf" % ("-" if v < 0 else "")
                    if wide
                    else ""
                ),
            )
        )
        if wide:
            return _INF if v > 0 else -_INF
    return v


def _unknown(where, obj, known, problems):
    # The keys of obj not in `known`, sorted, for naming; a key that is not a str, or not UTF-8
    # text, is a problem of its own and never quoted back (the reader only makes text keys).
    out = []
    for k in obj:
        if k in known:
            continue
        if not isinstance(k, str):
            problems.append("%s: a key that is %s, not a string" % (where, _kind(k)))
        elif not _text_ok(k):
            problems.append("%s: a key that is not UTF-8 text" % where)
        else:
            out.append(k)
    out.sort()
    return out


def _unknown_keys(where, obj, allowed, problems):
    for k in _unknown(where or "plan", obj, allowed, problems):
        problems.append(
            "%s%s: unknown key (allowed: %s)"
            % (where + "." if where else "", k, ", ".join(allowed))
        )


def _utf8_len(s):
    return len(s) if ascii_str(s) else len(s.encode())


def _check_step(i, st, caps, names, problems, notes):
    # Returns the normalised step dict (never None so dependency checks can still run).
    out = {"task_id": None, "action": None, "params": {}, "priority": 0, "depends_on": []}
    if not isinstance(st, dict):
        problems.append("%s: expected an object, got %s" % (_step_at(i), _kind(st)))
        return out
    have = 0  # STEP_KEYS the step has: it has another key when it has more keys than these
    for k in STEP_KEYS:
        if k in st:
            have += 1
    if have < len(st):
        _unknown_keys(_step_at(i), st, STEP_KEYS, problems)
    if have < len(STEP_KEYS):
        for k in STEP_KEYS:
            if k not in st:
                problems.append("%s.%s: missing" % (_step_at(i), k))
    tid = st.get("task_id")
    if "task_id" in st:
        if not (type(tid) is str and ascii_str(tid)) and not _is_str(tid):
            problems.append("%s.task_id: expected a string, got %s" % (_step_at(i), _kind(tid)))
        elif not tid:
            problems.append("%s.task_id: empty" % _step_at(i))
        elif _utf8_len(tid) > TASK_ID_MAX:
            problems.append(
                "%s.task_id: %d bytes, more than %d" % (_step_at(i), _utf8_len(tid), TASK_ID_MAX)
            )
        else:
            out["task_id"] = tid
    cap = None
    act = st.get("action")
    if "action" in st:
        if not (type(act) is str and ascii_str(act)) and not _is_str(act):
            problems.append("%s.action: expected a string, got %s" % (_step_at(i), _kind(act)))
        else:
            cap = caps.get(act)
            if cap is None and "." in act:
                mod, _, last = act.partition(".")
                if 0 < len(mod) <= 15 and all(c in _MODULE_CHARS for c in mod) and last in caps:
                    cap = caps[last]
                    notes.append(
                        "%s.action: %s taken as %s (module id stripped)"
                        % (_step_at(i), _quote(act), _quote(last))
                    )
            if cap is None:
                problems.append(
                    "%s.action: %s is not on the menu (menu: %s)"
                    % (_step_at(i), _quote(act), ", ".join(names) if names else "empty")
                )
            else:
                out["action"] = cap["name"]
    if "params" in st:
        ps = st["params"]
        if not isinstance(ps, dict):
            problems.append("%s.params: expected an object, got %s" % (_step_at(i), _kind(ps)))
        elif cap is not None:
            declared = cap["params"]
            dnames = [p["name"] for p in declared]
            extra = ()
            for k in ps:
                if k not in dnames:
                    extra = _unknown(_step_at(i) + ".params", ps, dnames, problems)
                    break
            for k in extra:
                if dnames:
                    problems.append(
                        "%s.params.%s: not a param of %s (params: %s)"
                        % (_step_at(i), k, cap["name"], ", ".join(dnames))
                    )
                else:
                    problems.append(
                        "%s.params.%s: not a param of %s (it takes none)"
                        % (_step_at(i), k, cap["name"])
                    )
            for p in declared:
                if p["name"] not in ps:
                    problems.append("%s: missing" % _param_at(i, p["name"]))
                    continue
                v = _check_param(i, p["name"], p, ps[p["name"]], problems, notes)
                if v is not None:
                    out["params"][p["name"]] = v
    if "priority" in st:
        pr = st["priority"]
        if type(pr) is not int and not _is_int(pr):
            problems.append("%s.priority: expected an int 0..9, got %s" % (_step_at(i), _kind(pr)))
        elif pr < 0 or pr > 9:
            problems.append("%s.priority: %s is outside 0..9" % (_step_at(i), _num(pr)))
        else:
            out["priority"] = int(pr)
    if "depends_on" in st:
        d = st["depends_on"]
        if not isinstance(d, list):
            problems.append("%s.depends_on: expected an array, got %s" % (_step_at(i), _kind(d)))
        else:
            for j, x in enumerate(d):
                if not (type(x) is str and ascii_str(x)) and not _is_str(x):
                    problems.append(
                        "%s.depends_on[%d]: expected a string, got %s" % (_step_at(i), j, _kind(x))
                    )
                else:
                    out["depends_on"].append(x)
    return out


def _dep_at(i, j):
    return "steps[%d].depends_on[%d]" % (i, j)


def _check_deps(steps, problems):
    # Dangling, self and cyclic `depends_on`; returns nothing, appends problems.
    index = {}
    for i, st in enumerate(steps):
        t = st["task_id"]
        if t is None:
            continue
        if t in index:
            problems.append("steps[%d].task_id: %s repeats steps[%d]" % (i, _quote(t), index[t]))
        else:
            index[t] = i
    edges = []
    later = False  # a step depends on a later one: only then can there be a cycle
    for i, st in enumerate(steps):
        e = []
        t = st["task_id"]
        for j, d in enumerate(st["depends_on"]):
            k = index.get(d, -1)
            if d == t:
                problems.append("%s: %s is the step itself" % (_dep_at(i, j), _quote(d)))
            elif k < 0:
                problems.append("%s: %s names no task in the plan" % (_dep_at(i, j), _quote(d)))
            elif k != i and k not in e:
                e.append(k)
                later = later or k > i
        edges.append(e)
    if not later:
        return  # every edge points back: no cycle
    # cycles: colour DFS from each step in plan order; each cycle reported once, at its first step
    state = [0] * len(steps)  # 0 new, 1 on stack, 2 done
    seen = []
    for root in range(len(steps)):
        if state[root]:
            continue
        stack = [(root, 0)]
        path = [root]
        state[root] = 1
        while stack:
            node, k = stack[-1]
            if k < len(edges[node]):
                stack[-1] = (node, k + 1)
                nxt = edges[node][k]
                if state[nxt] == 0:
                    state[nxt] = 1
                    stack.append((nxt, 0))
                    path.append(nxt)
                elif state[nxt] == 1:
                    cyc = path[path.index(nxt) :]
                    key = sorted(cyc)
                    if key not in seen:
                        seen.append(key)
                        first = min(cyc)
                        r = cyc.index(first)
                        cyc = cyc[r:] + cyc[:r]
                        names = [steps[c]["task_id"] for c in cyc] + [steps[first]["task_id"]]
                        problems.append(
                            "steps[%d].depends_on: cycle %s" % (first, " -> ".join(names))
                        )
            else:
                state[node] = 2
                stack.pop()
                path.pop()


def validate(raw_or_obj, caps, max_steps=MAX_STEPS):
    """parse() then check() for a raw body (bytes-like or str), or check() for a built plan.

    (plan, problems, notes); a body that does not parse gives (None, [its ParseError msg], [])."""
    if isinstance(raw_or_obj, (bytes, bytearray, memoryview, str)):
        try:
            obj, dups = parse(raw_or_obj)
        except ParseError as e:
            return None, [e.msg], []
    else:
        obj, dups = raw_or_obj, ()
    return check(obj, caps, dups, max_steps)


def check(obj, caps, dups=(), max_steps=MAX_STEPS):
    """(plan, problems, notes) of a parsed plan against the menu capabilities `caps` (a list of
    menu_capability dicts). `dups` are parse()'s duplicate keys. Empty `problems` means accepted,
    and `plan` is then the normalised plan (module ids stripped, text clamped); otherwise `plan`
    is `obj` as given."""
    problems = []
    for path, k in dups:
        problems.append("%s: duplicate key %s" % (path or "plan", _quote(k)))
    notes = []
    if isinstance(caps, dict):
        raise TypeError("plan.check: caps is the menu's capability list, not the menu")
    by_name = {}
    names = []
    for c in caps:
        by_name[c["name"]] = c
        names.append(c["name"])
    caps = by_name
    if not isinstance(obj, dict):
        problems.append("plan: expected an object, got %s" % _kind(obj))
        return obj, problems, notes
    _unknown_keys("", obj, TOP_KEYS, problems)
    for k in TOP_KEYS:
        if k not in obj:
            problems.append("%s: missing" % k)
    out = {"heard_req": 0, "steps": [], "can_execute": True, "missing": [], "response": ""}
    if "heard_req" in obj:
        h = obj["heard_req"]
        if not _is_int(h):
            problems.append("heard_req: expected an int, got %s" % _kind(h))
        else:
            out["heard_req"] = int(h)
    steps = obj.get("steps")
    if "steps" in obj and not isinstance(steps, list):
        problems.append("steps: expected an array, got %s" % _kind(steps))
    elif isinstance(steps, list):
        if len(steps) > max_steps:
            problems.append("steps: %d steps, more than max_steps %d" % (len(steps), max_steps))
        for i, st in enumerate(steps):
            out["steps"].append(_check_step(i, st, caps, names, problems, notes))
        _check_deps(out["steps"], problems)
    ce = obj.get("can_execute")
    if "can_execute" in obj:
        if ce is not True and ce is not False:
            problems.append("can_execute: expected true or false, got %s" % _kind(ce))
        else:
            out["can_execute"] = ce
    miss = obj.get("missing")
    if "missing" in obj:
        if not isinstance(miss, list):
            problems.append("missing: expected an array, got %s" % _kind(miss))
        else:
            for j, x in enumerate(miss):
                if not _is_str(x):
                    problems.append("missing[%d]: expected a string, got %s" % (j, _kind(x)))
                else:
                    out["missing"].append(x)
            if ce is False and not miss:
                problems.append("missing: empty while can_execute is false (name what is missing)")
    resp = obj.get("response")
    if "response" in obj:
        if not _is_str(resp):
            problems.append("response: expected a string, got %s" % _kind(resp))
        else:
            out["response"] = resp
            speaks = [n for n in SPEAKING if n in caps]
            if resp and speaks and not any(s["action"] in SPEAKING for s in out["steps"]):
                notes.append(
                    "response: not spoken (no step speaks it while %s is on the menu); "
                    "the body stays silent" % speaks[0]
                )
    if problems:
        return obj, problems, notes
    return out, problems, notes
