# The organ rules: the kit plays the master against an organ under test (PROTOCOL.md 2, 4-7).
import random
import statistics
import time

from organbus import frame
from organbus.command import CommandError, decode_event, encode_command
from organbus.descriptor import DescriptorError, decode_descriptor

from conform.organ_commands import RESP_MS, CommandRules
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
AT_ONCE_MS = 300  # "at once": DISCOVER -> DESCRIPTOR
HEARTBEAT_WINDOW_S = 6.3  # at least this long after ACK is watched (5 s DESCRIPTOR included)


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


class OrganRun(CommandRules):
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
