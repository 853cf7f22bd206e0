# The organ rules: the kit plays the master against an organ under test (PROTOCOL.md 2, 4-7).
import math
import random
import statistics
import time

from organbus import frame
from organbus.command import CommandError, decode_event, encode_command
from organbus.descriptor import DescriptorError, decode_descriptor

from conform.report import Rule

RULES = [
    Rule("organ.boot_wait", "7", "after power-up, silence for 1 s, then the first DESCRIPTOR"),
    Rule("organ.descriptor", "4", "the DESCRIPTOR is valid by every rule of section 4, and stable"),
    Rule("organ.announce", "7", "DESCRIPTOR every 2 s until ACK, no HEARTBEAT before"),
    Rule("organ.ack", "7", "after ACK the 2 s DESCRIPTORs stop and HEARTBEATs start"),
    Rule("organ.heartbeat", "7", "after ACK a HEARTBEAT every 1 s"),
    Rule("organ.redescribe", "7", "after ACK the DESCRIPTOR again every 5 s"),
    Rule("organ.answers", "5", "every COMMAND gets exactly one COMMAND_RESP, within 1 s"),
    Rule("organ.values", "5", "in-range and boundary values are answered 0"),
    Rule("organ.clamp", "5", "out-of-range values are clamped (answered 0, EVENT in time)"),
    Rule("organ.nan", "5", "NaN is answered 1"),
    Rule("organ.unknown_name", "5", "unknown and near-miss names are answered 1, never aliased"),
    Rule("organ.payload_length", "5", "a payload of the wrong length is answered 1"),
    Rule("organ.text", "5", "text over its max is cut (answered 0), invalid UTF-8 answered 1"),
    Rule(
        "organ.event", "6", "continuous abilities answer 0, then EVENT done within max_duration_ms"
    ),
    Rule(
        "organ.resource_groups",
        "4,6",
        "max_duration_ms fits exec_type; a group is free after EVENT",
    ),
    Rule(
        "organ.resync",
        "2",
        "after junk, split, bit-flipped and corrupt-header frames, the next good COMMAND is answered",
    ),
    Rule("organ.discover", "7", "DISCOVER gets the DESCRIPTOR at once, then every 2 s until ACK"),
    Rule(
        "organ.command_before_ack",
        "7",
        "a COMMAND while announcing is answered and stops the announcing",
    ),
]

# Tolerances (ms), chosen so that a loaded 2-core host does not fail a good organ
# (docs/conform.md: how they were measured).
BOOT_EARLY_MS = 100  # the first DESCRIPTOR may come this much before 1 s after link-up
BOOT_LATE_S = 10.0  # ... and must come within this long (process or board start-up included)
EARLY_MS = 150  # a periodic frame may come this much early ...
LATE_MS = 500  # ... or this much late, against its nominal period
MEDIAN_MS = 100  # the median period must be within this of the nominal
RESP_MS = 1000  # section 5: the master's COMMAND_RESP timeout
AT_ONCE_MS = 300  # "at once": DISCOVER -> DESCRIPTOR
EVENT_SLACK_MS = 500  # on top of max_duration_ms, for the wire and a loaded host
RESYNC_MS = 400  # section 2 says 100 ms after the good frame's last byte; plus a loaded host
SILENT_MS = 300  # how long a frame that must not be answered is watched
HEARTBEAT_WINDOW_S = 6.3  # at least this long after ACK is watched (5 s DESCRIPTOR included)

_ABOVE = "above"
_BELOW = "below"


def _num_params(cap):
    return [p for p in cap["params"] if p["type"] != "string"]


def _text_param(cap):
    ps = cap["params"]
    return ps[-1] if ps and ps[-1]["type"] == "string" else None


def _fmt(name, values, text=None):
    parts = ["%s=%g" % (p["name"], v) for p, v in values]
    if text is not None:
        parts.append("text=%d bytes" % len(text))
    return "%s(%s)" % (name, ", ".join(parts))


def _intervals(frames):
    return [round((b.t - a.t) * 1000) for a, b in zip(frames, frames[1:])]


def _period_problem(ms, nominal):
    """None when the periods keep `nominal` within the tolerances, else what was wrong."""
    if not ms:
        return "no interval to measure"
    bad = [x for x in ms if x < nominal - EARLY_MS or x > nominal + LATE_MS]
    med = statistics.median(ms)
    if bad:
        return "intervals %s ms, expected %d ms (-%d/+%d)" % (ms, nominal, EARLY_MS, LATE_MS)
    if abs(med - nominal) > MEDIAN_MS:
        return "median interval %d ms, expected %d +-%d ms" % (med, nominal, MEDIAN_MS)
    return None


class OrganRun:
    """One certification run. `boot_seen`: the link came up as the organ powered up (so the
    boot wait can be judged); `event_budget_ms`: longest ability run the kit starts on purpose."""

    def __init__(self, cable, report, boot_seen, event_budget_ms=5000, seed=3):
        self.c = cable
        self.r = report
        self.boot_seen = boot_seen
        self.budget = event_budget_ms
        self.rng = random.Random(seed)
        self.d = None
        self.desc_payload = None
        self.calls = []  # (t_sent, label, resp frame or None)
        self.no_event = set()  # continuous abilities seen not to send their EVENT (organ.event)

    # -- helpers -------------------------------------------------------------------------------

    def call(self, payload, label):
        """Send one COMMAND, wait for its COMMAND_RESP: (status or None, resp frame, t_sent)."""
        m = self.c.mark()
        t = self.c.send(frame.COMMAND, payload)
        wire = self.c.wire_s(len(payload) + 8 + 9)
        f = self.c.wait_for(frame.COMMAND_RESP, m, RESP_MS / 1000 + wire)
        self.calls.append((t, label, f))
        if f is None:
            return None, None, t
        return (f.payload[0] if len(f.payload) == 1 else -1), f, t

    def wait_event(self, name, since, timeout_ms):
        if name in self.no_event:
            return None

        def named(f):
            try:
                return decode_event(f.payload)[1] == name
            except (CommandError, ValueError, UnicodeError):
                return True  # a malformed EVENT is judged by the caller

        return self.c.wait_for(frame.EVENT, since, timeout_ms / 1000, named)

    def probe(self):
        """A harmless good COMMAND and the status it must get: the first immediate ability
        without params (0), else an unknown name (1)."""
        for cap in self.d["capabilities"]:
            if cap["exec_type"] == "immediate" and not cap["params"]:
                return encode_command(cap["name"]), 0, cap["name"]
        return encode_command("conform_probe"), 1, "conform_probe"

    # -- the run -------------------------------------------------------------------------------

    def run(self):
        r, c = self.r, self.c
        f1 = c.wait_for(frame.DESCRIPTOR, 0, BOOT_LATE_S)
        if f1 is None:
            r.failed(
                "organ.descriptor", "no DESCRIPTOR in %.0f s after the link came up" % BOOT_LATE_S
            )
            r.failed("organ.boot_wait", "no DESCRIPTOR in %.0f s" % BOOT_LATE_S)
            r.rest_na("no DESCRIPTOR came (organ.descriptor)")
            return
        self.check_boot(f1)
        if not self.check_descriptor(f1):
            return
        r.subject = "%s, %s" % (self.d["module_id"], self.d["module_type"])
        if r.wanted("organ.announce"):
            self.check_announce(f1)
        t_ack = c.send(frame.ACK)
        m_ack = c.mark()
        self.commands()
        left = t_ack + HEARTBEAT_WINDOW_S - time.monotonic()
        if left > 0 and r.wanted("organ.ack", "organ.heartbeat", "organ.redescribe"):
            time.sleep(left)
        self.check_after_ack(t_ack, m_ack)
        self.check_answers()
        if r.wanted("organ.discover", "organ.command_before_ack"):
            self.check_discover()
        self.check_descriptor_copies()

    def check_boot(self, f1):
        r = self.r
        early = [f for f in self.c.since(0) if f.t < f1.t]
        if not self.boot_seen:
            r.na(
                "organ.boot_wait",
                "the kit did not see the organ power up (use listen: and start the organ after the kit)",
            )
        else:
            dt = round((f1.t - self.c.t_up) * 1000)
            if dt < 1000 - BOOT_EARLY_MS:
                r.failed(
                    "organ.boot_wait",
                    "first DESCRIPTOR %d ms after link-up, expected >= 1000 ms" % dt,
                )
            elif early:
                r.failed("organ.boot_wait", "%s before the first DESCRIPTOR" % early[0].name)
            else:
                r.passed("organ.boot_wait", "first DESCRIPTOR %d ms after link-up" % dt)

    def check_descriptor(self, f1):
        r = self.r
        self.desc_payload = f1.payload
        try:
            self.d = decode_descriptor(f1.payload)
        except DescriptorError as e:
            r.failed("organ.descriptor", "refused: %s" % e)
            for rule in RULES[2:]:
                r.na(rule.name, "the DESCRIPTOR is invalid (organ.descriptor)")
            return False
        caps = self.d["capabilities"]
        r.passed(
            "organ.descriptor",
            "%s (%s): %s, %d bytes"
            % (
                self.d["module_id"],
                self.d["module_type"],
                ", ".join(x["name"] for x in caps),
                len(f1.payload),
            ),
        )
        return True

    def check_descriptor_copies(self):
        for f in self.c.since(0, frame.DESCRIPTOR):
            if f.payload != self.desc_payload:
                self.r.failed(
                    "organ.descriptor",
                    "the DESCRIPTOR changed during the run (%d bytes, then %d bytes)"
                    % (len(self.desc_payload), len(f.payload)),
                )
                return

    def check_announce(self, f1):
        r, c = self.r, self.c
        if not self.boot_seen:
            # joined a running organ: what it said before the link came up may arrive in one
            # burst (a simulator's cable holds bytes for a late peer), so time the next two
            f1 = c.wait_for(frame.DESCRIPTOR, c.frames.index(f1) + 1, (2000 + LATE_MS) / 1000) or f1
        i1 = c.frames.index(f1)
        f2 = c.wait_for(frame.DESCRIPTOR, i1 + 1, (2000 + LATE_MS) / 1000)
        hb = c.since(0, frame.HEARTBEAT)
        if f2 is None:
            r.failed(
                "organ.announce",
                "no second DESCRIPTOR within %d ms of the first" % (2000 + LATE_MS),
            )
        elif hb:
            r.failed("organ.announce", "HEARTBEAT before ACK (expected DESCRIPTORs only)")
        else:
            problem = _period_problem(_intervals([f1, f2]), 2000)
            if problem:
                r.failed("organ.announce", problem)
            else:
                r.passed(
                    "organ.announce", "DESCRIPTOR interval %d ms" % round((f2.t - f1.t) * 1000)
                )

    def check_after_ack(self, t_ack, m_ack):
        r, c = self.r, self.c
        t_end = time.monotonic()
        hbs = [f for f in c.since(m_ack, frame.HEARTBEAT)]
        descs = [f for f in c.since(m_ack, frame.DESCRIPTOR)]
        span = t_end - t_ack
        if span < HEARTBEAT_WINDOW_S - 0.5:
            for rule in ("organ.ack", "organ.heartbeat", "organ.redescribe"):
                r.na(rule, "watched only %.1f s after ACK (--only)" % span)
            return
        # ACK: no announce-cadence DESCRIPTOR (2 s) after it, a HEARTBEAT within 1 s.
        early = [f for f in descs if (f.t - t_ack) * 1000 < 5000 - EARLY_MS]
        if early:
            r.failed(
                "organ.ack",
                "DESCRIPTOR %d ms after ACK, expected none before 5000 ms"
                % round((early[0].t - t_ack) * 1000),
            )
        elif not hbs or (hbs[0].t - t_ack) * 1000 > 1000 + LATE_MS:
            r.failed("organ.ack", "no HEARTBEAT within %d ms of ACK" % (1000 + LATE_MS))
        else:
            r.passed(
                "organ.ack", "first HEARTBEAT %d ms after ACK" % round((hbs[0].t - t_ack) * 1000)
            )
        # HEARTBEAT every 1 s, from ACK to the end of the window.
        gaps = _intervals(hbs)
        tail = round((t_end - hbs[-1].t) * 1000) if hbs else round(span * 1000)
        problem = (
            _period_problem(gaps, 1000)
            if len(hbs) >= 2
            else "%d HEARTBEATs in %.1f s" % (len(hbs), span)
        )
        if problem is None and tail > 1000 + LATE_MS:
            problem = "no HEARTBEAT in the last %d ms" % tail
        if problem:
            r.failed("organ.heartbeat", problem)
        else:
            r.passed(
                "organ.heartbeat",
                "%d HEARTBEATs in %.1f s, intervals %d..%d ms (median %d)"
                % (len(hbs), span, min(gaps), max(gaps), statistics.median(gaps)),
            )
        # DESCRIPTOR every 5 s after ACK.
        if not descs:
            r.failed(
                "organ.redescribe", "no DESCRIPTOR in %.1f s after ACK, expected one at 5 s" % span
            )
            return
        first = round((descs[0].t - t_ack) * 1000)
        gaps = _intervals(descs)
        if not 5000 - EARLY_MS <= first <= 5000 + LATE_MS:
            r.failed(
                "organ.redescribe", "first DESCRIPTOR %d ms after ACK, expected 5000 ms" % first
            )
        elif gaps and _period_problem(gaps, 5000):
            r.failed("organ.redescribe", _period_problem(gaps, 5000))
        else:
            r.passed(
                "organ.redescribe",
                "DESCRIPTOR %d ms after ACK%s" % (first, ", then %s ms" % gaps if gaps else ""),
            )

    def check_answers(self):
        r, c = self.r, self.c
        if not self.calls:
            r.na("organ.answers", "no COMMAND was sent (--only)")
            return
        resps = c.since(0, frame.COMMAND_RESP)
        times = [t for t, _, _ in self.calls] + [time.monotonic() + 1]
        for i, (t, label, f) in enumerate(self.calls):
            if f is None and label.startswith("resync:"):
                continue  # judged by organ.resync
            if f is None:
                r.failed("organ.answers", "%s: no COMMAND_RESP within %d ms" % (label, RESP_MS))
                return
            if len(f.payload) != 1 or f.payload[0] > 1:
                r.failed(
                    "organ.answers",
                    "%s: COMMAND_RESP payload %s, expected one byte 0 or 1"
                    % (label, f.payload.hex()),
                )
                return
            n = len([x for x in resps if t < x.t < times[i + 1]])
            if n != 1:
                r.failed("organ.answers", "%s: %d COMMAND_RESPs, expected 1" % (label, n))
                return
        own = [(t, f) for t, label, f in self.calls if not label.startswith("resync:")]
        worst = max([(f.t - t) * 1000 for t, f in own] or [0])
        r.passed(
            "organ.answers", "%d COMMANDs, slowest answer %d ms" % (len(self.calls), round(worst))
        )

    # -- COMMANDs ------------------------------------------------------------------------------

    def commands(self):
        r = self.r
        caps = self.d["capabilities"]
        fails = {}
        notes = {}

        def fail(rule, msg):
            fails.setdefault(rule, msg)

        def note(rule, msg):
            notes.setdefault(rule, []).append(msg)

        ran = set()
        if r.wanted(
            "organ.values",
            "organ.clamp",
            "organ.nan",
            "organ.event",
            "organ.text",
            "organ.resource_groups",
            "organ.answers",
        ):
            for cap in caps:
                self.exercise(cap, fail, note, ran)
        if r.wanted("organ.unknown_name", "organ.answers"):
            self.unknown_names(fail, note, ran)
        if r.wanted("organ.payload_length", "organ.answers"):
            self.payload_lengths(fail, ran)
        if r.wanted("organ.resource_groups"):
            self.groups(fail, note, ran)
        if r.wanted("organ.resync"):
            self.resync(fail, note, ran)
        for rule in (
            "organ.values",
            "organ.clamp",
            "organ.nan",
            "organ.unknown_name",
            "organ.payload_length",
            "organ.text",
            "organ.event",
            "organ.resource_groups",
            "organ.resync",
        ):
            if rule in fails:
                r.failed(rule, fails[rule])
            elif rule in ran:
                r.passed(rule, "; ".join(notes.get(rule, [])))
            else:
                r.na(rule, "; ".join(notes.get(rule, [])) or "nothing in the DESCRIPTOR to check")

    def _run_cap(self, cap, values, text, label):
        """One call; for a continuous ability answered 0, also its EVENT: (status, event_ms or
        None when no EVENT came, event frame)."""
        nums = [v for _, v in values]
        payload = encode_command(cap["name"], nums, text)
        status, f, _ = self.call(payload, label)
        if status != 0 or cap["exec_type"] == "immediate" or cap["name"] in self.no_event:
            return status, None, None
        m = self.c.frames.index(f)
        wait = cap["max_duration_ms"]
        if cap["exec_type"] != "continuous":
            wait = min(wait, self.budget)  # periodic, event-driven: an EVENT is not promised
        ev = self.wait_event(cap["name"], m, wait + EVENT_SLACK_MS)
        if ev is None:
            return status, None, None
        return status, round((ev.t - f.t) * 1000), ev

    def exercise(self, cap, fail, note, ran):
        name = cap["name"]
        nums = _num_params(cap)
        tp = _text_param(cap)
        continuous = cap["exec_type"] != "immediate"
        long_run = continuous and cap["max_duration_ms"] > self.budget
        text = None
        if tp is not None:
            text = "a" * max(1, int(tp["min"])) if tp["max"] >= 1 else ""
        cases = [("min", [(p, p["min"]) for p in nums], "organ.values")]
        if nums:
            below = [(p, p["min"] - (p["max"] - p["min"]) - 1) for p in nums]
            cases.append((_BELOW, below, "organ.clamp"))
            if not long_run:
                cases.append(("mid", [(p, self._mid(p)) for p in nums], "organ.values"))
                cases.append(("max", [(p, p["max"]) for p in nums], "organ.values"))
                above = [(p, p["max"] + (p["max"] - p["min"]) + 1) for p in nums]
                cases.append((_ABOVE, above, "organ.clamp"))
            else:
                note(
                    "organ.values",
                    "%s: max and mid not sent (max_duration_ms %d > --event-budget-ms %d)"
                    % (name, cap["max_duration_ms"], self.budget),
                )
                note("organ.clamp", "%s: low side only (long ability)" % name)
        for kind, values, rule in cases:
            label = "%s %s" % (kind, _fmt(name, values, text))
            status, ev_ms, ev = self._run_cap(cap, values, text, label)
            ran.add(rule)
            if status != 0:
                fail(
                    rule,
                    "%s answered %s, expected 0%s"
                    % (label, status, " (clamped)" if rule == "organ.clamp" else ""),
                )
                continue
            if continuous:
                self._judge_event(
                    cap, label, ev_ms, ev, fail, ran, rule if kind == _ABOVE else "organ.event"
                )
        if nums:
            values = [(p, float("nan") if i == 0 else p["min"]) for i, p in enumerate(nums)]
            label = "nan %s" % _fmt(name, values, text)
            status, ev_ms, _ = self._run_cap(cap, values, text, label)
            ran.add("organ.nan")
            if status != 1:
                fail("organ.nan", "%s answered %s, expected 1" % (label, status))
        if tp is not None:
            self.texts(cap, tp, nums, fail, ran)

    @staticmethod
    def _mid(p):
        m = (p["min"] + p["max"]) / 2
        return float(math.floor(m)) if p["type"] in ("int", "bool") else m

    def _judge_event(self, cap, label, ev_ms, ev, fail, ran, rule):
        ran.add(rule)
        limit = cap["max_duration_ms"]
        if ev is None:
            if cap["name"] in self.no_event or cap["exec_type"] != "continuous":
                # judged once, by organ.event: it never sends one; section 6 promises an EVENT
                # only for continuous abilities (periodic and event-driven ones need not end)
                return
            if rule == "organ.event":
                self.no_event.add(cap["name"])
            what = "an unclamped number runs past it" if rule == "organ.clamp" else "none came"
            fail(
                rule,
                "%s: no EVENT within max_duration_ms %d (+%d ms): %s"
                % (label, limit, EVENT_SLACK_MS, what),
            )
            return
        try:
            kind, ev_name, status = decode_event(ev.payload)
        except (CommandError, ValueError, UnicodeError) as e:
            fail("organ.event", "%s: malformed EVENT %s (%s)" % (label, ev.payload.hex(), e))
            return
        if kind != 1 or ev_name != cap["name"] or status > 1:
            fail(
                "organ.event",
                "%s: EVENT kind %d name %r status %d, expected kind 1 name %r status 0/1"
                % (label, kind, ev_name, status, cap["name"]),
            )

    def texts(self, cap, tp, nums, fail, ran):
        mins = [p["min"] for p in nums]
        limit = int(tp["max"])
        # over the limit, with a 2-byte character across the cut: the organ cuts before it
        over = ("a" + " " * (limit - 2) + "\u00e9" + " " * 9).encode("utf-8")[:255]
        cases = [
            ("text over max", over, 0),
            ("text invalid UTF-8", b"\xc3\x28", 1),
            ("text overlong UTF-8", b"\xc0\xaf", 1),
        ]
        for label, raw, want in cases:
            label = "%s %s(%d bytes)" % (label, cap["name"], len(raw))
            payload = encode_command(cap["name"], mins, raw)
            status, f, _ = self.call(payload, label)
            ran.add("organ.text")
            if status != want:
                fail("organ.text", "%s answered %s, expected %d" % (label, status, want))
            elif status == 0 and cap["exec_type"] != "immediate":
                ev = self.wait_event(
                    cap["name"], self.c.frames.index(f), cap["max_duration_ms"] + EVENT_SLACK_MS
                )
                if ev is None and cap["exec_type"] == "continuous":
                    fail("organ.event", "%s: no EVENT within max_duration_ms" % label)

    def unknown_names(self, fail, note, ran):
        caps = self.d["capabilities"]
        real = {c["name"] for c in caps}
        tried = []
        for c in caps:
            n = c["name"]
            for cand in (
                n + n[-1],
                n.upper(),
                n.split("_")[0] if "_" in n else n[:-1],
                n[:-1],
                " " + n,
            ):
                if cand and cand not in real and cand not in tried:
                    tried.append(cand)
        tried += [
            x
            for x in (self.d["module_type"], "conform_unknown")
            if x not in real and x not in tried
        ]
        for cand in tried:
            # the payload a real ability of that length would have: only the name is wrong
            status, _, _ = self.call(encode_command(cand), "unknown name %r" % cand)
            ran.add("organ.unknown_name")
            if status != 1:
                fail(
                    "organ.unknown_name",
                    "%r answered %s, expected 1 (never an alias)" % (cand, status),
                )
        note("organ.unknown_name", "%d names: %s" % (len(tried), ", ".join(map(repr, tried))))

    def payload_lengths(self, fail, ran):
        for cap in self.d["capabilities"]:
            nums = _num_params(cap)
            tp = _text_param(cap)
            text = ("a" * max(1, int(tp["min"]))) if tp is not None else None
            good = encode_command(cap["name"], [p["min"] for p in nums], text)
            cases = [("one byte more", good + b"\x00")]
            if nums or tp is not None:
                cases.append(("one byte less", good[:-1]))
            if nums and tp is None:
                cases.append(("one value less", good[:-4]))
            cases.append(("name length past the end", bytes([min(255, len(good) + 5)]) + good[1:]))
            for what, payload in cases:
                status, _, _ = self.call(payload, "%s %s" % (what, cap["name"]))
                ran.add("organ.payload_length")
                if status != 1:
                    fail(
                        "organ.payload_length",
                        "%s: %s (%d bytes) answered %s, expected 1"
                        % (cap["name"], what, len(payload), status),
                    )
                if status == 0 and cap["exec_type"] != "immediate":
                    self.wait_event(
                        cap["name"], self.c.mark() - 1, cap["max_duration_ms"] + EVENT_SLACK_MS
                    )
        status, _, _ = self.call(b"", "empty COMMAND")
        if status != 1:
            fail("organ.payload_length", "an empty COMMAND answered %s, expected 1" % status)

    def groups(self, fail, note, ran):
        caps = self.d["capabilities"]
        for cap in caps:
            ms = cap["max_duration_ms"]
            if cap["exec_type"] == "immediate" and ms != 0:
                fail(
                    "organ.resource_groups",
                    "%s is immediate with max_duration_ms %d, expected 0" % (cap["name"], ms),
                )
            if cap["exec_type"] != "immediate" and ms == 0:
                fail(
                    "organ.resource_groups",
                    "%s is %s with max_duration_ms 0: the group would never be held"
                    % (cap["name"], cap["exec_type"]),
                )
            ran.add("organ.resource_groups")
        for cap in caps:
            if (
                cap["exec_type"] == "immediate"
                or not cap["resource_group"]
                or cap["max_duration_ms"] > self.budget * 4
            ):
                continue
            nums = _num_params(cap)
            tp = _text_param(cap)
            text = ("a" * max(1, int(tp["min"]))) if tp is not None else None
            values = [(p, p["min"]) for p in nums]
            status, ev_ms, ev = self._run_cap(
                cap, values, text, "group %s: %s" % (cap["resource_group"], cap["name"])
            )
            if status != 0 or ev is None:
                continue  # judged by organ.values / organ.event
            mates = [x for x in caps if x["resource_group"] == cap["resource_group"]]
            mate = next((x for x in mates if x["exec_type"] == "immediate"), cap)
            mv = [(p, p["min"]) for p in _num_params(mate)]
            mt = (
                text
                if mate is cap
                else (("a" * max(1, int(_text_param(mate)["min"]))) if _text_param(mate) else None)
            )
            status2, _, _ = self._run_cap(mate, mv, mt, "right after EVENT: %s" % mate["name"])
            if status2 != 0:
                fail(
                    "organ.resource_groups",
                    "%s answered %s right after %s's EVENT: group %r not free"
                    % (mate["name"], status2, cap["name"], cap["resource_group"]),
                )
            else:
                note(
                    "organ.resource_groups",
                    "group %r free after %s's EVENT" % (cap["resource_group"], cap["name"]),
                )

    def resync(self, fail, note, ran):
        c = self.c
        payload, want, pname = self.probe()
        good = frame.encode(frame.COMMAND, payload)
        flipped = bytearray(good)
        flipped[6] ^= 0x04  # one bit of the payload: the CRC no longer matches
        noise = bytes(self.rng.choice([b for b in range(256) if b != 0xAA]) for _ in range(64))
        steps = [
            ("64 junk bytes before it", [noise + good]),
            ("split in 3 writes 10 ms apart", [good[:3], good[3:9], good[9:]]),
            ("after a corrupt header claiming 511 bytes", [b"\xaa\x03\x10\x01\xff" + good]),
            ("after a SOF with a wrong VER", [b"\xaa\x02\x10\x00" + good]),
            ("after a bit-flipped copy (which must not be answered)", "flip"),
        ]
        ran.add("organ.resync")
        worst = 0
        for what, writes in steps:
            if writes == "flip":
                m = c.mark()
                c.write(bytes(flipped))
                got = c.wait_for(frame.COMMAND_RESP, m, SILENT_MS / 1000)
                if got is not None:
                    fail(
                        "organ.resync",
                        "a COMMAND with a bad CRC was answered %s" % got.payload.hex(),
                    )
                    return
                writes = [good]
            m = c.mark()
            t_first = None
            for i, w in enumerate(writes):
                if i:
                    time.sleep(0.010)
                t_last = c.write(w)
                t_first = t_last if t_first is None else t_first
                t_last += c.wire_s(len(w))
            f = c.wait_for(frame.COMMAND_RESP, m, (RESP_MS + RESYNC_MS) / 1000)
            self.calls.append((t_first, "resync: %s" % what, f))
            if f is None:
                fail(
                    "organ.resync",
                    "%s %s: no COMMAND_RESP within %d ms" % (pname, what, RESP_MS + RESYNC_MS),
                )
                return
            lat = round((f.t - t_last) * 1000)
            worst = max(worst, lat)
            if lat > RESYNC_MS:
                fail(
                    "organ.resync",
                    "%s %s: answered %d ms after its last byte, expected <= %d ms"
                    % (pname, what, lat, RESYNC_MS),
                )
                return
            if f.payload != bytes([want]):
                fail(
                    "organ.resync",
                    "%s %s: answered %s, expected %d" % (pname, what, f.payload.hex(), want),
                )
                return
        note(
            "organ.resync",
            "%d cases, probe %s, answered <= %d ms after its last byte"
            % (len(steps), pname, worst),
        )

    # -- DISCOVER and a COMMAND while announcing ---------------------------------------------

    def check_discover(self):
        r, c = self.r, self.c
        m = c.mark()
        t = c.send(frame.DISCOVER)
        f = c.wait_for(frame.DESCRIPTOR, m, 1.0)
        if f is None:
            r.failed("organ.discover", "no DESCRIPTOR within 1000 ms of DISCOVER")
            r.na("organ.command_before_ack", "needs the organ announcing after DISCOVER")
            return
        lat = round((f.t - t) * 1000)
        f2 = c.wait_for(frame.DESCRIPTOR, c.frames.index(f) + 1, (2000 + LATE_MS) / 1000)
        if lat > AT_ONCE_MS:
            r.failed(
                "organ.discover",
                "DESCRIPTOR %d ms after DISCOVER, expected at once (<= %d ms)" % (lat, AT_ONCE_MS),
            )
        elif f2 is None:
            r.failed(
                "organ.discover",
                "no DESCRIPTOR within %d ms after the one DISCOVER brought" % (2000 + LATE_MS),
            )
        elif _period_problem(_intervals([f, f2]), 2000):
            r.failed("organ.discover", "then " + _period_problem(_intervals([f, f2]), 2000))
        else:
            r.passed(
                "organ.discover",
                "DESCRIPTOR %d ms after DISCOVER, the next %d ms later"
                % (lat, round((f2.t - f.t) * 1000)),
            )
        if f2 is None:
            r.na(
                "organ.command_before_ack",
                "needs the 2 s announcing after DISCOVER (organ.discover)",
            )
            return
        if not r.wanted("organ.command_before_ack"):
            return
        time.sleep(0.3)
        payload, want, pname = self.probe()
        status, resp, t_cmd = self.call(payload, "before ACK: %s" % pname)
        if resp is None:
            r.failed("organ.command_before_ack", "%s while announcing: no COMMAND_RESP" % pname)
            return
        m = c.frames.index(resp)
        time.sleep(max(0.0, t_cmd + 2.6 - time.monotonic()))
        descs = c.since(m, frame.DESCRIPTOR)
        hbs = c.since(m, frame.HEARTBEAT)
        if status != want:
            r.failed(
                "organ.command_before_ack",
                "%s while announcing answered %s, expected %d" % (pname, status, want),
            )
        elif descs:
            r.failed(
                "organ.command_before_ack",
                "DESCRIPTOR %d ms after the COMMAND: still announcing every 2 s"
                % round((descs[0].t - t_cmd) * 1000),
            )
        elif not hbs:
            r.failed(
                "organ.command_before_ack",
                "no HEARTBEAT in 2.6 s after the COMMAND: not registered",
            )
        else:
            r.passed(
                "organ.command_before_ack",
                "answered %d, HEARTBEAT %d ms later, no DESCRIPTOR for 2.6 s"
                % (status, round((hbs[0].t - t_cmd) * 1000)),
            )
