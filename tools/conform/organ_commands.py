# The organ rules' COMMANDs: every ability exercised, unknown names, lengths, groups, resync.
import math
import time

from organbus import frame
from organbus.command import CommandError, decode_event, encode_command

RESP_MS = 1000  # section 5: the master's COMMAND_RESP timeout
EVENT_SLACK_MS = 500  # on top of max_duration_ms, for the wire and a loaded host
RESYNC_MS = 400  # section 2 says 100 ms after the good frame's last byte; plus a loaded host
SILENT_MS = 300  # how long a frame that must not be answered is watched

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


class CommandRules:
    """The COMMAND half of an OrganRun (conform/organ.py): uses its cable, report, descriptor,
    `call`, `wait_event` and `probe`."""

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
