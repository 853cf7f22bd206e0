# The console's input lines: a pasted plan that spans lines is joined into one.
import re


def plan_lines(stream):
    """Console lines from a stream, a pasted plan (a line starting with "{") joined into one
    line. The plan ends as soon as its braces and brackets balance, at an empty line, or at a
    line that cannot continue JSON (a command such as `help`); that line is then a line of its
    own. A plan that does not parse reaches the console at once, which says why."""
    pending, depth = None, 0
    for raw in stream:
        if pending is not None and (not raw.strip() or not _continues_json(raw)):
            yield pending
            pending = None
            if not raw.strip():
                continue
        if pending is None:
            if not raw.lstrip().startswith("{"):
                yield raw
                continue
            pending, depth = "", 0
        pending = (pending + " " + raw.strip()).strip()
        depth = _depth(pending)
        if depth <= 0:
            yield pending
            pending = None
    if pending is not None:
        yield pending


def _depth(text):
    """Open braces and brackets outside strings (negative: more closed than opened)."""
    depth, in_str, esc = 0, False, False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth < 0:
                return depth
    return depth


_JSON_WORD = re.compile(r"^\s*(true|false|null)\b")


def _continues_json(line):
    """Could this line continue a JSON text? Not a line that starts with a bare word."""
    s = line.lstrip()
    if not s:
        return False
    if s[0] in '"{}[],:-0123456789':
        return True
    return bool(_JSON_WORD.match(s))
