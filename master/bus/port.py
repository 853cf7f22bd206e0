# One organ port's protocol object: its decoder, counters, last heard, and the frames it sends.
#
# Bytes come in (`feed`, from the port's UART reader); every legal frame keeps the port heard
# and goes up to the organ registry (`organs.frame(port, ftype, payload, n, now)`), which
# returns the lifecycle frame to answer with (ACK, DISCOVER) or None; the port sends it.
# While an organ is registered here the registry gives the port its routes (`routes`, the
# registry's one tuple): a COMMAND_RESP then goes straight to the scheduler and an EVENT to the
# registry's reader, and a HEARTBEAT needs nothing more than the port's own last heard.
# Frames go out through `send` and `command` (a COMMAND, from the scheduler: a COMMAND_RESP
# is due, so the UART edge's reader waits for it in the poller). The heartbeat path (decoder -> _frame -> organs.frame) allocates
# nothing. `poll(now) -> ms` runs the port's time rules: the decoder's quiet-line rule, the
# COMMAND_RESP gear, and a "decoder" hub event when an error counter moved.
import micropython
from micropython import const

from organbus import frame
from organbus.rxscan import TAKE as _TAKE
from organbus.rxscan import run as _scan
from organbus.ticks import ticks_diff

_NONE = None  # (viper compares an object with None through a name)
RESP_TIMEOUT_MS = const(1000)  # section 5: a COMMAND_RESP comes within this or never
_IDLE_MS = const(20)  # a pending candidate needs the quiet-line rule this soon (50 ms rule)
_QUIET_MS = const(1000)  # nothing pending: the port's next own deadline is at most this far
_HEARTBEAT = const(0x03)  # frame types folded into the bytecode
_COMMAND_RESP = const(0x11)
_EVENT = const(0x20)
assert (_HEARTBEAT, _COMMAND_RESP, _EVENT) == (frame.HEARTBEAT, frame.COMMAND_RESP, frame.EVENT)


class Port:
    """Organ port `index`: `tx` takes frames (`send(frame)`, `command(frame)`: the UART edge),
    `organs` gets the frames (the registry), `hub` hears of decoder errors. `tx.unread()`
    says whether received bytes wait for the reader: the quiet-line rule then waits too."""

    def __init__(self, index, tx, organs, hub):
        self.index = index
        self.tx = tx
        self.organs = organs
        self.hub = hub
        self.decoder = frame.Decoder(self._frame)
        # Set by the registry while an organ is registered on this port, else None: the tuple
        # (resp_to, event_to): resp_to(port, status, now) takes a one-byte COMMAND_RESP (the
        # scheduler's on_resp), event_to(port, payload, n, now) an EVENT (the registry's
        # reader). One attribute, shared by the ports: a Port stays at 12 attributes, the
        # size of an instance's first attribute table.
        self.routes = None
        self.now = 0  # tick of the bytes being fed
        self.last_rx = None  # last heard: tick of the last legal frame, None before the first
        self.resp_due = False  # a COMMAND went out and its COMMAND_RESP has not come
        self.t_command = 0
        self.sent = 0  # frames handed to tx
        self._errors = 0  # the decoder's error counters, summed, when last published

    # The receive path up to a route, per read: `feed` and `_frame` are machine code on
    # MicroPython (`feed` native, `_frame` viper: the same object operations without the
    # bytecode loop, and a viper callee costs the decoder's scan no bytecode frame): a
    # frame's bytes to its route took ~10,600 RV32 instructions as bytecode, ~5,400 so. And
    # `command`, once per step, native (~270 less). On CPython the decorators are the host
    # shim's (tools/shim/micropython.py: the function as it is), so one definition serves
    # both.
    @micropython.native
    def feed(self, data, now, n=-1):
        """Bytes read from the UART at tick `now` (data[:n], all when n < 0)."""
        self.now = now
        # Decoder.feed's body, one call level less on every read
        if n < 0:
            n = len(data)
        d = self.decoder
        try:
            _scan(d.on_frame, d.payload, d._mem, data, n, now, _TAKE)
        except Exception as e:
            d._resume(e, data, n)

    @micropython.viper
    def _frame(self, ftype: int, payload, n: int):
        # (viper: `routes` is None or the routes tuple, so its truth says which; an object
        # is compared with None through _NONE)
        now = self.now
        self.last_rx = now
        routes = self.routes
        if ftype == _COMMAND_RESP:
            self.resp_due = False
            if n == 1 and routes:
                routes[0](self, payload[0], now)
                return
        elif ftype == _EVENT:
            if routes:
                routes[1](self, payload, n, now)
                return
        elif ftype == _HEARTBEAT and routes:
            return  # a registered organ's heartbeat: heard, nothing to answer
        reply = self.organs.frame(self, ftype, payload, n, now)
        if reply is not _NONE:
            self.send(reply)

    @micropython.native
    def command(self, f, now):
        """Send a COMMAND frame: its COMMAND_RESP is due within RESP_TIMEOUT_MS."""
        self.resp_due = True
        self.t_command = now
        self.sent += 1
        self.tx.command(f)

    def start(self, now):
        """Boot: the port says DISCOVER (the registry counts it)."""
        self.send(self.organs.boot(self, now))

    def send(self, f):
        self.sent += 1
        self.tx.send(f)

    def error_count(self):
        d = self.decoder
        return d.junk + d.crc_errors + d.bad_version + d.oversize + d.bad_eof + d.abandoned

    def poll(self, now):
        """Time rules of this port; returns ms until it wants the next poll."""
        self.now = now
        d = self.decoder
        if not self.tx.unread():
            d.idle(now)  # a quiet line is only what an empty UART shows (docs/DESIGN.md)
        if self.resp_due and ticks_diff(now, self.t_command) >= RESP_TIMEOUT_MS:
            self.resp_due = False  # the scheduler reports the timeout; the reader idles again
        e = self.error_count()
        if e != self._errors:
            self._errors = e
            self.hub.publish("decoder", self.index, d)
        return _IDLE_MS if d.pending() else _QUIET_MS
