# Plan validation (PROTOCOL.md section 8): a strict JSON reader and whole-plan checks against a menu.
#
# One module for CPython and MicroPython. The reader is our own so both interpreters refuse the same
# bodies with the same words: duplicate keys, NaN/Infinity, lone surrogates, trailing data and
# control characters are caught here, which neither json module does alike on both.

MAX_PLAN_BYTES = 8192  # a plan body larger than this is refused unread (status 413)
MAX_DEPTH = 16  # a plan nests 4 deep; anything deeper than this is not a plan
TEXT_CLAMP = 240  # bytes: the master clamps `text` to this at a character boundary
TASK_ID_MAX = 15  # bytes
F32_MAX = 3.4028234663852886e38  # numbers travel as IEEE-754 binary32
_INF = float("inf")

TOP_KEYS = ("heard_req", "steps", "can_execute", "missing", "response")
STEP_KEYS = ("task_id", "action", "params", "priority", "depends_on")
SPEAKING = ("speak", "announce")  # abilities that say a text out loud

_WS = b" \t\n\r"
_HEX = b"0123456789abcdefABCDEF"
# escape byte -> replacement bytes
_ESC = {
    0x22: b'"',
    0x5C: b"\\",
    0x2F: b"/",
    0x62: b"\b",
    0x66: b"\f",
    0x6E: b"\n",
    0x72: b"\r",
    0x74: b"\t",
}
_MODULE_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"


class ParseError(ValueError):
    """The body is not one JSON text; `status` is the HTTP answer (400, or 413 when too large)."""

    def __init__(self, msg, status=400):
        super().__init__(msg)
        self.msg = msg
        self.status = status


class Lone:
    """A JSON string that held a lone UTF-16 surrogate escape: not text, kept to name the field."""

    def __init__(self, esc):
        self.esc = esc


class _Reader:
    # Recursive descent over the body's bytes (O(1) indexing on both interpreters; strings are
    # cut out with find() and decoded at the end); `path` names where duplicate keys sit.
    def __init__(self, b):
        self.s = b
        self.i = 0
        self.dups = []

    def fail(self, what):
        if self.i >= len(self.s):
            raise ParseError("body: not JSON: unexpected end at offset %d" % self.i)
        raise ParseError("body: not JSON: %s at offset %d" % (what, self.i))

    def ws(self):
        s = self.s
        n = len(s)
        i = self.i
        while i < n and s[i] in _WS:
            i += 1
        self.i = i

    def value(self, path, depth):
        if depth > MAX_DEPTH:
            self.fail("nested deeper than %d levels" % MAX_DEPTH)
        self.ws()
        if self.i >= len(self.s):
            self.fail("")
        c = self.s[self.i]
        if c == 0x7B:  # {
            return self.obj(path, depth + 1)
        if c == 0x5B:  # [
            return self.arr(path, depth + 1)
        if c == 0x22:  # "
            return self.string()
        if c == 0x2D or 0x30 <= c <= 0x39:
            return self.number()
        for word, v in ((b"true", True), (b"false", False), (b"null", None)):
            if self.s.startswith(word, self.i):
                self.i += len(word)
                return v
        self.fail("unexpected character %s" % _quote(self._char()))

    def _char(self):
        # the character at i, for messages (the body is valid UTF-8)
        s = self.s
        j = self.i + 1
        while j < len(s) and (s[j] & 0xC0) == 0x80:
            j += 1
        return str(s[self.i : j], "utf-8")

    def obj(self, path, depth):
        self.i += 1
        out = {}
        self.ws()
        if self.s.startswith(b"}", self.i):
            self.i += 1
            return out
        while True:
            self.ws()
            if not self.s.startswith(b'"', self.i):
                self.fail("expected a key string")
            k = self.string()
            if isinstance(k, Lone):
                k = "\\u" + k.esc
            self.ws()
            if not self.s.startswith(b":", self.i):
                self.fail("expected ':'")
            self.i += 1
            sub = k if not path else path + "." + k
            v = self.value(sub, depth)
            if k in out:
                self.dups.append("%s: duplicate key %s" % (path or "plan", _quote(k)))
            out[k] = v
            self.ws()
            if self.s.startswith(b",", self.i):
                self.i += 1
                continue
            if self.s.startswith(b"}", self.i):
                self.i += 1
                return out
            self.fail("expected ',' or '}'")

    def arr(self, path, depth):
        self.i += 1
        out = []
        self.ws()
        if self.s.startswith(b"]", self.i):
            self.i += 1
            return out
        while True:
            out.append(self.value("%s[%d]" % (path, len(out)), depth))
            self.ws()
            if self.s.startswith(b",", self.i):
                self.i += 1
                continue
            if self.s.startswith(b"]", self.i):
                self.i += 1
                return out
            self.fail("expected ',' or ']'")

    def hex4(self):
        h = self.s[self.i : self.i + 4]
        if len(h) < 4:
            self.i = len(self.s)
            self.fail("")
        for c in h:
            if c not in _HEX:
                self.fail("bad \\u escape")
        self.i += 4
        h = str(h, "ascii")
        return int(h, 16), h

    def _plain(self, parts, a, b):
        # raw bytes a..b of a string: no control characters allowed
        if a < b:
            seg = self.s[a:b]
            if min(seg) < 0x20:
                k = a
                while self.s[k] >= 0x20:
                    k += 1
                self.i = k
                self.fail("control character in a string")
            parts.append(seg)

    def string(self):
        s = self.s
        n = len(s)
        i = self.i + 1
        parts = []
        lone = None
        while True:
            j = s.find(b'"', i)
            if j < 0:
                self._plain(parts, i, n)
                self.i = n
                self.fail("")
            k = s.find(b"\\", i, j)
            if k < 0:
                self._plain(parts, i, j)
                self.i = j + 1
                break
            self._plain(parts, i, k)
            self.i = k + 1
            if self.i >= n:
                self.fail("")
            e = s[self.i]
            if e in _ESC:
                parts.append(_ESC[e])
                self.i += 1
            elif e == 0x75:  # u
                self.i += 1
                cp, h = self.hex4()
                if 0xD800 <= cp < 0xDC00 and s.startswith(b"\\u", self.i):
                    save = self.i
                    self.i += 2
                    lo, h2 = self.hex4()
                    if 0xDC00 <= lo < 0xE000:
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                    else:
                        self.i = save
                if 0xD800 <= cp < 0xE000:
                    lone = lone or h.lower()
                else:
                    parts.append(chr(cp).encode())
            else:
                self.fail("bad escape \\%s" % self._char())
            i = self.i
        if lone:
            return Lone(lone)
        return str(b"".join(parts), "utf-8")

    def number(self):
        s = self.s
        n = len(s)
        i = start = self.i
        if s[i] == 0x2D:
            i += 1
        if i < n and s[i] == 0x30:
            i += 1
        elif i < n and 0x31 <= s[i] <= 0x39:
            while i < n and 0x30 <= s[i] <= 0x39:
                i += 1
        else:
            self.i = i
            self.fail("bad number")
        frac = False
        if i < n and s[i] == 0x2E:  # .
            i += 1
            j = i
            while i < n and 0x30 <= s[i] <= 0x39:
                i += 1
            if i == j:
                self.i = i
                self.fail("bad number")
            frac = True
        if i < n and (s[i] == 0x65 or s[i] == 0x45):  # e E
            i += 1
            if i < n and (s[i] == 0x2B or s[i] == 0x2D):
                i += 1
            j = i
            while i < n and 0x30 <= s[i] <= 0x39:
                i += 1
            if i == j:
                self.i = i
                self.fail("bad number")
            frac = True
        self.i = i
        text = s[start:i]
        if not frac:
            return int(text)
        x = float(text)
        if x - x != 0:  # inf (NaN cannot be spelled in JSON)
            self.i = start
            self.fail("number out of range")
        return x


def _quote(s):
    # A short JSON-style quote for problem texts (identical on both interpreters).
    out = ['"']
    for c in s[:40]:
        if c == '"' or c == "\\":
            out.append("\\" + c)
        elif c < " ":
            out.append("\\u%04x" % ord(c))
        else:
            out.append(c)
    if len(s) > 40:
        out.append("...")
    out.append('"')
    return "".join(out)


def parse(raw):
    """One JSON text (bytes or str) -> (value, duplicate-key problems); raises ParseError."""
    if isinstance(raw, str):
        raw = raw.encode()
    elif isinstance(raw, (bytes, bytearray, memoryview)):
        raw = bytes(raw)
    else:
        raise ParseError("body: expected bytes or str")
    if len(raw) > MAX_PLAN_BYTES:
        raise ParseError("body: %d bytes, more than %d" % (len(raw), MAX_PLAN_BYTES), 413)
    try:
        str(raw, "utf-8")
    except Exception:
        raise ParseError("body: not UTF-8 text")
    r = _Reader(raw)
    r.ws()
    if r.i >= len(raw):
        raise ParseError("body: not JSON: empty")
    v = r.value("", 0)
    r.ws()
    if r.i < len(raw):
        r.fail("trailing data")
    return v, r.dups


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
        return "a string"
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
        return "%g" % float(x) if -1e300 < x < 1e300 else "a %d-digit number" % len(str(abs(x)))
    if isinstance(x, float):
        if x == int(x) and abs(x) < 1e15:
            return str(int(x))
        return "%g" % x
    return str(x)


def clamp_text(s, limit=TEXT_CLAMP):
    """(text, original byte length): `s` cut to `limit` UTF-8 bytes at a character boundary."""
    b = s.encode()
    n = len(b)
    if n <= limit:
        return s, n
    k = limit
    while k > 0 and (b[k] & 0xC0) == 0x80:
        k -= 1
    return str(b[:k], "utf-8"), n


def _type_name(t):
    return {"int": "an int", "float": "a number", "bool": "a bool", "string": "a string"}[t]


def _check_param(where, p, v, problems, notes):
    # Returns the value to forward (text clamped), or None after a problem.
    t = p["type"]
    if t == "string":
        if not isinstance(v, str):
            problems.append("%s: expected a string, got %s" % (where, _kind(v)))
            return None
        v2, n = clamp_text(v)
        if n > TEXT_CLAMP:
            notes.append(
                "%s: %d bytes, clamped to %d at a character boundary" % (where, n, TEXT_CLAMP)
            )
        elif n < p["min"] or n > p["max"]:
            notes.append(
                "%s: %d bytes is outside %s..%s bytes; forwarded as given (the organ enforces it)"
                % (where, n, _num(p["min"]), _num(p["max"]))
            )
        return v2
    if t == "bool":
        if v is not True and v is not False:
            problems.append("%s: expected true or false, got %s" % (where, _kind(v)))
            return None
        return v
    ok = _is_int(v) if t == "int" else _is_num(v)
    if not ok:
        problems.append("%s: expected %s, got %s" % (where, _type_name(t), _kind(v)))
        return None
    if v < p["min"] or v > p["max"]:
        wide = v > F32_MAX or v < -F32_MAX
        notes.append(
            "%s: %s is outside %s..%s; forwarded as given (the organ clamps)%s"
            % (
                where,
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


def _unknown_keys(where, obj, allowed, problems):
    for k in sorted(obj):
        if k not in allowed:
            problems.append("%s%s: unknown key (allowed: %s)" % (where, k, ", ".join(allowed)))


def _utf8_len(s):
    return len(s.encode())


def _check_step(i, st, caps, names, problems, notes):
    # Returns the normalised step dict (never None so dependency checks can still run).
    w = "steps[%d]" % i
    out = {"task_id": None, "action": None, "params": {}, "priority": 0, "depends_on": []}
    if not isinstance(st, dict):
        problems.append("%s: expected an object, got %s" % (w, _kind(st)))
        return out
    _unknown_keys(w + ".", st, STEP_KEYS, problems)
    for k in STEP_KEYS:
        if k not in st:
            problems.append("%s.%s: missing" % (w, k))
    tid = st.get("task_id")
    if "task_id" in st:
        if not isinstance(tid, str):
            problems.append("%s.task_id: expected a string, got %s" % (w, _kind(tid)))
        elif not tid:
            problems.append("%s.task_id: empty" % w)
        elif _utf8_len(tid) > TASK_ID_MAX:
            problems.append("%s.task_id: %d bytes, more than %d" % (w, _utf8_len(tid), TASK_ID_MAX))
        else:
            out["task_id"] = tid
    cap = None
    act = st.get("action")
    if "action" in st:
        if not isinstance(act, str):
            problems.append("%s.action: expected a string, got %s" % (w, _kind(act)))
        else:
            cap = caps.get(act)
            if cap is None and "." in act:
                mod, _, last = act.partition(".")
                if 0 < len(mod) <= 15 and all(c in _MODULE_CHARS for c in mod) and last in caps:
                    cap = caps[last]
                    notes.append(
                        "%s.action: %s taken as %s (module id stripped)"
                        % (w, _quote(act), _quote(last))
                    )
            if cap is None:
                problems.append(
                    "%s.action: %s is not on the menu (menu: %s)"
                    % (w, _quote(act), ", ".join(names) if names else "empty")
                )
            else:
                out["action"] = cap["name"]
    if "params" in st:
        ps = st["params"]
        if not isinstance(ps, dict):
            problems.append("%s.params: expected an object, got %s" % (w, _kind(ps)))
        elif cap is not None:
            declared = cap["params"]
            dnames = [p["name"] for p in declared]
            for k in sorted(ps):
                if k not in dnames:
                    if dnames:
                        problems.append(
                            "%s.params.%s: not a param of %s (params: %s)"
                            % (w, k, cap["name"], ", ".join(dnames))
                        )
                    else:
                        problems.append(
                            "%s.params.%s: not a param of %s (it takes none)" % (w, k, cap["name"])
                        )
            for p in declared:
                where = "%s.params.%s" % (w, p["name"])
                if p["name"] not in ps:
                    problems.append("%s: missing" % where)
                    continue
                v = _check_param(where, p, ps[p["name"]], problems, notes)
                if v is not None:
                    out["params"][p["name"]] = v
    if "priority" in st:
        pr = st["priority"]
        if not _is_int(pr):
            problems.append("%s.priority: expected an int 0..9, got %s" % (w, _kind(pr)))
        elif pr < 0 or pr > 9:
            problems.append("%s.priority: %s is outside 0..9" % (w, _num(pr)))
        else:
            out["priority"] = int(pr)
    if "depends_on" in st:
        d = st["depends_on"]
        if not isinstance(d, list):
            problems.append("%s.depends_on: expected an array, got %s" % (w, _kind(d)))
        else:
            for j, x in enumerate(d):
                if not isinstance(x, str):
                    problems.append(
                        "%s.depends_on[%d]: expected a string, got %s" % (w, j, _kind(x))
                    )
                else:
                    out["depends_on"].append(x)
    return out


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
    for i, st in enumerate(steps):
        e = []
        for j, d in enumerate(st["depends_on"]):
            w = "steps[%d].depends_on[%d]" % (i, j)
            if d == st["task_id"]:
                problems.append("%s: %s is the step itself" % (w, _quote(d)))
            elif d not in index:
                problems.append("%s: %s names no task in the plan" % (w, _quote(d)))
            elif index[d] not in e and index[d] != i:
                e.append(index[d])
        edges.append(e)
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


def validate_plan(raw_or_obj, menu):
    """(plan, problems, notes). `plan` is the normalised plan (actions stripped, text clamped),
    or the parsed value when there are problems, or None when the body is not JSON (then
    problems has one entry starting `body:`). Empty `problems` means accepted."""
    if isinstance(raw_or_obj, (bytes, bytearray, memoryview, str)):
        try:
            obj, problems = parse(raw_or_obj)
        except ParseError as e:
            return None, [e.msg], []
    else:
        obj, problems = raw_or_obj, []
    return check(obj, menu, problems)


def check(obj, menu, problems=None):
    """validate_plan on an already parsed value; `problems` may hold parse findings (dup keys)."""
    problems = [] if problems is None else list(problems)
    notes = []
    caps = {}
    names = []
    for c in menu["capabilities"]:
        caps[c["name"]] = c
        names.append(c["name"])
    max_steps = menu.get("max_steps", 16)
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
                if not isinstance(x, str):
                    problems.append("missing[%d]: expected a string, got %s" % (j, _kind(x)))
                else:
                    out["missing"].append(x)
            if ce is False and not miss:
                problems.append("missing: empty while can_execute is false (name what is missing)")
    resp = obj.get("response")
    if "response" in obj:
        if not isinstance(resp, str):
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
