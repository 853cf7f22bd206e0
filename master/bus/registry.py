# Sans-IO lifecycle of the organs on the master's ports (PROTOCOL.md section 7).
#
# A Port hands every legal frame up (`frame(port, ...)`); the registry never calls a Port: it
# returns the lifecycle frame to answer with (DISCOVER, ACK or None) and the Port sends it.
# `poll(now) -> ms` runs the offline rule, like every timer of the master. It keeps one Slot per port (the
# organ seen there), updates the Owners table on each registration change (a Slot notes the
# Port its organ registered on: the scheduler's COMMAND address), routes COMMAND_RESP and
# EVENT to the scheduler, and publishes what happens on the hub. A heartbeat, and a DESCRIPTOR
# identical to the registered one (compared byte by byte against `raw`), allocate nothing.

import micropython
from micropython import const

from organbus import command
from organbus import frame
from organbus.descriptor import DescriptorError, decode_descriptor
from organbus.ticks import ticks_diff

_NONE = None  # (viper compares an object with None through a name)
_ONE = 1  # (and adds an object to an object: a counter's += stays the interpreter's)
OFFLINE_MS = const(15000)
DISCOVER_MS = const(2000)
_MAX_REFUSALS = const(4)  # distinct reasons kept per port
_FAR_MS = const(60000)  # no rule of a port without an online organ comes due sooner
# frame types as constants folded into the bytecode (frame.X is two lookups per frame)
_DESCRIPTOR = const(0x01)
_HEARTBEAT = const(0x03)
_COMMAND_RESP = const(0x11)
_EVENT = const(0x20)
_EVENT_DONE = const(1)  # command.EVENT_DONE
assert _EVENT_DONE == command.EVENT_DONE
assert (_DESCRIPTOR, _HEARTBEAT, _COMMAND_RESP, _EVENT) == (
    frame.DESCRIPTOR,
    frame.HEARTBEAT,
    frame.COMMAND_RESP,
    frame.EVENT,
)


class Slot:
    """The organ seen last on one port: descriptor, registration, menu share, refusals."""

    def __init__(self, index):
        self.index = index
        self.port = None  # the Port its organ registered on (reply address for COMMANDs)
        self.organ = None  # descriptor dict of the organ seen last on this port
        self.online = False
        self.again = False  # its module_id had registered before (an organ back)
        self.seq = 0  # registration order (first registered owns a duplicated name)
        self.raw = bytearray(frame.MAX_LEN)  # the registered DESCRIPTOR payload
        self.raw_n = 0
        self.owned = []  # capability names this organ owns on the menu
        self.duplicates = []  # names left off the menu: another online organ has them
        self.new_duplicates = []
        self.refusals = []  # [reason, count, tick of last]
        self.last_discover = None
        self.acks = self.discovers = self.descriptors = self.bad_payloads = 0

    def same_descriptor(self, payload, n):
        if n != self.raw_n:
            return False
        raw = self.raw
        for i in range(n):
            if raw[i] != payload[i]:
                return False
        return True

    def refuse(self, reason, now):
        """Count a refusal; True when the reason is new (worth an event)."""
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
    """The organs on ports `indexes`; `owners` (Owners) is kept up to date, `scheduler` gets
    COMMAND_RESP, EVENT and offline, `hub` hears registered/refused/offline/duplicate/menu."""

    def __init__(self, indexes, owners, scheduler, hub):
        self.slots = [Slot(i) for i in indexes]
        self._by = {}
        for s in self.slots:
            self._by[s.index] = s
        self.owners = owners
        self.scheduler = scheduler
        self.hub = hub
        self._seq = 0
        self._seen = []  # module ids registered at least once (for "again")
        self.stray_events = 0
        # the routes a Port takes while its organ is registered (Port.routes), one tuple
        self._routes = (scheduler.on_resp, self._event)
        # port number -> (capability names, command.name_table of them) of the organ
        # registered there (its EVENT names are found in it; kept here, not in the Slot: one
        # more Slot attribute would grow every Slot's attribute table)
        self._names = {}

    def slot(self, index):
        return self._by[index]

    def boot(self, port, now):
        """The menu in RAM is empty at boot: the DISCOVER the port sends."""
        return self._discover(self._by[port.index], now)

    def frame(self, port, ftype, payload, n, now):
        """A legal frame from `port` (the decoder's fixed payload view, valid during the call);
        returns the frame the port answers with, or None."""
        s = self._by[port.index]
        if ftype == _HEARTBEAT:
            if not s.online:
                return self._maybe_discover(s, now)
        elif ftype == _DESCRIPTOR:
            return self._descriptor(s, port, payload, n, now)
        elif not s.online:
            return self._maybe_discover(s, now)
        elif ftype == _COMMAND_RESP:
            if n == 1:
                self.scheduler.on_resp(port, payload[0], now)
            else:
                s.bad_payloads += 1
        elif ftype == _EVENT:
            self._event(port, payload, n, now)
        return None

    def poll(self, now):
        """The offline rule (an online organ silent OFFLINE_MS goes offline; its port's last
        heard is read, never touched); returns ms until it is next due."""
        wait = _FAR_MS
        for s in self.slots:
            if s.online:
                left = OFFLINE_MS - ticks_diff(now, s.port.last_rx)
                if left <= 0:
                    self._offline(s, now)
                elif left < wait:
                    wait = left
        return wait

    # -- lifecycle ------------------------------------------------------------------------

    def _discover(self, s, now):
        s.last_discover = now
        s.discovers += 1
        return frame.DISCOVER_FRAME

    def _maybe_discover(self, s, now):
        # a legal frame from a port with no registered organ: DISCOVER, at most once per 2 s
        if s.last_discover is None or ticks_diff(now, s.last_discover) >= DISCOVER_MS:
            return self._discover(s, now)
        return None

    def _descriptor(self, s, port, payload, n, now):
        s.descriptors += 1
        if s.online and s.same_descriptor(payload, n):
            s.acks += 1
            return frame.ACK_FRAME
        try:
            d = decode_descriptor(payload, n)
        except DescriptorError as e:
            reason = e.args[0] if e.args else "invalid descriptor"
            if s.refuse(reason, now):
                self.hub.publish("refused", s.index, reason)
            if s.online:
                # the organ now describes itself invalidly: nothing it offered can be trusted
                self._offline(s, now)
            return None
        s.again = d["module_id"] in self._seen
        if not s.again:
            self._seen.append(d["module_id"])
        s.raw[0:n] = payload[0:n]
        s.raw_n = n
        s.organ = d
        s.port = port
        names = tuple([c["name"] for c in d["capabilities"]])
        self._names[s.index] = (names, command.name_table(names))
        port.routes = self._routes
        if not s.online:
            self._seq += 1
            s.seq = self._seq
        s.online = True
        s.acks += 1
        self.hub.publish("registered", s.index, s)
        self._update()
        return frame.ACK_FRAME

    def _offline(self, s, now):
        s.online = False
        s.port.routes = None
        self.hub.publish("offline", s.index, s)
        self._update()
        self.scheduler.on_offline(s.port, now)

    def _update(self):
        online = sorted([s for s in self.slots if s.online], key=_seq)
        for s in self.slots:
            if not s.online:
                s.owned = []
                s.duplicates = []
        added, removed = self.owners.update(online)
        for s in online:
            for name in s.new_duplicates:
                self.hub.publish("duplicate", s.index, (s.organ["module_id"], name))
        self.hub.publish("menu", None, (self.owners.version, added, removed))

    # An EVENT from a registered organ: command.decode_event's rules read in place (kind, str8
    # name, status). A name the organ declared is found in its name table and is that str
    # (nothing made); another is made from the view (`_made`: the UTF-8 check is the
    # interpreter's own). The Slot only on the error paths. Then the hub's own part of an
    # "event" publish (master/bus/hub.py), inline: the ring keeps and counts it (the hub counts it
    # without one); whoever else hears "event" (an /events stream) is called as a publish
    # would. The reader is viper (one per continuous step on the scheduler's hot path: no
    # bytecode frame, and command.find_name_at's search inline, not a call); on CPython the
    # same lines run as Python (the shim's ptr8 is the buffer itself).
    @micropython.viper
    def _event(self, port, payload, n: int, now):
        index = port.index
        p = ptr8(payload)
        k = int(p[1])
        if n < 3 or k + 3 != n:
            self._bad(index)
            return
        names = self._names[index]  # there while the organ is registered (routes are)
        t = ptr8(names[1])
        i = -1
        idx = 0
        q = 0
        while True:  # find_name_at(payload, 1, n - 1, names[1])
            m = int(t[q])
            if m == 0:
                break
            if m == k:
                j = 0
                while j < k and p[2 + j] == t[q + 1 + j]:
                    j += 1
                if j == k:
                    i = idx
                    break
            q += m + 1
            idx += 1
        if i >= 0:
            name = names[0][i]
        else:
            name = self._made(payload, n, index)
            if name is _NONE:
                return
        status = int(p[n - 1])
        if int(p[0]) != _EVENT_DONE:
            self.stray_events += _ONE
            return
        hub = self.hub
        ring = hub.ring
        if ring is _NONE:
            hub._events += _ONE
        else:
            ring.organ_event(index, name, status, now)
        if hub.wants["event"]:
            _others(hub, hub._to["event"], index, name, status)
        if not self.scheduler.on_event(port, name, status, now):
            self.stray_events += _ONE

    def _bad(self, index):
        self._by[index].bad_payloads += 1

    def _made(self, payload, n, index):
        # an EVENT name the organ did not declare, made from the view; None when not UTF-8
        try:
            return str(payload[2 : n - 1], "utf-8")
        except ValueError:  # UnicodeError (MicroPython), UnicodeDecodeError (CPython)
            self._bad(index)
            return None

    # -- queries --------------------------------------------------------------------------

    def online(self):
        """The online slots in registration order."""
        return sorted([s for s in self.slots if s.online], key=_seq)


def _others(hub, fns, index, name, status):
    # the "event" subscribers besides the hub's own count and ring, as hub.publish calls them
    data = (name, status)
    for fn in fns:
        try:
            fn("event", index, data)
        except Exception as e:  # a subscriber never raises into the bus
            hub.failed(e)


def _seq(s):
    return s.seq
