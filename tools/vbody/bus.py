# The paced, faulty bus of the virtual body: UART cables between board processes as loopback TCP.
#
# A Cable joins two Ends. Each End is a loopback TCP address: `listen` (the cable waits for a
# board or an external implementation to connect, and takes it back after a disconnect) or
# `connect` (the cable dials out and redials). Each direction of a cable is a Wire that delivers
# bytes in order at 115200 8N1 (10 bits per byte: 86.8 us, 11,520 B/s), never earlier than the
# last bit of a byte would arrive on copper (less WAKE_LEAD_S, the OS's timer latency that the
# pacer aims ahead by, so bytes land on time rather than ~0.1 ms late; the rate over any
# stretch longer than a byte is never exceeded), and can be told to misbehave: junk bytes, bit flips
# and drops at a rate, writes split by a pause, a pulled cable. Every fault is counted.
#
# Threads, not asyncio: a pacer sleeps on a condition variable until the next byte is due, so
# delivery is within ~0.1 ms of wire time without polling.
import collections
import random
import socket
import threading
import time

from cablespec import BYTE_S, Pacer, parse_spec  # noqa: F401  (bus.parse_spec: the one parser)

# A board's reader gets bytes as the ESP-IDF UART driver moves them out of the RX FIFO: when
# 120 bytes are in (its default full threshold) or the line goes idle. So a write of up to 120
# bytes (most frames) is handed over whole when its last byte is in, longer ones 120 bytes
# (10.4 ms) at a time. A frame that arrives in one piece cannot be torn apart by a busy machine
# (a pacer or a reader descheduled for 50 ms mid-frame would make the receiver abandon it).
WHOLE_WRITE_BYTES = 120
DELIVER_MAX_BYTES = 120
WAKE_LEAD_S = 0.0001  # aim wake-ups this early: the OS adds ~0.1 ms to every timed sleep
FIRST_ATTACH_S = 2.0  # bytes for a hold_first end never attached yet wait up to this long
STALL_S = 0.02  # a hand-over this late after its bytes were due counts as a stall
SWITCH_INTERVAL_S = 0.0005  # GIL hand-over: a woken pacer must not wait 5 ms for another thread


def tune_threads():
    """Call once in a process that runs cables: shortens CPython's GIL switch interval."""
    import sys

    if sys.getswitchinterval() > SWITCH_INTERVAL_S:
        sys.setswitchinterval(SWITCH_INTERVAL_S)


class Wire:
    """One direction of a cable: paced, ordered, with fault injection and counters."""

    def __init__(self, cable, name, seed=None):
        self.cable = cable
        self.name = name
        self.dst = None  # the End bytes are delivered to
        self.rng = random.Random(seed)
        self.cond = threading.Condition()
        # [start_time, bytearray, gap]: byte k ends at start+(k+1)*B; gap > 0 (the second piece of
        # a split write) also keeps it that long after the previous hand-over, however late that was
        self.queue = collections.deque()
        self.last_out = 0.0  # when the pacer last handed bytes over
        self.pacer = Pacer(BYTE_S)
        self.flip_rate = 0.0
        self.drop_rate = 0.0
        self.split = False
        self.split_gap_s = 0.005
        self.taps = []  # callables(t, bytes) seeing what the sender wrote, before faults
        self.delivered_taps = []  # callables(t, bytes) seeing what the receiver got
        self.counters = dict(
            sent=0,
            delivered=0,
            flipped=0,
            dropped=0,
            junk=0,
            splits=0,
            unplugged=0,
            no_receiver=0,
            stalls=0,
        )
        self.late_max = 0.0  # the latest hand-over (after it was due), seconds
        self.count_lock = threading.Lock()
        self.closed = False
        self.thread = threading.Thread(target=self._pace, name="wire-" + name, daemon=True)
        self.thread.start()

    def push(self, data, now=None, junk=False):
        now = time.monotonic() if now is None else now
        if not junk:
            self.count("sent", len(data))
            for tap in self.taps:
                tap(now, bytes(data))
        if not self.cable.plugged:
            self.count("unplugged", len(data))
            return
        buf = bytearray(data)
        if junk:
            self.count("junk", len(buf))
        elif self.drop_rate or self.flip_rate:
            out = bytearray()
            rnd = self.rng.random
            for b in buf:
                if self.drop_rate and rnd() < self.drop_rate:
                    self.count("dropped", 1)
                    continue
                if self.flip_rate:
                    # each of the 8 data bits flips with probability flip_rate
                    for bit in range(8):
                        if rnd() < self.flip_rate:
                            b ^= 1 << bit
                            self.count("flipped", 1)
                out.append(b)
            buf = out
        if not buf:
            return
        with self.cond:
            pieces = [buf]
            if self.split and len(buf) > 1 and not junk:
                cut = self.rng.randrange(1, len(buf))
                pieces = [buf[:cut], buf[cut:]]
                self.count("splits", 1)
            for i, piece in enumerate(pieces):
                start = self.pacer.start(now)
                if i:
                    start += self.split_gap_s
                self.queue.append([start, piece, self.split_gap_s if i else 0.0])
                self.pacer.sent(start, len(piece))
            self.cond.notify()

    def junk(self, n):
        self.push(bytes(self.rng.randrange(256) for _ in range(n)), junk=True)

    def clear(self):
        """Drop what is in flight (a pulled cable)."""
        with self.cond:
            n = sum(len(e[1]) for e in self.queue)
            self.count("unplugged", n)
            self.queue.clear()
            self.pacer.t_free = 0.0

    def busy_until(self):
        with self.cond:
            return self.pacer.t_free

    def close(self):
        with self.cond:
            self.closed = True
            self.cond.notify()

    def _pace(self):
        while True:
            with self.cond:
                while not self.queue and not self.closed:
                    self.cond.wait()
                if self.closed:
                    return
                start, data, gap = self.queue[0]
                if gap:  # a split write's pause holds even when the first piece went out late
                    start = max(start, self.last_out + gap)
                    self.queue[0][0], self.queue[0][2] = start, 0.0
                now = time.monotonic() + WAKE_LEAD_S
                due = int((now - start) / BYTE_S + 1e-9)
                want = len(data) if len(data) <= WHOLE_WRITE_BYTES else DELIVER_MAX_BYTES
                if due < want:
                    # sleep until a whole (short) write or ~1 ms of a long one has arrived
                    self.cond.wait(start + want * BYTE_S - now)
                    continue
                k = min(due, len(data))
                t_due = start + want * BYTE_S  # when this hand-over was due
                out = bytes(data[:k])
                if k == len(data):
                    self.queue.popleft()
                else:
                    del data[:k]
                    self.queue[0][0] = start + k * BYTE_S
            self._deliver(out)
            self.last_out = time.monotonic()
            late = self.last_out - t_due
            if late > self.late_max:
                self.late_max = late
            if late > STALL_S:
                self.count("stalls", 1)

    def count(self, key, n):
        """Counters change from several threads (an End's reader, the pacer, the console)."""
        with self.count_lock:
            self.counters[key] += n

    def snapshot(self):
        with self.count_lock:
            return dict(self.counters)

    def _deliver(self, out):
        n = len(out)
        if not self.cable.plugged:
            self.count("unplugged", n)
            return
        # counted before the hand-over: a receiver that has the bytes must never read a
        # `delivered` count without them (it is taken back below if the receiver is gone)
        self.count("delivered", n)
        if self.dst is not None:
            self.dst.wait_first_attach()
        if self.dst is None or not self.dst.send(out):
            with self.count_lock:
                self.counters["delivered"] -= n
                self.counters["no_receiver"] += n
            return
        if self.delivered_taps:
            now = time.monotonic()
            for tap in self.delivered_taps:
                tap(now, out)


class End:
    """One end of a cable: a loopback TCP address where a board (or anything else) attaches."""

    def __init__(self, spec, name, hold_first=False):
        self.name = name
        self.hold_first = hold_first  # an end joining another simulator: see wait_first_attach
        self.mode, self.host, self.port = parse_spec(spec, name)
        self.sock = None
        self.lock = threading.Lock()
        self.wire_in = None  # Wire that carries the bytes this end sends
        self.connected = threading.Event()
        self.attachments = 0
        self.closed = False
        self.lsock = None
        self.held_since = None  # when bytes first waited for the first connection
        if self.mode == "listen":
            ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                ls.bind((self.host, self.port))
            except OSError as e:
                ls.close()
                raise OSError(
                    e.errno,
                    "%s: cannot listen on %s:%d: %s (another simulator or program has it?)"
                    % (name, self.host, self.port, e.strerror),
                ) from None
            ls.listen(4)
            self.lsock = ls
            self.port = ls.getsockname()[1]

    @property
    def spec(self):
        return "%s:%s:%d" % (self.mode, self.host, self.port)

    @property
    def peer_spec(self):
        """What the other party uses to reach this end (a board's simulated UART, see
        tools/vbody/launch.py)."""
        return "%s:%s:%d" % ("connect" if self.mode == "listen" else "listen", self.host, self.port)

    def start(self):
        threading.Thread(target=self._run, name="end-" + self.name, daemon=True).start()

    def _run(self):
        while not self.closed:
            s = self._attach()
            if s is None:
                continue
            if self.closed:
                s.close()
                return
            with self.lock:
                self.sock = s
                self.attachments += 1
            self.connected.set()
            try:
                while True:
                    data = s.recv(4096)
                    if not data:
                        break
                    if self.wire_in is not None:
                        self.wire_in.push(data)
            except OSError:
                pass
            with self.lock:
                if self.sock is s:
                    self.sock = None
            self.connected.clear()
            try:
                s.close()
            except OSError:
                pass

    def _attach(self):
        if self.mode == "listen":
            try:
                s, _ = self.lsock.accept()
            except OSError:
                if not self.closed:
                    time.sleep(0.05)
                return None
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.connect((self.host, self.port))
            except OSError:
                s.close()
                time.sleep(0.2)
                return None
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def wait_first_attach(self):
        """Until a hold_first end's first connection is made, bytes for it wait (FIRST_ATTACH_S
        at most, counted from the first byte that waited).

        The cable is plugged in before either board runs; only the TCP plumbing of the simulation
        (a board or a `connect:` end still dialling, a peer simulator starting) may lag behind, and
        a real wire would not lose the first bytes (the master's boot DISCOVER) to that. After the
        first connection a missing peer is a board that is off: its bytes are lost (no_receiver).
        """
        if self.hold_first and self.attachments == 0 and not self.closed:
            now = time.monotonic()
            if self.held_since is None:
                self.held_since = now
            wait = self.held_since + FIRST_ATTACH_S - now
            if wait > 0:
                self.connected.wait(wait)

    def send(self, data):
        with self.lock:
            s = self.sock
        if s is None:
            return False
        try:
            s.sendall(data)
            return True
        except OSError:
            return False

    def drop_peer(self):
        """Close the current connection (the peer sees EOF)."""
        with self.lock:
            s, self.sock = self.sock, None
        if s is not None:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.closed = True
        if self.lsock is not None:
            try:
                self.lsock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
            except OSError:
                pass
            try:
                self.lsock.close()
            except OSError:
                pass
        self.drop_peer()


class Cable:
    """A UART cable: `a` and `b` ends, a Wire each way (`wires["a>b"]`, `wires["b>a"]`)."""

    def __init__(self, name, a_spec, b_spec, seed=None, hold_first=()):
        """hold_first: the ends ("a", "b") that join another simulator or implementation rather
        than a board process of this one (bytes for them wait for the first connection)."""
        self.name = name
        self.plugged = True
        self.a = End(a_spec, name + ".a", "a" in hold_first)
        self.b = End(b_spec, name + ".b", "b" in hold_first)
        self.ab = Wire(self, name + " a>b", None if seed is None else seed * 2)
        self.ba = Wire(self, name + " b>a", None if seed is None else seed * 2 + 1)
        self.ab.dst, self.a.wire_in = self.b, self.ab
        self.ba.dst, self.b.wire_in = self.a, self.ba
        self.unplugs = 0

    def start(self):
        tune_threads()
        self.a.start()
        self.b.start()
        return self

    def wires(self, direction="both"):
        """direction: 'both', 'a>b' or 'b>a'."""
        if direction == "both":
            return [self.ab, self.ba]
        if direction == "a>b":
            return [self.ab]
        if direction == "b>a":
            return [self.ba]
        raise ValueError("direction %r: expected both, a>b or b>a" % direction)

    def unplug(self):
        self.plugged = False
        self.unplugs += 1
        for w in (self.ab, self.ba):
            w.clear()

    def replug(self):
        self.plugged = True

    def set_faults(self, direction="both", flip=None, drop=None, split=None):
        for name, v in (("flip", flip), ("drop", drop)):
            if v is not None and not 0.0 <= v <= 1.0:
                raise ValueError("%s rate %r: must be between 0 and 1" % (name, v))
        for w in self.wires(direction):
            if flip is not None:
                w.flip_rate = flip
            if drop is not None:
                w.drop_rate = drop
            if split is not None:
                w.split = bool(split)

    def junk(self, n, direction="both"):
        if not 0 < n <= 4096:
            raise ValueError("junk count %r: must be 1..4096" % n)
        for w in self.wires(direction):
            w.junk(n)

    def counters(self):
        return {
            "plugged": self.plugged,
            "unplugs": self.unplugs,
            "a": {"spec": self.a.spec, "attached": self.a.sock is not None},
            "b": {"spec": self.b.spec, "attached": self.b.sock is not None},
            "a>b": dict(
                self.ab.snapshot(),
                late_max_ms=round(self.ab.late_max * 1000, 1),
                flip_rate=self.ab.flip_rate,
                drop_rate=self.ab.drop_rate,
                split=self.ab.split,
            ),
            "b>a": dict(
                self.ba.snapshot(),
                late_max_ms=round(self.ba.late_max * 1000, 1),
                flip_rate=self.ba.flip_rate,
                drop_rate=self.ba.drop_rate,
                split=self.ba.split,
            ),
        }

    def close(self):
        for w in (self.ab, self.ba):
            w.close()
        self.a.close()
        self.b.close()
