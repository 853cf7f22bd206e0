# Organ runtime: section-7 lifecycle and COMMAND dispatch (sans-IO), and its asyncio edge on one UART.
import micropython
from micropython import const

from organbus import frame
from organbus import log as eventlog
from organbus.command import (
    CommandError,
    clamp_text,
    clamp_value,
    decode_command,
    encode_event,
    find_name_at,
    name_table,
)
from organbus.descriptor import DescriptorError, encode_descriptor, validate_descriptor
from organbus.rxscan import TAKE as _TAKE
from organbus.rxscan import run as _scan
from organbus.ticks import ticks_add, ticks_diff, ticks_ms

BOOT_WAIT_MS = const(1000)
ANNOUNCE_MS = const(2000)
HEARTBEAT_MS = const(1000)
REDESCRIBE_MS = const(5000)
_IDLE_MS = const(50)  # frame.IDLE_MS: an incomplete candidate is abandoned after this quiet time

# Lifecycle states.
STOPPED = const(0)  # not started, or refused its own descriptor
ANNOUNCING = const(1)  # DESCRIPTOR every 2 s (the first 1 s after boot) until ACK or COMMAND
REGISTERED = const(2)  # HEARTBEAT every 1 s, DESCRIPTOR every 5 s

# frame types folded into the bytecode, the steady state's frames one global each (frame.X is
# two lookups: ~250 RV32 instructions a time on the COMMAND path)
_ACK = const(0x02)
_DISCOVER = const(0x04)
_COMMAND = const(0x10)
assert (_ACK, _DISCOVER, _COMMAND) == (frame.ACK, frame.DISCOVER, frame.COMMAND)
_RESP_OK = frame.RESP_OK_FRAME
_RESP_FAIL = frame.RESP_FAIL_FRAME
_HEARTBEAT_FRAME = frame.HEARTBEAT_FRAME

_OUT_SLOTS = const(16)
_CLOCK_MS = const(10)  # longest sleep of the timer task (new deadlines appear on commands)
_EMPTY = ()


class OrganError(ValueError):
    pass


_line = eventlog.line


def _advance(deadline, period, now):
    # Keep the cadence exact; after a stall, re-anchor instead of sending a burst.
    nxt = ticks_add(deadline, period)
    if ticks_diff(nxt, now) <= 0:
        nxt = ticks_add(now, period)
    return nxt


class Organ:
    """One organ's protocol side: feed it bytes and times, take prebuilt frames out.

    descriptor: the section-4 dict this organ declares (validated at start);
    handlers: {capability name: handler(values, text, now) -> 0 or 1}, where `values` is a
    reused list of the clamped numbers in descriptor order and `text` the truncated str or None;
    poll: optional timer of the abilities, poll(now) -> ms until it is next due (the contract of
    Organ.poll and of the master's timers), e.g. a blink's next phase;
    log: writes each lifecycle event line, built by organbus.log.line (default: organbus.log's
    own writer). The lines of the steady state are built once at start.

    A continuous ability answers 0 when it starts and later calls finish(name, status).
    Every outgoing frame is a bytes object built once at start, queued by reference, so the
    steady state (heartbeats, ACKs, command round trips without params) allocates nothing.
    """

    def __init__(self, descriptor, handlers, poll=None, log=eventlog.write):
        self.descriptor = descriptor
        self.state = STOPPED
        self.refusal = None
        self.dropped = 0  # frames lost because the output queue was full
        self.ignored = 0  # legal frames of a type an organ does not take (DESCRIPTOR, EVENT, ...)
        self.commands = 0
        self.refused = 0
        self._log = log
        self._poll = poll
        self._out = [None] * _OUT_SLOTS
        self._out_head = 0
        self._out_n = 0
        self._next_desc = 0
        self._next_hb = 0
        self._decoder = frame.Decoder(self._on_frame)
        self._held = 0  # bytes the decoder holds in an incomplete frame
        self.on_output = None  # called when a frame is queued (the edge wakes its writer)
        self._now = 0
        try:
            self._build(descriptor, handlers)
        except (DescriptorError, OrganError, KeyError, TypeError, ValueError) as e:
            self.refusal = "%s: %s" % (type(e).__name__, e)

    def _build(self, d, handlers):
        validate_descriptor(d)
        caps = d["capabilities"]
        names = [c["name"] for c in caps]
        for name in names:
            if name not in handlers:
                raise OrganError("capability %r is declared but has no handler" % name)
        for name in handlers:
            if name not in names:
                raise OrganError("handler %r is not declared in the descriptor" % name)
        payload = encode_descriptor(d)
        if len(payload) > frame.MAX_LEN:
            raise OrganError("descriptor of %d bytes exceeds LEN 512" % len(payload))
        self.descriptor_frame = frame.encode(frame.DESCRIPTOR, payload)
        self._names = names
        self._name_table = name_table(names)
        self._name_bytes = [n.encode("utf-8") for n in names]
        self._caps = caps
        self._handlers = [handlers[n] for n in names]
        self._nums = [[p for p in c["params"] if p["type"] != "string"] for c in caps]
        self._texts = [
            (c["params"][-1] if c["params"] and c["params"][-1]["type"] == "string" else None)
            for c in caps
        ]
        self._values = [[0] * len(p) for p in self._nums]
        # a COMMAND's length for an ability without params (its name alone), else 0
        self._fixed = [
            0 if self._nums[i] or self._texts[i] is not None else 1 + len(b)
            for i, b in enumerate(self._name_bytes)
        ]
        self._events = []
        self._lines = []
        for c in caps:
            name = c["name"]
            if c["exec_type"] == "immediate":
                self._events.append(None)
            else:
                self._events.append(
                    (
                        frame.encode(frame.EVENT, encode_event(name, 0)),
                        frame.encode(frame.EVENT, encode_event(name, 1)),
                    )
                )
            self._lines.append(
                (
                    _line("command", (("name", name), ("status", 0))),
                    _line(
                        "command",
                        (("name", name), ("reason", "the ability refused"), ("status", 1)),
                    ),
                    _line("done", (("name", name), ("status", 0))),
                    _line("done", (("name", name), ("status", 1))),
                )
            )
        self._ack_line = _line("ack")
        self._discover_line = _line("discover")

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, now):
        """Boot at `now` (ms ticks). False, with a `refused` event, when the contract is invalid."""
        if self.refusal is not None:
            self._log(_line("refused", (("reason", self.refusal),)))
            return False
        self._log(_line("boot", (("module_id", self.descriptor["module_id"]),)))
        self.state = ANNOUNCING
        self._now = now
        self._next_desc = ticks_add(now, BOOT_WAIT_MS)
        return True

    def _register(self, now):
        self.state = REGISTERED
        self._next_hb = ticks_add(now, HEARTBEAT_MS)
        self._next_desc = ticks_add(now, REDESCRIBE_MS)

    # native on MicroPython, as `feed` and `_on_frame` (one call per writer step; on CPython
    # the host shim's decorator leaves it as it is)
    @micropython.native
    def poll(self, now):
        """Timers: cadence, decoder idle, the abilities' poll. Returns ms until it is next due."""
        state = self.state
        if state == STOPPED:
            return REDESCRIBE_MS
        self._now = now
        held = self._held
        if held:  # (with nothing pending no time rule applies: the decoder's call is saved)
            held = self._held = self._decoder.idle(now)
        registered = state == REGISTERED
        hb = self._next_hb
        if registered and ticks_diff(now, hb) >= 0:
            self._queue(_HEARTBEAT_FRAME)
            hb = self._next_hb = _advance(hb, HEARTBEAT_MS, now)
        desc = self._next_desc
        if ticks_diff(now, desc) >= 0:
            self._queue(self.descriptor_frame)
            period = REDESCRIBE_MS if registered else ANNOUNCE_MS
            desc = self._next_desc = _advance(desc, period, now)
        wait = ticks_diff(desc, now)
        if registered:
            hb = ticks_diff(hb, now)
            if hb < wait:
                wait = hb
        abilities = self._poll
        if abilities is not None:
            t = abilities(now)
            if t < wait:
                wait = t
        if held and wait > _IDLE_MS:
            wait = _IDLE_MS
        return wait

    # -- input -------------------------------------------------------------------------------

    # native code on MicroPython (as master/bus/port.py's feed; on CPython the host shim's
    # decorator leaves it as it is): the reader's every read, ~1,700 RV32 instructions less
    @micropython.native
    def feed(self, data, now, n=-1):
        """Bytes from the link (data[:n]), arrived at `now`."""
        if self.state == STOPPED:
            return
        self._now = now
        self._held = 1  # (until the decoder says how many bytes it holds)
        # Decoder.feed's body, one call level less on every read (as master/bus/port.py's feed)
        if n < 0:
            n = len(data)
        d = self._decoder
        try:
            self._held = _scan(d.on_frame, d.payload, d._mem, data, n, now, _TAKE)
        except Exception as e:
            d._resume(e, data, n)

    def counters(self):
        c = self._decoder.counters()
        c["dropped"] = self.dropped
        c["ignored"] = self.ignored
        c["commands"] = self.commands
        c["refused"] = self.refused
        return c

    @micropython.native
    def _on_frame(self, ftype, payload, n):
        now = self._now
        if ftype != _COMMAND:
            return self._lifecycle(ftype, n, now)
        if self.state != REGISTERED:
            self._register(now)  # a master that commands us knows us: stop announcing
        # the COMMAND (one call less on the hot path: its dispatch is here)
        self.commands += 1
        ci = self._find(payload, n)
        if ci < 0:
            return self._refuse(payload, n, "unknown capability name")
        # The name matched: the rest must be exactly this capability's params.
        fixed = self._fixed[ci]
        if fixed:
            if n != fixed:
                return self._refuse(payload, n, "payload of %d bytes, expected %d" % (n, fixed))
            values = _EMPTY
            text = None
        else:
            try:
                values, text = self._decode(ci, payload, n)
            except CommandError as e:
                return self._refuse(payload, n, str(e))
        try:
            status = self._handlers[ci](values, text, now)
        except Exception as e:  # hardware refused: the answer is 1, and the log says why
            return self._refuse(payload, n, "%s: %s" % (type(e).__name__, e))
        if status:
            self.refused += 1
            self._queue(_RESP_FAIL)
            self._log(self._lines[ci][1])
        else:
            self._queue(_RESP_OK)
            self._log(self._lines[ci][0])

    def _lifecycle(self, ftype, n, now):
        if n:
            self.ignored += 1  # ACK and DISCOVER carry nothing: a payload makes it not one
        elif ftype == _ACK:
            if self.state != REGISTERED:
                self._register(now)
                self._log(self._ack_line)
        elif ftype == _DISCOVER:
            self._queue(self.descriptor_frame)
            self.state = ANNOUNCING
            self._next_desc = ticks_add(now, ANNOUNCE_MS)
            self._log(self._discover_line)
        else:
            self.ignored += 1

    # -- dispatch ----------------------------------------------------------------------------

    def _find(self, payload, n):
        # The capability the COMMAND names (its index), or -1.
        return find_name_at(payload, 0, n, self._name_table)

    def _decode(self, ci, payload, n):
        raw, text = decode_command(payload, n, self._caps[ci])
        values = self._values[ci]
        nums = self._nums[ci]
        for i in range(len(nums)):
            values[i] = clamp_value(nums[i], raw[i])
        tp = self._texts[ci]
        if tp is not None:
            text = clamp_text(tp, text)
            k = len(text.encode("utf-8"))
            if k < tp["min"]:
                raise CommandError("text: %d bytes, at least %d required" % (k, tp["min"]))
        return values, text

    def _refuse(self, payload, n, reason):
        self.refused += 1
        self._queue(_RESP_FAIL)
        try:
            name = str(bytes(payload[1 : 1 + min(payload[0], n - 1)]), "utf-8") if n else ""
        except Exception:
            name = repr(bytes(payload[1 : 1 + min(payload[0], n - 1)]))
        self._log(_line("command", (("name", name), ("reason", reason), ("status", 1))))

    def finish(self, name, status):
        """A continuous ability ended: EVENT done with status 0 (completed) or 1 (stopped/failed)."""
        if name not in self._names:
            raise OrganError("%r is not a capability of this organ" % name)
        ci = self._names.index(name)
        ev = self._events[ci]
        if ev is None:
            raise OrganError("%r is immediate: it sends no EVENT" % name)
        status = 1 if status else 0
        self._queue(ev[status])
        self._log(self._lines[ci][2 + status])

    # -- output ------------------------------------------------------------------------------

    def _queue(self, f):
        n = self._out_n
        if n >= _OUT_SLOTS:
            self.dropped += 1
            return
        i = self._out_head + n
        if i >= _OUT_SLOTS:
            i -= _OUT_SLOTS
        self._out[i] = f
        self._out_n = n + 1
        wake = self.on_output
        if wake is not None:
            wake()

    def pending(self):
        """How many frames wait to be written."""
        return self._out_n

    def pop(self):
        """The next frame to write (a bytes object), or None."""
        n = self._out_n
        if not n:
            return None
        out = self._out
        h = self._out_head
        f = out[h]
        out[h] = None
        h += 1
        self._out_head = 0 if h >= _OUT_SLOTS else h
        self._out_n = n - 1
        return f


# -- asyncio edge ------------------------------------------------------------------------------

try:
    import asyncio

    _sleep_ms = asyncio.sleep_ms  # MicroPython: a singleton generator, no allocation
except AttributeError:  # CPython

    def _sleep_ms(ms):
        return asyncio.sleep(ms / 1000)


class Link:
    """The organ on one UART: one reader task and one writer task (and, waiting on IO, a clock).

    poll_ms = 0 (default): the reader sleeps in asyncio's IO wait until bytes arrive; a clock
    task keeps the timers (at most _CLOCK_MS apart). No idle polling and no added latency;
    asyncio's IO wait allocates a little on each wake (its poller registration and the wait's
    generator), our own steps allocate nothing.
    poll_ms > 0: both tasks poll the UART (timeout=0) and sleep with asyncio.sleep_ms, a
    singleton generator: nothing at all is allocated in steady state (proved under heap_lock).
    Either way a frame goes into the UART driver the moment the organ queues it (`flush`, a
    plain non-blocking write of the prebuilt frame, in whichever task queued it): a COMMAND_RESP
    leaves in the same reader step that decoded its COMMAND, before the event line is printed.
    The writer task only finishes what the driver did not take, in order.
    """

    def __init__(self, organ, uart, rxbuf=256, poll_ms=0, clock=ticks_ms, sleep_ms=_sleep_ms):
        self.organ = organ
        self.uart = uart
        self.poll_ms = poll_ms
        self.clock = clock
        self.sleep_ms = sleep_ms  # asyncio's; a test on a fake clock gives a yield instead
        self._rx = bytearray(rxbuf)
        self._partial = None  # (frame, offset) when the UART took only part of a frame
        self._wake = None if poll_ms else asyncio.Event()
        # RESPs, heartbeats and EVENTs (audio task) go out at once; polling, no writer waits
        organ.on_output = self.flush if poll_ms else self._output
        self.written = 0

    def _output(self):
        # A frame was queued: straight into the UART driver; the writer takes any remainder.
        self.flush()
        if self._partial is not None and self._wake is not None:
            self._wake.set()

    def read_once(self, now, n=-1):
        """One reader step: takes what the UART holds (or n bytes already in the buffer)."""
        rx = self._rx
        if n < 0:
            n = self.uart.readinto(rx)
        if not n:
            return 0
        self.organ.feed(rx, now, n)
        return n

    def drain(self, now):
        """Feed whatever the UART holds, so the timers' quiet-line rule never judges a line
        whose bytes are only waiting for a reader that was held up."""
        while self.read_once(now):
            pass

    def write_once(self, now):
        """One writer step: timers, then every queued frame. Returns ms until the next timer."""
        while self.read_once(now):  # drain(now)
            pass
        wait = self.organ.poll(now)
        self.flush()
        return wait

    @micropython.native  # (as Organ.poll: twice per command round trip)
    def flush(self):
        uart = self.uart
        organ = self.organ
        while True:
            if self._partial is not None:
                f, off = self._partial
                w = uart.write(memoryview(f)[off:])
                off += w or 0
                if off < len(f):
                    self._partial = (f, off)
                    return
                self._partial = None
                self.written += 1
            while True:
                if not organ._out_n:  # (what pop() would say with None, without its call)
                    return
                f = organ.pop()
                w = uart.write(f)
                if w != len(f):  # (None: the driver took nothing)
                    self._partial = (f, w or 0)
                    break
                self.written += 1

    async def reader(self):
        clock = self.clock
        sleep_ms = self.sleep_ms
        if self.poll_ms:
            while True:
                n = self.read_once(clock())
                await sleep_ms(0 if n else self.poll_ms)
        sr = asyncio.StreamReader(self.uart)
        rx = self._rx
        while True:
            n = await sr.readinto(rx)
            self.read_once(clock(), n or 0)

    async def writer(self):
        sleep_ms = self.sleep_ms
        if self.poll_ms:
            clock = self.clock
            while True:
                wait = self.write_once(clock())
                await sleep_ms(wait if wait < self.poll_ms else self.poll_ms)
        wake = self._wake
        while True:
            await wake.wait()
            wake.clear()
            self.flush()
            if self._partial is not None:
                await sleep_ms(1)
                wake.set()

    async def timers(self):
        """IO-wait mode only: the lifecycle and ability timers, waking the writer for output."""
        clock = self.clock
        sleep_ms = self.sleep_ms
        while True:
            now = clock()
            self.drain(now)
            wait = self.organ.poll(now)
            await sleep_ms(wait if wait < _CLOCK_MS else _CLOCK_MS)


def run(organ, uart, tasks=(), poll_ms=0, clock=ticks_ms):
    """Start the organ on `uart` and run it forever with any extra coroutines (e.g. audio).

    Returns False at once, having logged why, when the organ's own descriptor is invalid;
    raises what ended any of the tasks.
    """
    if not organ.start(clock()):
        return False
    link = Link(organ, uart, poll_ms=poll_ms, clock=clock)

    async def main():
        # Any task that dies ends the run (and the board resets): never a deaf or mute organ.
        parts = [link.reader(), link.writer()] + list(tasks)
        if not poll_ms:
            parts.append(link.timers())
        await asyncio.gather(*parts)

    asyncio.run(main())
    return True
