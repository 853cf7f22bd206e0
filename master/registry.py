# Sans-IO registry of the organs on each port and their lifecycle (PROTOCOL.md section 7).
#
# Bytes and ms ticks come in (`feed`, `tick`); frames go out through `send(port, frame)`.
# The heartbeat path (decoder -> Port.on_frame -> last_rx) allocates nothing, and so does a
# DESCRIPTOR identical to the registered one (compared byte by byte against `raw`, then ACKed).
from micropython import const

from organbus import command
from organbus import frame
from organbus.descriptor import DescriptorError, decode_descriptor
from organbus.ticks import ticks_diff

from organbus import log

OFFLINE_MS = const(15000)
DISCOVER_MS = const(2000)
_MAX_REFUSALS = const(4)  # distinct reasons kept per port


def _nothing(*args):
    pass


class Port:
    """One organ port: its decoder, the organ registered on it, its refusals."""

    def __init__(self, reg, index):
        self.reg = reg
        self.index = index
        self.decoder = frame.Decoder(self.on_frame)
        self.now = 0  # tick of the bytes being fed (set by Registry.feed)
        self.last_rx = None  # tick of the last legal frame, None before the first
        self.last_discover = None
        self.organ = None  # descriptor dict of the organ seen last on this port
        self.online = False
        self.seq = 0  # registration order (first registered owns a duplicated name)
        self.raw = bytearray(frame.MAX_LEN)  # the registered DESCRIPTOR payload
        self.raw_n = 0
        self.owned = []  # capability names this organ owns on the menu
        self.duplicates = []  # names left off the menu: another online organ has them
        self.refusals = []  # [reason, count, tick of last]
        self.acks = self.discovers = self.descriptors = self.bad_payloads = 0

    def on_frame(self, ftype, payload, n):
        # Decoder callback: every legal frame keeps the port alive.
        now = self.now
        self.last_rx = now
        reg = self.reg
        if ftype == frame.HEARTBEAT:
            if not self.online:
                reg.maybe_discover(self, now)
        elif ftype == frame.DESCRIPTOR:
            reg.descriptor(self, payload, n, now)
        elif not self.online:
            reg.maybe_discover(self, now)
        elif ftype == frame.COMMAND_RESP:
            if n == 1:
                reg.on_resp(self.index, payload[0], now)
            else:
                self.bad_payloads += 1
        elif ftype == frame.EVENT:
            reg.event(self, payload, n, now)

    def same_descriptor(self, payload, n):
        if n != self.raw_n:
            return False
        raw = self.raw
        for i in range(n):
            if raw[i] != payload[i]:
                return False
        return True

    def refuse(self, reason, now):
        for r in self.refusals:
            if r[0] == reason:
                r[1] += 1
                r[2] = now
                return False
        if len(self.refusals) >= _MAX_REFUSALS:
            self.refusals.pop(0)
        self.refusals.append([reason, 1, now])
        return True


class Registry:
    """The organs on `ports` (UART numbers). `send(port, frame_bytes)` queues a frame on a link.

    Hooks set by the owner (Body): on_resp(port, status, now), on_event(port, name, status, now),
    on_offline(port, now), on_change() after every menu change."""

    def __init__(self, ports, send, emit=log.emit):
        self.ports = [Port(self, i) for i in ports]
        self._by = {}
        for p in self.ports:
            self._by[p.index] = p
        self.send = send
        self.emit = emit
        self.on_resp = _nothing
        self.on_event = _nothing
        self.on_offline = _nothing
        self.on_change = _nothing
        self.version = 0  # bumps on every menu change
        self._seq = 0
        self._seen = []  # module ids registered at least once (for "again")
        self._owners = {}  # capability name -> (port index, capability, module_id), see owner()
        self.stray_events = 0

    def port(self, index):
        return self._by[index]

    def start(self, now):
        """Boot: the menu in RAM is empty; DISCOVER on every organ port."""
        for p in self.ports:
            self._discover(p, now)

    def feed(self, index, data, now, n=-1):
        """Bytes read from organ port `index` at tick `now` (data[:n], all when n < 0)."""
        p = self._by[index]
        p.now = now
        p.decoder.feed(data, now, n)

    def tick(self, now):
        """Call every few tens of ms: abandons stalled candidates, takes silent organs offline."""
        for p in self.ports:
            p.now = now
            p.decoder.idle(now)
            if p.online and ticks_diff(now, p.last_rx) >= OFFLINE_MS:
                self._offline(p, now)

    # -- lifecycle ------------------------------------------------------------------------

    def _discover(self, p, now):
        p.last_discover = now
        p.discovers += 1
        self.send(p.index, frame.DISCOVER_FRAME)

    def maybe_discover(self, p, now):
        # a legal frame from a port with no registered organ: DISCOVER, at most once per 2 s
        if p.last_discover is None or ticks_diff(now, p.last_discover) >= DISCOVER_MS:
            self._discover(p, now)

    def descriptor(self, p, payload, n, now):
        p.descriptors += 1
        if p.online and p.same_descriptor(payload, n):
            p.acks += 1
            self.send(p.index, frame.ACK_FRAME)
            return
        try:
            d = decode_descriptor(payload, n)
        except DescriptorError as e:
            reason = e.args[0] if e.args else "invalid descriptor"
            if p.refuse(reason, now):
                self.emit("refused", (("port", p.index), ("reason", reason)))
            if p.online:
                # the organ now describes itself invalidly: nothing it offered can be trusted
                self._offline(p, now)
            return
        again = d["module_id"] in self._seen
        if not again:
            self._seen.append(d["module_id"])
        p.raw[0:n] = payload[0:n]
        p.raw_n = n
        p.organ = d
        if not p.online:
            self._seq += 1
            p.seq = self._seq
        p.online = True
        p.acks += 1
        self.send(p.index, frame.ACK_FRAME)
        self.emit(
            "registered",
            (
                ("port", p.index),
                ("module_id", d["module_id"]),
                ("module_type", d["module_type"]),
                ("capabilities", [c["name"] for c in d["capabilities"]]),
                ("again", again),
            ),
        )
        self._recompute()

    def _offline(self, p, now):
        p.online = False
        self.emit("offline", (("port", p.index), ("module_id", p.organ["module_id"])))
        self._recompute()
        self.on_offline(p.index, now)

    def _recompute(self):
        # Owners: the first registered online organ keeps a name; later ones are duplicates.
        owners = {}
        online = sorted([p for p in self.ports if p.online], key=lambda p: p.seq)
        for p in self.ports:
            if not p.online:
                p.owned = []
                p.duplicates = []
        for p in online:
            owned = []
            dups = []
            for c in p.organ["capabilities"]:
                if c["name"] in owners:
                    dups.append(c["name"])
                else:
                    owners[c["name"]] = (p.index, c, p.organ["module_id"])
                    owned.append(c["name"])
            for name in dups:
                if name not in p.duplicates:
                    self.emit(
                        "duplicate",
                        (
                            ("port", p.index),
                            ("module_id", p.organ["module_id"]),
                            ("name", name),
                        ),
                    )
            p.owned = owned
            p.duplicates = dups
        self._owners = owners
        self.version += 1
        self.on_change()

    def event(self, p, payload, n, now):
        try:
            kind, name, status = command.decode_event(payload, n)
        except ValueError:
            p.bad_payloads += 1
            return
        if kind != command.EVENT_DONE:
            self.stray_events += 1
            return
        if not self.on_event(p.index, name, status, now):
            self.stray_events += 1

    # -- queries --------------------------------------------------------------------------

    def owner(self, name):
        """(port index, capability dict, module_id) of the online organ owning `name`, or None."""
        o = self._owners.get(name)  # built on each menu change: the hot path allocates nothing
        if o is None or not self._by[o[0]].online:
            return None
        return o

    def capabilities(self):
        """Menu capabilities (descriptor form plus module_id), owners only, in registration order."""
        out = []
        for p in sorted([p for p in self.ports if p.online], key=lambda p: p.seq):
            for c in p.organ["capabilities"]:
                if c["name"] in p.owned:
                    m = dict(c)
                    m["module_id"] = p.organ["module_id"]
                    out.append(m)
        return out

    def status(self, now):
        organs = []
        ports = []
        for p in self.ports:
            age = None if p.last_rx is None else ticks_diff(now, p.last_rx)
            if p.organ is not None:
                d = p.organ
                organs.append(
                    {
                        "module_id": d["module_id"],
                        "module_type": d["module_type"],
                        "hw_version": "%d.%d" % (d["hw_version"] >> 8, d["hw_version"] & 255),
                        "fw_version": "%d.%d" % (d["fw_version"] >> 8, d["fw_version"] & 255),
                        "port": p.index,
                        "online": p.online,
                        "last_frame_age_ms": age,
                        "abilities": list(p.owned) if p.online else [],
                        "duplicates": list(p.duplicates),
                        "refusals": [r[0] for r in p.refusals],
                    }
                )
            ports.append(
                {
                    "port": p.index,
                    "online": p.online,
                    "module_id": p.organ["module_id"] if p.online else None,
                    "last_frame_age_ms": age,
                    "refusals": [
                        {"reason": r[0], "count": r[1], "age_ms": ticks_diff(now, r[2])}
                        for r in p.refusals
                    ],
                    "discover_sent": p.discovers,
                    "ack_sent": p.acks,
                    "descriptors": p.descriptors,
                    "bad_payloads": p.bad_payloads,
                    "counters": p.decoder.counters(),
                }
            )
        return organs, ports
