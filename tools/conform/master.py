# The master rules: the kit plays an organ against a master under test (PROTOCOL.md 2, 4, 5, 7, 8).
import json
import struct
import time
import urllib.error
import urllib.request

from organbus import frame

from conform import wire
from conform.kitorgan import EVENT_AFTER_MS, RESP_DELAY_MS, KitOrgan
from conform.report import Rule

RULES = [
    Rule("master.discover_boot", "7", "at boot, DISCOVER on the organ port"),
    Rule(
        "master.discover",
        "7",
        "a legal frame from an unregistered port gets DISCOVER, at most once per 2 s",
    ),
    Rule(
        "master.refuse",
        "4",
        "every invalid DESCRIPTOR class is refused (no ACK) and not registered",
    ),
    Rule("master.ack", "7", "every valid DESCRIPTOR gets the empty ACK"),
    Rule("master.menu", "8", "the organ's abilities are on the menu, as described"),
    Rule(
        "master.command",
        "5,8",
        "a COMMAND only for abilities on the menu, encoded as section 5 says",
    ),
    Rule("master.values", "8", "numbers are forwarded as the model gave them (the organ clamps)"),
    Rule("master.text", "8", "text is cut to 240 bytes at a character boundary"),
    Rule(
        "master.one_outstanding",
        "5",
        "one COMMAND outstanding per link: the next waits for COMMAND_RESP",
    ),
    Rule("master.busy_group", "8", "no COMMAND to a busy resource group (held until EVENT)"),
    Rule(
        "master.duplicate",
        "7",
        "a name already registered by another online organ stays with the first",
    ),
    Rule("master.resync", "2", "after junk and a corrupt header the next good DESCRIPTOR is ACKed"),
    Rule(
        "master.offline",
        "7",
        "15 s without a legal frame: offline, off the menu, nothing forwarded",
    ),
    Rule(
        "master.rediscover",
        "7",
        "after offline, the organ's next frame gets DISCOVER and its DESCRIPTOR brings it back",
    ),
]

# Tolerances (ms), see docs/conform.md.
BOOT_LATE_S = 6.0  # the boot DISCOVER must come within this long of link-up
EARLY_MS = 150  # a rate limit or period may be kept this much short
LATE_MS = 500  # a reaction may be this much late on a loaded host
ACK_MS = 500  # a valid DESCRIPTOR is ACKed within this
NO_ACK_MS = 400  # an invalid DESCRIPTOR is watched this long for an ACK that must not come
RESYNC_MS = 400  # section 2: 100 ms after the frame's last byte, plus a loaded host
OFFLINE_MS = 15000
OFFLINE_EARLY_MS = 1000  # the organ must still be on the menu 1 s before the 15 s ...
OFFLINE_LATE_MS = 1500  # ... and gone 1.5 s after them
NO_COMMAND_MS = 1000  # a plan that must not be forwarded is watched this long


def parse_http(s):
    host, _, port = s.rpartition(":")
    if host == "localhost":
        host = "127.0.0.1"
    if not host.startswith("127."):
        raise ValueError("--http %r: only loopback addresses (127.x.x.x) are allowed" % s)
    try:
        return host, int(port)
    except ValueError:
        raise ValueError("--http %r: expected HOST:PORT" % s) from None


def _f32(v):
    return struct.unpack(">f", struct.pack(">f", v))[0]


def _plan(*steps):
    return {
        "heard_req": 0,
        "steps": [
            {
                "task_id": "t%d" % (i + 1),
                "action": a,
                "params": params,
                "priority": prio,
                "depends_on": deps,
            }
            for i, (a, params, prio, deps) in enumerate(steps)
        ],
        "can_execute": True,
        "missing": [],
        "response": "",
    }


class MasterRun:
    def __init__(self, cable, report, boot_seen, http=None, second=()):
        self.c = cable
        self.c2 = second[0] if second else None
        self.organ2 = None
        self.r = report
        self.boot_seen = boot_seen
        self.http = http
        self.organ = None

    # -- HTTP (the master's own API: GET /menu, POST /plan) -----------------------------------

    def _get(self, path, body=None):
        url = "http://%s:%d%s" % (self.http[0], self.http[1], path)
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(url, data=data, method="GET" if data is None else "POST")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=20) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            try:
                return e.code, json.loads(e.read() or b"null")
            except ValueError:
                return e.code, None

    def menu_names(self):
        status, menu = self._get("/menu")
        if status != 200 or not isinstance(menu, dict):
            return None
        return {c.get("name"): c for c in menu.get("capabilities", [])}

    def plan(self, *steps):
        """POST /plan; (status, answer, commands the kit organ got meanwhile)."""
        k = len(self.organ.commands)
        status, answer = self._get("/plan", _plan(*steps))
        return status, answer, self.organ.commands[k:]

    def need_http(self, *rules):
        for rule in rules:
            self.r.na(
                rule, "needs the master's HTTP API to make it send COMMANDs (--http HOST:PORT)"
            )

    # -- the run -------------------------------------------------------------------------------

    def run(self):
        r, c = self.r, self.c
        self.organ = KitOrgan(c, wire.good_descriptor())
        r.subject = "kit organ %s" % self.organ.d["module_id"]
        try:
            self.check_boot()
            if r.wanted("master.discover"):
                self.check_discover()
            if r.wanted("master.refuse"):
                self.check_refuse()
            if not self.register("master.ack"):
                return
            if self.http is None:
                self.need_http(
                    "master.menu",
                    "master.command",
                    "master.values",
                    "master.text",
                    "master.one_outstanding",
                    "master.busy_group",
                )
            else:
                self.check_menu()
                for check in (
                    self.check_command,
                    self.check_values,
                    self.check_text,
                    self.check_one_outstanding,
                    self.check_busy_group,
                ):
                    check()
            if r.wanted("master.duplicate"):
                self.check_duplicate()
            if r.wanted("master.resync"):
                self.check_resync()
            if r.wanted("master.offline", "master.rediscover"):
                self.check_offline()
        finally:
            self.organ.stop()
            if self.organ2 is not None:
                self.organ2.stop()

    def check_boot(self):
        r, c = self.r, self.c
        if not self.boot_seen:
            r.na(
                "master.discover_boot",
                "the kit did not see the master boot (use listen: and start the master after the kit)",
            )
            return
        f = c.wait_for(frame.DISCOVER, 0, BOOT_LATE_S)
        if f is None:
            r.failed("master.discover_boot", "no DISCOVER in %.0f s after link-up" % BOOT_LATE_S)
        else:
            r.passed(
                "master.discover_boot",
                "DISCOVER %d ms after link-up" % round((f.t - c.t_up) * 1000),
            )
        time.sleep(0.3)  # let the master settle after its boot

    def check_discover(self):
        r, c = self.r, self.c
        m = c.mark()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 4.5:
            c.send(frame.HEARTBEAT)
            time.sleep(0.2)
        got = c.since(m, frame.DISCOVER)
        # the boot DISCOVER counts towards the rate only when the kit saw the boot itself
        alld = c.since(0 if self.boot_seen else m, frame.DISCOVER)
        gaps = [round((b.t - a.t) * 1000) for a, b in zip(alld, alld[1:])]
        if not got:
            r.failed(
                "master.discover", "no DISCOVER in 4.5 s of HEARTBEATs from an unregistered port"
            )
        elif min(gaps, default=2000) < 2000 - EARLY_MS:
            r.failed(
                "master.discover", "DISCOVERs %s ms apart, expected at most one per 2000 ms" % gaps
            )
        else:
            first = round((got[0].t - t0) * 1000)
            r.passed(
                "master.discover",
                "DISCOVER %d ms after the first HEARTBEAT, %d in 4.5 s" % (first, len(got)),
            )

    def check_refuse(self):
        r, c = self.r, self.c
        names = []
        for cls, payload, name in wire.invalid_descriptors():
            m = c.mark()
            c.send(frame.DESCRIPTOR, payload)
            ack = c.wait_for(frame.ACK, m, NO_ACK_MS / 1000)
            names.append(name)
            if ack is not None:
                r.failed(
                    "master.refuse",
                    "%s: ACKed %d ms after the DESCRIPTOR, expected no ACK"
                    % (cls, round((ack.t - c.written[-1][0]) * 1000)),
                )
                return
        if self.http is not None:
            menu = self.menu_names()
            if menu is None:
                r.failed("master.refuse", "GET /menu did not answer a menu")
                return
            bad = sorted(set(names) & set(menu))
            if bad:
                r.failed(
                    "master.refuse",
                    "not ACKed, but registered anyway: %s on the menu" % ", ".join(bad),
                )
                return
        r.passed(
            "master.refuse",
            "%d invalid classes, none ACKed%s"
            % (len(names), ", none on the menu" if self.http else " (menu not checked: no --http)"),
        )

    def register(self, rule):
        """Send the kit organ's DESCRIPTOR until ACKed; start its cadence. False when never."""
        r, c = self.r, self.c
        m = c.mark()
        t = self.organ.describe()
        ack = c.wait_for(frame.ACK, m, ACK_MS / 1000)
        if ack is None:
            ack = c.wait_for(frame.ACK, m, 2.0)
            if rule:
                r.failed(
                    rule,
                    "no ACK within %d ms of a valid DESCRIPTOR%s"
                    % (ACK_MS, "" if ack is None else " (came later)"),
                )
            if ack is None:
                r.rest_na("the master never ACKed the kit organ (master.ack)")
                return False
        lat = round((ack.t - t) * 1000)
        if ack.payload:
            r.failed(rule, "ACK with a %d-byte payload, expected empty" % len(ack.payload))
        self.organ.start_cadence(time.monotonic())
        if rule:
            # the 5 s re-describe must be ACKed too
            m2 = c.mark()
            t2 = self.organ.describe()
            ack2 = c.wait_for(frame.ACK, m2, ACK_MS / 1000)
            if ack2 is None:
                r.failed(rule, "the DESCRIPTOR sent again was not ACKed")
            else:
                r.passed(
                    rule,
                    "ACK %d ms after the DESCRIPTOR's last byte, again %d ms after the repeat"
                    % (lat, round((ack2.t - t2) * 1000)),
                )
        if self.http is not None:
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:
                menu = self.menu_names()
                if menu and "cf_on" in menu:
                    break
                time.sleep(0.05)
        return True

    def check_menu(self):
        r = self.r
        if not r.wanted("master.menu"):
            return
        menu = self.menu_names()
        if menu is None:
            r.failed("master.menu", "GET /menu did not answer a menu")
            return
        for cap in self.organ.d["capabilities"]:
            got = menu.get(cap["name"])
            if got is None:
                r.failed("master.menu", "%s is not on the menu" % cap["name"])
                return
            for key in ("exec_type", "resource_group", "max_duration_ms"):
                if key in got and got[key] != cap[key]:
                    r.failed(
                        "master.menu",
                        "%s: %s %r, the organ described %r"
                        % (cap["name"], key, got[key], cap[key]),
                    )
                    return
            gp = [
                (p.get("name"), p.get("type"), p.get("min"), p.get("max"))
                for p in got.get("params", [])
            ]
            want = [(p["name"], p["type"], p["min"], p["max"]) for p in cap["params"]]
            if gp != want:
                r.failed(
                    "master.menu", "%s: params %s, the organ described %s" % (cap["name"], gp, want)
                )
                return
        r.passed("master.menu", "%d abilities as described" % len(self.organ.d["capabilities"]))

    def check_command(self):
        r = self.r
        if not r.wanted("master.command"):
            return
        status, answer, cmds = self.plan(("cf_on", {}, 5, []))
        time.sleep(0.1)
        if status != 200 or [x[1] for x in cmds] != ["cf_on"]:
            r.failed(
                "master.command",
                "plan cf_on: HTTP %s, COMMANDs %s, expected 200 and one cf_on"
                % (status, [x[1] for x in cmds]),
            )
            return
        if cmds[0][4] != b"\x05cf_on":
            r.failed(
                "master.command",
                "cf_on COMMAND payload %s, expected 05 63 66 5f 6f 6e" % cmds[0][4].hex(" "),
            )
            return
        for action in ("cf_of", "CF_ON", "cf", "conform.cf_onn"):
            k = len(self.organ.commands)
            status, answer = self._get("/plan", _plan((action, {}, 5, [])))
            time.sleep(NO_COMMAND_MS / 1000 if action == "cf_of" else 0.2)
            sent = self.organ.commands[k:]
            if sent:
                r.failed(
                    "master.command",
                    "plan with %r (not on the menu): COMMAND %r sent, expected none"
                    % (action, sent[0][1]),
                )
                return
            if status == 200:
                r.failed(
                    "master.command",
                    "plan with %r (not on the menu) accepted (200), expected a refusal" % action,
                )
                return
        r.passed(
            "master.command",
            "cf_on forwarded as 05 'cf_on'; 4 names not on the menu refused, nothing sent",
        )

    def check_values(self):
        r = self.r
        if not r.wanted("master.values"):
            return
        cases = [
            {"level": 150, "gain": 0.1, "on": True},
            {"level": -7, "gain": 9.75, "on": False},
            {"level": 42, "gain": 1.25, "on": True},
        ]
        for params in cases:
            status, answer, cmds = self.plan(("cf_set", params, 5, []))
            mine = [x for x in cmds if x[1] == "cf_set"]
            if status != 200 or len(mine) != 1 or mine[0][2] is None:
                r.failed(
                    "master.values",
                    "plan cf_set %s: HTTP %s, %d cf_set COMMANDs, expected 200 and one"
                    % (params, status, len(mine)),
                )
                return
            got = mine[0][2]
            want = [float(params["level"]), _f32(params["gain"]), 1.0 if params["on"] else 0.0]
            for pname, g, w in zip(("level", "gain", "on"), got, want):
                if g != w:
                    r.failed(
                        "master.values",
                        "%s: COMMAND carried %r, the plan gave %r (the master must not rewrite numbers)"
                        % (pname, g, params[pname]),
                    )
                    return
        r.passed(
            "master.values", "level 150 and -7 (out of range), gain 0.1 and 9.75 forwarded as given"
        )

    def check_text(self):
        r = self.r
        if not r.wanted("master.text"):
            return
        text = "a" * 239 + "\u00e9" + "b" * 60  # 301 bytes; the 2-byte character spans byte 240
        status, answer, cmds = self.plan(("cf_say", {"text": text}, 5, []))
        mine = [x for x in cmds if x[1] == "cf_say"]
        if status != 200 or len(mine) != 1:
            r.failed(
                "master.text",
                "plan cf_say with 301 bytes: HTTP %s, %d COMMANDs, expected 200 and one (cut to 240)"
                % (status, len(mine)),
            )
            return
        got = mine[0][3]
        if got is None:
            r.failed("master.text", "cf_say COMMAND did not decode (%s)" % mine[0][4][:24].hex())
        elif got != "a" * 239:
            r.failed(
                "master.text",
                "text of %d bytes forwarded, expected the first 239 (cut before the 2-byte character)"
                % len(got.encode("utf-8")),
            )
        else:
            r.passed("master.text", "301 bytes cut to 239 at the character boundary")

    def check_one_outstanding(self):
        r = self.r
        if not r.wanted("master.one_outstanding"):
            return
        status, answer, cmds = self.plan(("cf_hold", {}, 9, []), ("cf_on", {}, 5, []))
        names = [x[1] for x in cmds]
        hold = [x for x in cmds if x[1] == "cf_hold"]
        on = [x for x in cmds if x[1] == "cf_on"]
        if len(hold) != 1 or len(on) != 1:
            r.failed(
                "master.one_outstanding",
                "plan cf_hold + cf_on: COMMANDs %s, expected one each" % names,
            )
            return
        resp_t = [t for t, n, s in self.organ.resps if n == "cf_hold"][-1]
        if on[0][0] < resp_t:
            r.failed(
                "master.one_outstanding",
                "cf_on COMMAND %d ms before cf_hold's COMMAND_RESP (held %d ms)"
                % (round((resp_t - on[0][0]) * 1000), RESP_DELAY_MS),
            )
        else:
            r.passed(
                "master.one_outstanding",
                "cf_on %d ms after cf_hold's late COMMAND_RESP" % round((on[0][0] - resp_t) * 1000),
            )

    def check_busy_group(self):
        r = self.r
        if not r.wanted("master.busy_group"):
            return
        status, answer, cmds = self.plan(("cf_run", {"ms": 500}, 9, []), ("cf_on", {}, 5, []))
        run = [x for x in cmds if x[1] == "cf_run"]
        on = [x for x in cmds if x[1] == "cf_on"]
        if len(run) != 1 or len(on) != 1:
            r.failed(
                "master.busy_group",
                "plan cf_run + cf_on (group 'cf'): COMMANDs %s, expected one each"
                % [x[1] for x in cmds],
            )
            return
        ev = [t for t, n in self.organ.events if n == "cf_run" and t > run[0][0]]
        if not ev or on[0][0] < ev[0]:
            r.failed(
                "master.busy_group",
                "cf_on COMMAND %d ms after cf_run's, while group 'cf' was busy (EVENT sent after %d ms)"
                % (round((on[0][0] - run[0][0]) * 1000), EVENT_AFTER_MS),
            )
        else:
            r.passed(
                "master.busy_group",
                "cf_on %d ms after cf_run's EVENT" % round((on[0][0] - ev[0]) * 1000),
            )

    def check_duplicate(self):
        r = self.r
        if self.c2 is None:
            r.na("master.duplicate", "needs a second kit organ on another port (a second --uart)")
            return
        if self.http is None:
            self.need_http("master.duplicate")
            return
        c2 = self.c2
        self.organ2 = o2 = KitOrgan(c2, wire.second_descriptor())
        m = c2.mark()
        t = o2.describe()
        ack = c2.wait_for(frame.ACK, m, 2.0)
        if ack is None:
            # a master that sends DISCOVER first: answer it, then look again
            if c2.wait_for(frame.DISCOVER, 0, 0.1) is not None:
                o2.describe()
            ack = c2.wait_for(frame.ACK, m, 2.0)
        if ack is None:
            r.failed("master.duplicate", "the second organ's valid DESCRIPTOR was not ACKed")
            return
        o2.start_cadence(time.monotonic())
        deadline = time.monotonic() + 2.0
        menu = {}
        while time.monotonic() < deadline:
            menu = self.menu_names() or {}
            if "cf_two" in menu:
                break
            time.sleep(0.05)
        if "cf_two" not in menu:
            r.failed("master.duplicate", "the second organ's cf_two is not on the menu")
            return
        owner = menu.get("cf_on", {}).get("module_id")
        if owner not in (None, "CONFORM_01"):
            r.failed(
                "master.duplicate",
                "cf_on on the menu as %s's, expected the first organ's (CONFORM_01)" % owner,
            )
            return
        k1, k2 = len(self.organ.commands), len(o2.commands)
        status, answer = self._get("/plan", _plan(("cf_on", {}, 5, [])))
        time.sleep(0.1)
        got1 = [x[1] for x in self.organ.commands[k1:]]
        got2 = [x[1] for x in o2.commands[k2:]]
        if got1 != ["cf_on"] or got2:
            r.failed(
                "master.duplicate",
                "plan cf_on: COMMANDs %s to the first organ, %s to the second; expected one to the first"
                % (got1, got2),
            )
            return
        r.passed(
            "master.duplicate",
            "cf_on stays with CONFORM_01 (COMMAND on its port), cf_two on the menu",
        )

    def check_resync(self):
        r, c = self.r, self.c
        good = frame.encode(frame.DESCRIPTOR, self.organ.payload)
        worst = 0
        flipped = bytearray(good)
        flipped[9] ^= 0x10
        noise = bytes((i * 37 + 11) % 256 for i in range(64)).replace(b"\xaa", b"\x00")
        for what, data in (
            ("64 junk bytes", noise + good),
            ("a corrupt header claiming 511 bytes", b"\xaa\x03\x01\x01\xff" + good),
            ("a bit-flipped DESCRIPTOR", bytes(flipped)),
        ):
            m = c.mark()
            t = c.write(data) + c.wire_s(len(data))
            if what.startswith("a bit-flipped"):
                if c.wait_for(frame.ACK, m, NO_ACK_MS / 1000) is not None:
                    r.failed("master.resync", "a DESCRIPTOR with a bad CRC was ACKed")
                    return
                m = c.mark()
                t = c.write(good) + c.wire_s(len(good))
            ack = c.wait_for(frame.ACK, m, (RESYNC_MS + 600) / 1000)
            if ack is None:
                r.failed("master.resync", "after %s: the good DESCRIPTOR was not ACKed" % what)
                return
            lat = round((ack.t - t) * 1000)
            worst = max(worst, lat)
            if lat > RESYNC_MS:
                r.failed(
                    "master.resync",
                    "after %s: ACK %d ms after the DESCRIPTOR's last byte, expected <= %d"
                    % (what, lat, RESYNC_MS),
                )
                return
        r.passed(
            "master.resync",
            "junk, a corrupt header and a bad CRC: the next DESCRIPTOR ACKed each time, within %d ms"
            % worst,
        )

    def check_offline(self):
        r, c = self.r, self.c
        if self.organ2 is not None:
            self.organ2.silence()  # both fall silent: cf_on must not move to the second organ
        self.organ.silence()
        time.sleep(0.05)
        t0 = c.t_free  # the kit's last byte has left: the master's 15 s start there
        problem = None
        if self.http is not None:
            time.sleep(max(0.0, t0 + (OFFLINE_MS - OFFLINE_EARLY_MS) / 1000 - time.monotonic()))
            menu = self.menu_names() or {}
            if "cf_on" not in menu:
                problem = "off the menu %d ms after the last frame, expected 15000 ms" % round(
                    (time.monotonic() - t0) * 1000
                )
        time.sleep(max(0.0, t0 + (OFFLINE_MS + OFFLINE_LATE_MS) / 1000 - time.monotonic()))
        if self.http is not None and problem is None:
            menu = self.menu_names() or {}
            if "cf_on" in menu:
                problem = "cf_on still on the menu %d ms after the last frame" % round(
                    (time.monotonic() - t0) * 1000
                )
            k = len(self.organ.commands)
            status, answer = self._get("/plan", _plan(("cf_on", {}, 5, [])))
            time.sleep(0.2)
            sent = self.organ.commands[k:]
            if sent:
                problem = (
                    "a plan with cf_on was forwarded to the offline organ (COMMAND %r at %.1f s of silence)"
                    % (sent[0][1], sent[0][0] - t0)
                )
        if problem:
            r.failed("master.offline", problem)
        elif self.http is None:
            r.passed(
                "master.offline",
                "judged by the DISCOVER that follows (no --http: menu not checked)",
            )
        else:
            r.passed(
                "master.offline", "on the menu at 14 s, off at 16.5 s, a plan for it not forwarded"
            )
        # back: a HEARTBEAT (the organ never knew) must get DISCOVER, the DESCRIPTOR an ACK
        m = c.mark()
        t = c.send(frame.HEARTBEAT)
        d = c.wait_for(frame.DISCOVER, m, (1000 + LATE_MS) / 1000)
        if d is None:
            r.failed(
                "master.rediscover",
                "no DISCOVER within %d ms of a HEARTBEAT after %d s of silence"
                % (1000 + LATE_MS, round(t - t0)),
            )
            if self.http is None:
                r.failed(
                    "master.offline",
                    "no DISCOVER after %d s of silence: the port still counts as registered"
                    % round(t - t0),
                )
            return
        if not self.register(None):
            r.failed("master.rediscover", "the DESCRIPTOR after DISCOVER was not ACKed")
            return
        if self.http is not None:
            menu = self.menu_names() or {}
            if "cf_on" not in menu:
                r.failed("master.rediscover", "ACKed but not back on the menu")
                return
        r.passed(
            "master.rediscover",
            "DISCOVER %d ms after the HEARTBEAT, ACKed and back on the menu"
            % round((d.t - t) * 1000),
        )
