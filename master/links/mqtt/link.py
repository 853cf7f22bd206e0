# The MQTT link (config "mqtt"): the body on a broker: Home Assistant discovery and commands, its menu, plans in, reports and events out.
#
# One client (client.py: its own reconnecting task and its writer's, a bounded queue, never
# waited on). The link hears the hub (master/bus/hub.py) and copies each event, described as
# GET /events describes it, into the client's bounded queue for `<base>/events` (the client's
# writer task does the slow part, as a Feed's consumer would: no task of the link's own, ~1.5 KB
# less); the lifecycle events (registered, offline, menu) also bring the retained state up to
# date: organ availability, Home Assistant configs, the menu, the diagnostics.
# Plans come in on `<base>/plan[/<ref>]` as raw bytes and go to Body.submit, the one strict
# path POST /plan takes; the answer (the HTTP route's status and body) goes to
# `<base>/report[/<ref>]`. Retained documents are built when written (client.py), from the
# live state, so a broker away for long holds nothing here. Topics: docs/links.md "MQTT".
import asyncio
import json

from micropython import const

from organbus import log
from organbus import plan as _plan

from master.bus.hub import describe
from master.bus.outcome import ACCEPTED
from master.links.mqtt import discovery
from master.links.mqtt.client import Client
from master.links.routes import answer, menu_pieces

DEFAULTS = {
    "port": 1883,
    "discovery_prefix": "homeassistant",
    "keepalive_s": 30,
    "base_topic": "organbus",  # the body's topics: <base_topic>/<client_id>/...
}
IN_FLIGHT = const(4)  # plans from MQTT running at once; one more is answered 503
BLINK_COUNT = const(3)  # the light's blink effect: led_blink count and period, within bounds
BLINK_PERIOD_MS = const(500)
_ERRORS = ("crc_errors", "bad_version", "oversize", "bad_eof", "abandoned", "unknown")
_LIFE = ("registered", "offline", "menu")
_DIAG = ("registered", "offline", "plan", "rejected", "decoder")


def _item(event, pairs):
    # one GET /events item as one JSON object, "event" first (the sse.item_bytes pairs)
    parts = ['"event": ' + json.dumps(event)]
    for k, v in pairs:
        parts.append("%s: %s" % (json.dumps(k), json.dumps(v)))
    return "{" + ", ".join(parts) + "}"


def _node(text):
    # a topic and Home Assistant object id: [a-zA-Z0-9_-] only
    out = ""
    for ch in text:
        out += ch if ch.isalpha() or ch.isdigit() or ch in "_-" else "_"
    return out


class Link:
    def __init__(self, body, cfg, node, version):
        self.body = body
        self.node = node
        self.version = version
        self.prefix = cfg["discovery_prefix"]
        self.base = cfg["base_topic"] + "/" + node
        self.broker = "%s:%d" % (cfg["host"], cfg["port"])
        avail = self.base + "/availability"
        self.client = c = Client(
            cfg["host"],
            cfg["port"],
            node,
            cfg["keepalive_s"],
            cfg.get("user"),
            cfg.get("password"),
            (avail, b"offline", 1, True),
        )
        c.subscriptions = [
            (self.base + "/plan", 1),
            (self.base + "/plan/+", 1),
            (self.base + "/cmd/#", 0),
            (self.prefix + "/status", 0),
        ]
        c.on_connect = self.on_connect
        c.on_message = self.on_message
        body.subscribe(self.on_event)
        self.organs = {}  # module_id -> [names, {component id: platform}, descriptor, online]
        self.lights = {}  # module_id -> "ON" / "OFF", from the steps that ran
        self.running = 0
        self.plans = 0  # plans taken from the plan topic
        self.reports = 0
        self.commands = 0  # Home Assistant commands run
        self.events_sent = 0
        self.errors = 0  # hub events the link could not handle (MemoryError)

    # -- retained state ---------------------------------------------------------------------

    def _json(self, topic, fn, qos=0):
        # a retained document, built when it is written (the client writes it piece by piece)
        self.client.publish(topic, fn, qos, True)

    def menu(self):
        # GET /menu's document, each capability built as it is written (routes.menu_pieces)
        return menu_pieces(self.body)

    def diagnostics(self):
        b = self.body
        errors = 0
        for p in b.ports:
            c = p.decoder.counters()
            for k in _ERRORS:
                errors += c.get(k, 0)
        return {
            "organs_online": len(b.online_organs()),
            "plans_run": b.accepted,  # finished and running
            "plans_refused": b.refused,
            "decoder_errors": errors,
        }

    def publish_all(self):
        """Everything retained, afresh: at each connect and when Home Assistant says online."""
        c = self.client
        base = self.base
        c.publish(base + "/availability", b"online", 1, True)
        topic = discovery.body_config(self.prefix, self.node, base, self.version)[0]
        self._json(
            topic, lambda: discovery.body_config(self.prefix, self.node, base, self.version)[1], 1
        )
        v = self.version
        self._json(base + "/update", lambda: {"installed_version": v, "latest_version": v})
        self._json(base + "/menu", self.menu, 1)
        self._json(base + "/diagnostics", self.diagnostics)
        self.sync(True)

    def sync(self, force=False):
        """Organ availability and configs as the live menu has them: an organ gone offline is
        unavailable (its config stays); an online organ's components that are gone are
        removed, an organ with none left gets an empty retained config."""
        b = self.body
        names = {}
        for cap in b.capabilities():
            names.setdefault(cap["module_id"], []).append(cap["name"])
        online = {}
        for d in b.online_organs():
            online[d["module_id"]] = d
        c = self.client
        for mid in online:
            known = self.organs.get(mid)
            now = names.get(mid, [])
            if known is None:
                known = self.organs[mid] = [now, {}, online[mid], False]
            known[0] = now
            known[2] = online[mid]
            self._config(mid, known, force)
            if not known[3] or force:
                c.publish(self.base + "/" + mid + "/availability", b"online", 1, True)
                known[3] = True
        for mid in self.organs:
            known = self.organs[mid]
            if mid in online:
                continue
            if force:
                self._config(mid, known, True)
            if known[3] or force:
                c.publish(self.base + "/" + mid + "/availability", b"offline", 1, True)
                known[3] = False

    def _config(self, mid, known, force):
        cmps = discovery.organ_components(self.base, mid, known[0])
        plats = discovery.platforms(cmps)
        if plats == known[1] and not force:
            return
        topic = discovery.organ_topic(self.prefix, self.node, mid)
        if cmps:
            gone = {}
            for k in known[1]:
                if k not in plats:
                    gone[k] = known[1][k]
            cmps = None  # built again when written: nothing of it held while queued
            names = known[0]
            organ = known[2]

            def doc():
                c = discovery.organ_components(self.base, mid, names)
                return discovery.organ_config(
                    self.prefix, self.node, self.base, mid, c, gone, organ
                )[1]

            self._json(topic, doc, 1)
            if "led_on" in known[0]:
                self.client.publish(
                    self.base + "/" + mid + "/light", self.lights.get(mid, "OFF"), 0, True
                )
        elif known[1]:  # it had components, none is left: the device is removed
            self.client.publish(topic, b"", 1, True)
        known[1] = plats

    # -- the client's callbacks (its reader task: they only queue) ------------------------------

    def on_connect(self):
        self.publish_all()

    def on_message(self, topic, payload):
        base = self.base
        try:
            if topic == self.prefix + "/status":
                if bytes(payload) == b"online":
                    self.publish_all()
            elif self.client.retained and topic.startswith(base + "/"):
                # a retained plan or command would run again at every connect: never run
                log.emit("mqtt", [("what", "ignored"), ("topic", topic), ("why", "retained")])
            elif topic == base + "/plan" or topic.startswith(base + "/plan/"):
                self.plans += 1
                self.run_plan(payload, topic[len(base) + 6 :])
            elif topic.startswith(base + "/cmd/"):
                mid, _, what = topic[len(base) + 5 :].partition("/")
                self.command(mid, what, bytes(payload))
        except Exception as e:  # a message never ends the session
            log.emit("mqtt", [("what", "error"), ("topic", topic), ("error", repr(e))])

    def report(self, ref, status, obj):
        self.reports += 1
        topic = self.base + "/report" + ("/" + ref if ref else "")
        self.client.publish(topic, json.dumps({"status": status, "reply": obj}), 1, False)

    def run_plan(self, raw, ref=""):
        """`raw` (a plan's bytes, or a plan built by `command`) through Body.submit, its report
        (or refusal) to the report topic."""
        if self.running >= IN_FLIGHT:
            why = "%d plans from MQTT are running already, the most this body takes" % IN_FLIGHT
            self.report(ref, 503, {"error": why, "problems": [why]})
            return

        def done(run):
            self.running -= 1
            self.report(ref, 200, run.report())

        self.running += 1
        try:
            kind, obj = self.body.submit(raw, None, done)
        except Exception:  # (MemoryError) nothing runs: not counted as running
            self.running -= 1
            raise
        if kind != ACCEPTED:
            self.running -= 1
            status, payload = answer(kind, obj)
            self.report(ref, status, payload)

    def command(self, mid, what, payload):
        """A Home Assistant entity's command: one step of organ `mid`'s ability."""
        params = {}
        if what == "light":
            action = {b"ON": "led_on", b"OFF": "led_off"}.get(payload)
        elif what == "effect":
            action = "led_blink" if payload.split(b" ")[0] == discovery.BLINK.encode() else None
            params = self._blink(mid, payload)
        elif what == "speak":
            action, params = "speak", {"text": payload.decode()}
        elif what == "chime":
            action = "chime"
        else:
            action = None
        cap = self._cap(mid, action) if action else None
        if cap is None:
            log.emit("mqtt", [("what", "ignored"), ("organ", mid), ("command", what)])
            return
        self.commands += 1
        self.run_plan(_plan.one_step(action, params), "ha")

    def _cap(self, mid, action):
        for cap in self.body.capabilities():
            if cap["name"] == action and cap["module_id"] == mid:
                return cap
        return None

    def _blink(self, mid, payload):
        # "blink": count and period within the ability's bounds; "blink COUNT PERIOD_MS": those
        # (the Body refuses numbers out of bounds, as for any plan)
        words = payload.split()
        if len(words) == 3:
            try:
                return {"count": int(words[1]), "period_ms": int(words[2])}
            except ValueError:
                pass
        cap = self._cap(mid, "led_blink")
        out = {"count": BLINK_COUNT, "period_ms": BLINK_PERIOD_MS}
        for p in cap["params"] if cap else ():
            if p["name"] in out:
                out[p["name"]] = min(max(out[p["name"]], p["min"]), p["max"])
        return out

    # -- the hub's events: copied, queued, and the retained state they change ------------------

    def on_event(self, event, port, data):
        """A hub subscriber: returns at once, keeps nothing of `data` (its described copy goes
        into the client's bounded queue); an error is counted and said, never raised."""
        try:
            pairs = describe(event, port, data)
            pairs.insert(0, ("t_ms", self.body.stamp()))  # as GET /events stamps its items
            self.heard(event, pairs)
        except Exception as e:  # (MemoryError) the bus goes on
            self.errors += 1
            log.emit("mqtt", [("what", "error"), ("event", event), ("error", repr(e))])

    def heard(self, event, pairs):
        """One hub event: out on the events topic, and the retained state it changes."""
        if self.client.connected:  # its JSON made when written
            self.client.publish(self.base + "/events", lambda: _item(event, pairs))
            self.events_sent += 1
        if event in _LIFE:
            self.sync()
        if event == "menu":
            self._json(self.base + "/menu", self.menu, 1)
        if event == "step":
            self._light(pairs)
        if event in _DIAG:
            self._json(self.base + "/diagnostics", self.diagnostics)

    def _light(self, pairs):
        d = dict(pairs)
        state = {"led_on": "ON", "led_off": "OFF"}.get(d.get("action"))
        if state is None or d.get("status") != "done":
            return
        for cap in self.body.capabilities():
            if cap["name"] == d["action"]:
                mid = cap["module_id"]
                self.lights[mid] = state
                self.client.publish(self.base + "/" + mid + "/light", state, 0, True)

    def status(self):
        c = self.client
        return {
            "broker": self.broker,
            "node": self.node,
            "connected": c.connected,
            "connects": c.connects,
            "dropped": c.dropped,
            "oversize": c.oversize,
            "refused": c.refused,
            "plans": self.plans,
            "reports": self.reports,
            "commands": self.commands,
            "events_sent": self.events_sent,
            "errors": self.errors,
            "last_error": c.last_error,
        }


def settings(cfg):
    """The link's settings from config "mqtt" over DEFAULTS; ValueError says what is wrong."""
    if not isinstance(cfg, dict):
        raise ValueError("mqtt must be an object with host (and port, client_id, ...)")
    out = dict(DEFAULTS)
    out.update(cfg)
    if not isinstance(out.get("host"), str) or not out["host"]:
        raise ValueError("mqtt.host must be the broker's name or address")
    for key, low, high in (("port", 1, 65535), ("keepalive_s", 5, 600)):
        v = out[key]
        if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
            raise ValueError("mqtt.%s must be a whole number from %d to %d" % (key, low, high))
    for key in ("client_id", "user", "password", "discovery_prefix", "base_topic"):
        v = out.get(key)
        if v is not None and not isinstance(v, str):
            raise ValueError("mqtt.%s must be a string" % key)
    return out


def _default_id(uid):
    # the board's unique id (machine.unique_id(), passed in by the board's main.py), as ESPHome
    # and Tasmota name a device by its MAC
    if not uid:
        return "organbus"
    import binascii

    return "organbus-" + binascii.hexlify(uid).decode()[-12:]


def _version(config):
    # the running code's version: the update's bundle when one is installed (its ota.json, read
    # only when the update runs and has it loaded), else the code's own (MCP's serverInfo)
    import sys

    from master.links.mcp import SERVER_INFO

    ota = sys.modules.get("master.ota.service")
    if ota is not None:
        v = ota.read_state((config.get("board") or {}).get("flash", "")).get("version")
        if isinstance(v, str) and v:
            return v
    return SERVER_INFO["version"]


def start(body, config):
    """The link's entry (config "mqtt"): the Link, its tasks started and its /status section
    "mqtt", or None (the reason on the event log)."""
    try:
        cfg = settings(config.get("mqtt"))
    except ValueError as e:
        log.emit("mqtt", [("what", "refused"), ("reason", str(e))])
        return None
    node = _node(cfg.get("client_id") or _default_id((config.get("board") or {}).get("uid")))
    link = Link(body, cfg, node, _version(config))
    body.add_status_section("mqtt", link.status)
    asyncio.create_task(link.client.run())
    log.emit("mqtt", [("what", "start"), ("broker", link.broker), ("node", node)])
    return link
