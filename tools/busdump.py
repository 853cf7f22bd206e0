# Bus decoder for people: Protocol V3 frames from a capture, stdin or a serial port, one JSON line each.
#
#   python tools/busdump.py CAPTURE            (raw bytes, or timed JSON lines {"t_ms": N, "hex": ".."})
#   micropython tools/busdump.py CAPTURE       (same lines, byte for byte)
#   python tools/busdump.py -                  (stdin)
#   python tools/busdump.py --port /dev/ttyUSB0 --baud 115200      (pyserial; Ctrl-C ends)
#
# Options: --raw / --timed force the format (otherwise sniffed), --descriptor HEX|FILE adds a
# DESCRIPTOR payload (hex, or a file holding it: the unix port cannot take an argument of 256+
# bytes) whose capabilities decode COMMANDs; DESCRIPTORs in the capture are learnt as they pass. The last line is {"counters": {...}}. Errors: one line on stderr, exit 2.
#
# Output is written by hand, not by json.dumps: MicroPython keeps no dict order and formats
# floats differently. f32 values print as the shortest decimal that reads back as the same
# f32 (exact integer arithmetic), t_ms as the capture's own number text. Capture times are read
# exactly (decimal text to integer ns) and reach the decoder as microsecond ticks, so its
# 50 ms quiet and 90 ms candidate-age rules decide the same way on both interpreters.
import struct
import sys

import toolpath  # noqa: F401  (the tree, lib/ and tools/ on sys.path)
from organbus import command
from organbus import descriptor
from organbus import frame

_US = 1000  # the decoder's ticks are microseconds of capture time (Decoder tick_ms=1000)
_LONG_NS = 1000000000  # a gap longer than 1 s is fed as 1 s (ticks stay far from wrapping)


class UsageError(Exception):
    pass


# ---- JSON text, identical on both interpreters


def _f32_parts(x):
    b = struct.unpack(">I", struct.pack(">f", x))[0]
    return b >> 31, (b >> 23) & 0xFF, b & 0x7FFFFF


def _scaled(mant, p2, p10, f2, f10):
    # mant * 2**p2 * 10**p10, multiplied by 2**f2 * 10**f10 (chosen so both powers are >= 0)
    return mant * (1 << (p2 + f2)) * 10 ** (p10 + f10)


def _round_digits(m, e, p):
    """(q, s): q has p digits and q * 10**s is m * 2**e rounded half up."""
    if e >= 0:
        num, den = m << e, 1
    else:
        num, den = m, 1 << -e
    s = len(str(num // den)) - p if num >= den else -p - len(str(den // num)) + 1
    while True:
        if s >= 0:
            n2, d2 = num, den * 10**s
        else:
            n2, d2 = num * 10**-s, den
        q = (2 * n2 + d2) // (2 * d2)
        if q >= 10**p:
            s += 1
        elif q < 10 ** (p - 1):
            s -= 1
        else:
            return q, s


def f32_text(x):
    """Shortest decimal text that reads back as the same binary32 value (Python repr style)."""
    if x != x:
        return "NaN"
    sign, ef, mf = _f32_parts(x)
    if ef == 0xFF:
        return "-Infinity" if sign else "Infinity"
    if ef == 0 and mf == 0:
        return "-0.0" if sign else "0.0"
    if ef == 0:
        m, e = mf, -149
    else:
        m, e = mf | 0x800000, ef - 150
    # the values that round to x lie strictly between lo and hi (in units of 2**(e-2))
    lo = 4 * m - (1 if (mf == 0 and ef > 1) else 2)
    hi = 4 * m + 2
    for p in range(1, 10):
        q, s = _round_digits(m, e, p)
        f2 = max(0, 2 - e)
        f10 = max(0, -s)
        d = _scaled(q, 0, s, f2, f10)
        if _scaled(lo, e - 2, 0, f2, f10) < d < _scaled(hi, e - 2, 0, f2, f10):
            break
    digits = str(q)
    while len(digits) > 1 and digits[-1] == "0":
        digits = digits[:-1]
        s += 1
    exp = s + len(digits) - 1
    if -4 <= exp < 16:
        if s >= 0:
            text = digits + "0" * s + ".0"
        elif len(digits) > -s:
            text = digits[: len(digits) + s] + "." + digits[len(digits) + s :]
        else:
            text = "0." + "0" * (-s - len(digits)) + digits
    else:
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        text = "%se%s%02d" % (mant, "-" if exp < 0 else "+", abs(exp))
    return ("-" if sign else "") + text


_ESC = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def _str(s):
    out = []
    for c in s:
        e = _ESC.get(c)
        if e is not None:
            out.append(e)
        elif c < " ":
            out.append("\\u%04x" % ord(c))
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


class Raw:
    """Number text written as is (a capture's t_ms)."""

    def __init__(self, text):
        self.text = text


# key order of a frame's line, and of the descriptor's nested dicts
_RECORD_ORDER = (
    "t_ms",
    "type",
    "type_id",
    "len",
    "payload",
    "module_id",
    "module_type",
    "hw_version",
    "fw_version",
    "capabilities",
    "kind",
    "name",
    "status",
    "values",
    "text",
    "error",
    "note",
)
_FIELD_ORDER = (
    "name",
    "description",
    "exec_type",
    "resource_group",
    "max_duration_ms",
    "params",
    "type",
    "min",
    "max",
    "unit",
)


def _keys(d):
    order = _RECORD_ORDER if "type_id" in d else _FIELD_ORDER
    known = [k for k in order if k in d]
    rest = sorted(k for k in d if k not in order)
    return known + rest


def to_json(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, Raw):
        return v.text
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f32_text(v)
    if isinstance(v, str):
        return _str(v)
    if isinstance(v, dict):
        return "{" + ", ".join(_str(k) + ": " + to_json(v[k]) for k in _keys(v)) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(to_json(x) for x in v) + "]"
    raise TypeError("cannot write %r" % (v,))


def _hex(b, n):
    return "".join("%02x" % b[i] for i in range(n))


# ---- times: a JSON number's text, read exactly (no float rounding, same on both interpreters)


def parse_ms(text):
    """Integer nanoseconds of a JSON number of milliseconds; ValueError if it is not one."""
    t = text
    neg = t.startswith("-")
    if neg:
        t = t[1:]
    exp = 0
    for mark in ("e", "E"):
        if mark in t:
            t, e = t.split(mark, 1)
            if e[:1] in ("+", "-"):
                digits = e[1:]
            else:
                digits = e
            if not digits or not digits.isdigit():
                raise ValueError(text)
            exp = int(e)
            break
    whole, _, frac = t.partition(".")
    if (
        not whole
        or not whole.isdigit()
        or (frac == "" and "." in t)
        or (frac and not frac.isdigit())
    ):
        raise ValueError(text)
    if len(whole) > 1 and whole[0] == "0":
        raise ValueError(text)
    mant = int(whole + frac)
    exp += 6 - len(frac)  # ms -> ns
    if exp >= 0:
        ns = mant * 10**exp
    else:
        ns = mant // 10**-exp  # below a nanosecond does not matter for a 50 ms rule
    return -ns if neg else ns


def _ms_token(line):
    """The raw text of the t_ms value in a capture line."""
    i = line.find('"t_ms"')
    if i < 0:
        return None
    i = line.find(":", i + 6)
    if i < 0:
        return None
    i += 1
    while i < len(line) and line[i] in " \t":
        i += 1
    j = i
    while j < len(line) and line[j] in "0123456789+-.eE":
        j += 1
    return line[i:j] or None


# ---- decoding frames into lines


class Dump:
    def __init__(self, out, capabilities=()):
        self.out = out
        self.caps = {}
        for c in capabilities:
            self.caps[c["name"]] = c
        self.dec = frame.Decoder(self.on_frame, None, _US)
        self.framed = 0  # bytes of delivered frames
        self.spans = []  # (end offset in the stream, t_ms text) per timed chunk
        self.timed = False

    def on_frame(self, ftype, payload, n):
        # every byte before this frame is already junk or framed: its end offset is exact
        self.framed += n + frame.OVERHEAD
        end = self.dec.junk + self.framed
        rec = {}
        if self.timed:
            rec["t_ms"] = Raw(self._time_of(end - 1))
        rec["type"] = frame.TYPE_NAMES.get(ftype, "UNKNOWN")
        rec["type_id"] = ftype
        rec["len"] = n
        rec["payload"] = _hex(payload, n)
        self._fields(rec, ftype, payload, n)
        self.out(to_json(rec))

    def _time_of(self, offset):
        for end, text in self.spans:
            if offset < end:
                return text
        return self.spans[-1][1]

    def _fields(self, rec, ftype, payload, n):
        if ftype == frame.DESCRIPTOR:
            try:
                d = descriptor.decode_descriptor(payload, n)
            except descriptor.DescriptorError as e:
                rec["error"] = str(e)
                return
            for k in ("module_id", "module_type", "hw_version", "fw_version", "capabilities"):
                rec[k] = d[k]
            for c in d["capabilities"]:
                self.caps[c["name"]] = c
        elif ftype == frame.COMMAND:
            self._command(rec, payload, n)
        elif ftype == frame.COMMAND_RESP:
            if n == 1:
                rec["status"] = payload[0]
            else:
                rec["error"] = "COMMAND_RESP payload is %d bytes, must be 1" % n
        elif ftype == frame.EVENT:
            try:
                kind, name, status = command.decode_event(payload, n)
            except ValueError as e:
                rec["error"] = str(e)
                return
            rec["kind"] = kind
            rec["name"] = name
            rec["status"] = status
        elif ftype in (frame.ACK, frame.HEARTBEAT, frame.DISCOVER) and n:
            rec["error"] = "%s payload must be empty, has %d bytes" % (frame.TYPE_NAMES[ftype], n)

    def _command(self, rec, payload, n):
        try:
            name = command.command_name(payload, n)
        except ValueError as e:
            rec["error"] = str(e)
            return
        rec["name"] = name
        cap = self.caps.get(name)
        if cap is not None:
            try:
                values, text = command.decode_command(payload, n, cap)
            except ValueError as e:
                rec["error"] = str(e)
                return
            rec["values"] = list(values)
            rec["text"] = text
            return
        # No DESCRIPTOR names this capability: split the rest only where just one reading fits.
        start = 1 + payload[0]
        rest = n - start
        readings = []
        if rest % 4 == 0:
            readings.append((rest // 4, False))
        for k in range(rest // 4 + 1):
            left = rest - 4 * k
            if left >= 1 and payload[start + 4 * k] == left - 1:
                readings.append((k, True))
        if len(readings) != 1:
            rec["note"] = "no DESCRIPTOR for %r: %d ways to read the values" % (name, len(readings))
            return
        k, has_text = readings[0]
        rec["values"] = [
            struct.unpack(">f", bytes(payload[start + 4 * i : start + 4 * i + 4]))[0]
            for i in range(k)
        ]
        text = None
        if has_text:
            a = start + 4 * k + 1
            if not command.valid_utf8(payload, a, n):
                rec["error"] = "text: not valid UTF-8"
                return
            text = str(bytes(payload[a:n]), "utf-8")
        rec["text"] = text
        rec["note"] = "no DESCRIPTOR for %r: read by its length" % name

    # -- input

    def raw(self, data):
        self.dec.feed(data, 0)

    def timed_chunk(self, text, tick, data):
        self.spans.append((self.dec.bytes + len(data), text))
        if len(self.spans) > 64:
            # a frame being decided ends within the decoder's 520-byte window
            keep = self.dec.bytes - 2 * frame.MAX_LEN - 64
            while len(self.spans) > 1 and self.spans[0][0] < keep:
                self.spans.pop(0)
        self.dec.idle(tick)  # a capture line is a read: nothing came since the one before it
        self.dec.feed(data, tick)

    def end(self):
        self.dec.flush()  # end of input counts as line idle
        c = self.dec.counters()
        fields = ", ".join('"%s": %d' % (k, c[k]) for k in frame.COUNTER_NAMES)
        self.out('{"counters": {%s}}' % fields)


# ---- sources


def _open(path):
    try:
        return open(path, "rb")
    except OSError as e:
        raise UsageError("cannot open %s (errno %s)" % (path, e.args[0] if e.args else "?"))


def _stdin():
    return sys.stdin.buffer if hasattr(sys.stdin, "buffer") else sys.stdin


def _is_timed(head):
    line = head.split(b"\n", 1)[0].strip()
    if not line.startswith(b"{"):
        return False
    import json

    try:
        obj = json.loads(line)
    except ValueError:
        return False
    return isinstance(obj, dict) and "hex" in obj


def _fail_line(where, why):
    raise UsageError("%s: %s" % (where, why))


def run_timed(dump, lines, name):
    import json

    dump.timed = True
    last = None
    clock = 0  # capture time in ns since the first line, long gaps shortened to 1 s
    for num, line in lines:
        line = line.strip()
        if not line:
            continue
        where = "%s:%d" % (name, num)
        try:
            text = str(line, "utf-8")
            obj = json.loads(text)
        except (ValueError, UnicodeError):
            _fail_line(where, "not a JSON line")
        if not isinstance(obj, dict) or "hex" not in obj or "t_ms" not in obj:
            _fail_line(where, 'a timed capture line is {"t_ms": <number>, "hex": "<bytes>"}')
        token = _ms_token(text)
        if isinstance(obj["t_ms"], bool) or not isinstance(obj["t_ms"], (int, float)) or not token:
            _fail_line(where, "t_ms must be a number")
        try:
            ns = parse_ms(token)
            data = bytes.fromhex(obj["hex"])
        except (ValueError, TypeError):
            _fail_line(where, "hex must be pairs of hex digits, t_ms a number")
        if last is not None:
            if ns < last:
                _fail_line(where, "t_ms %s goes back in time" % token)
            clock += min(ns - last, _LONG_NS)
        last = ns
        dump.timed_chunk(token, clock // 1000, data)


def _lines(f):
    num = 0
    while True:
        line = f.readline()
        if not line:
            return
        num += 1
        yield num, line


def run_stream(dump, f, name, fmt):
    head = f.read(512) or b""
    if fmt is None:
        fmt = "timed" if _is_timed(head) else "raw"
    if fmt == "raw":
        while head:
            dump.raw(head)
            head = f.read(512)
        return

    def lines():
        # the sniffed head, then the rest of the file, as numbered lines
        buf = head
        num = 0
        while True:
            i = buf.find(b"\n")
            if i >= 0:
                num += 1
                yield num, buf[:i]
                buf = buf[i + 1 :]
                continue
            more = f.read(512)
            if not more:
                if buf:
                    yield num + 1, buf
                return
            buf = buf + more

    run_timed(dump, lines(), name)


def run_port(dump, port, baud):
    if sys.implementation.name == "micropython":
        raise UsageError("--port needs pyserial: run busdump with CPython")
    import time

    try:
        import serial
    except ImportError:
        raise UsageError("--port needs pyserial (pip install pyserial)")
    try:
        ser = serial.Serial(port, baud, timeout=0.01)
    except (OSError, ValueError, serial.SerialException) as e:
        raise UsageError("cannot open port %s: %s" % (port, e))
    dump.timed = True
    t0 = time.monotonic()
    try:
        while True:
            data = ser.read(512)
            us = int((time.monotonic() - t0) * 1000000)
            if data:
                dump.timed_chunk(str(us // 1000), us, data)
            else:
                dump.dec.idle(us)
    except KeyboardInterrupt:
        pass
    finally:
        ser.close()


def _parse_args(argv):
    opts = {"file": None, "port": None, "baud": 115200, "fmt": None, "descriptors": []}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--port", "--baud", "--descriptor"):
            if i + 1 >= len(argv):
                raise UsageError("%s needs a value" % a)
            v = argv[i + 1]
            i += 2
            if a == "--port":
                opts["port"] = v
            elif a == "--baud":
                if not v.isdigit():
                    raise UsageError("--baud takes a number, not %r" % v)
                opts["baud"] = int(v)
            else:
                opts["descriptors"].append(v)
            continue
        if a in ("--raw", "--timed"):
            opts["fmt"] = a[2:]
        elif a in ("-h", "--help"):
            raise UsageError(
                "usage: busdump.py [FILE|-] [--raw|--timed] [--descriptor HEX|FILE]... "
                "| --port DEV [--baud N]"
            )
        elif a.startswith("--"):
            raise UsageError("unknown option %s" % a)
        elif opts["file"] is None:
            opts["file"] = a
        else:
            raise UsageError("one capture at a time (got %s and %s)" % (opts["file"], a))
        i += 1
    if opts["port"] and opts["file"]:
        raise UsageError("give a capture or --port, not both")
    return opts


def _descriptor_hex(arg):
    # a file holding the hex (the unix port dies on an argv word of 256+ bytes), or the hex itself
    try:
        with open(arg) as f:
            return "".join(f.read().split())
    except OSError:
        return arg


def _capabilities(args):
    caps = []
    for a in args:
        try:
            d = descriptor.decode_descriptor(bytes.fromhex(_descriptor_hex(a)))
        except ValueError as e:
            raise UsageError("--descriptor: %s" % e)
        caps.extend(d["capabilities"])
    return caps


def _writer(live):
    out = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None

    def write(line):
        if out is not None:
            out.write(line.encode("utf-8") + b"\n")
            if live:
                out.flush()
        else:
            print(line)

    return write


def main(argv):
    try:
        opts = _parse_args(argv)
        live = opts["port"] is not None or opts["file"] in (None, "-")
        dump = Dump(_writer(live), _capabilities(opts["descriptors"]))
        if opts["port"]:
            run_port(dump, opts["port"], opts["baud"])
        elif opts["file"] in (None, "-"):
            run_stream(dump, _stdin(), "stdin", opts["fmt"])
        else:
            f = _open(opts["file"])
            try:
                run_stream(dump, f, opts["file"], opts["fmt"])
            finally:
                f.close()
        dump.end()
    except UsageError as e:
        sys.stderr.write("busdump: %s\n" % e)
        return 2
    except OSError as e:
        if e.args and e.args[0] == 32:  # EPIPE: the reader went away (busdump F | head)
            _quiet_stdout()
            return 0
        raise
    return 0


def _quiet_stdout():
    if sys.implementation.name != "micropython":
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
