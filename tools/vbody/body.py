# The virtual body: master, LED organ and speaker organ processes on two paced cables.
import http.client
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request

from vbody import bus, launch
from vbody.proc import BoardProc, PinLogTail

ORGAN_UART = 1  # the organ boards' cable UART
MASTER_UART = {"led": 0, "speaker": 1}  # master UART per organ cable
HUB_ATTACH_S = 20.0  # --events: the organs wait at most this long for the stream to attach
STARVED_S = 3.0  # a master that refuses GET /menu with 503 this long cannot serve it


class VirtualBody:
    """Master + LED organ + speaker organ as processes on two paced cables.

    `external` maps "led"/"speaker" to a listen:/connect: spec that takes that organ's place,
    and "master0"/"master1" to specs that take the master's UART0/UART1 places (no master
    process then). Everything observed lands in `self.events` (dicts with "src" and "t",
    monotonic seconds); `wait_for(pred, timeout)` blocks until an event matches.
    """

    def __init__(
        self,
        out_dir=None,
        external=None,
        heap=None,
        heap_report_ms=None,
        seed=None,
        on_event=None,
        organs=("led", "speaker"),
        master_config=None,
        master_settings=None,
        hub_events=False,
        xiaozhi=None,
        xiaozhi_endpoint=None,
    ):
        if out_dir is None:
            base = os.path.join(
                launch.ROOT, "sim-out", time.strftime("%Y%m%d-%H%M%S-") + str(os.getpid())
            )
            out_dir, k = base, 1
            while os.path.exists(out_dir):
                k += 1
                out_dir = "%s-%d" % (base, k)
        self.out_dir = os.path.abspath(out_dir)
        os.makedirs(self.out_dir, exist_ok=True)
        self.external = dict(external or {})
        self.heap = heap
        self.heap_report_ms = heap_report_ms
        self.on_event = on_event
        self.events = []
        self.cond = threading.Condition()
        self.t0 = time.monotonic()
        self.boards = {}
        self.cables = {}
        self.tails = []
        self.http = None
        self.organs = [o for o in organs]
        # the master's config.json (in its flash folder) and board settings; the HTTP token
        # in it is sent with every request
        self.master_config = master_config
        self.master_settings = dict(master_settings or {})
        self.token = ((master_config or {}).get("http") or {}).get("token")
        self.seed = seed
        self.xiaozhi = xiaozhi  # OTA URL of a xiaozhi server for the master's link, or None
        if xiaozhi_endpoint:  # a xiaozhi MCP endpoint (relay) the master serves its tools to
            self.master_settings["xiaozhi_endpoint"] = xiaozhi_endpoint
        self.stopped = False
        self.menu_refusal = None  # (status, reply) of the last GET /menu that was not a 200
        self.starved = None  # why the master cannot serve its menu, once that has lasted
        self.hub_events = hub_events  # read GET /events: its items become {"src": "hub"} events
        self.hub_lost = 0
        self.hub_attached = threading.Event()  # GET /events answered 200 (at least once)

    # -- set-up --------------------------------------------------------------------------------

    def start(self, boot=None):
        """Builds the cables and starts the board processes named in boot (default: all)."""
        ext_master = "master0" in self.external or "master1" in self.external
        for organ in ("led", "speaker"):
            n = MASTER_UART[organ]
            a = self.external.get("master%d" % n, "listen:127.0.0.1:0")
            if organ in self.external:
                b = self.external[organ]
            elif organ in self.organs:
                b = "listen:127.0.0.1:0"
            else:
                continue
            seed = None if self.seed is None else self.seed * 10 + n
            hold = ("a" if ext_master else "") + ("b" if organ in self.external else "")
            self.cables[organ] = bus.Cable(organ, a, b, seed=seed, hold_first=hold).start()
        if not ext_master:
            self.http = ("127.0.0.1", launch.free_port())
            uarts = {MASTER_UART[o]: c.a.peer_spec for o, c in self.cables.items()}
            settings = dict(self.master_settings)
            if self.master_config is not None:
                settings["config"] = "config.json"
            self.boards["master"] = BoardProc(
                "master",
                self.out_dir,
                uarts,
                self._board_event,
                http=self.http,
                heap=self.heap,
                heap_report_ms=self.heap_report_ms,
                settings=settings,
                xiaozhi=self.xiaozhi,
            )
            if self.master_config is not None:
                os.makedirs(self.boards["master"].flash, exist_ok=True)
                with open(os.path.join(self.boards["master"].flash, "config.json"), "w") as f:
                    json.dump(self.master_config, f)
        for organ, cable in self.cables.items():
            if organ in self.external:
                continue
            self.boards[organ] = BoardProc(
                organ,
                self.out_dir,
                {ORGAN_UART: cable.b.peer_spec},
                self._board_event,
                heap=self.heap,
                heap_report_ms=self.heap_report_ms,
            )
        early = self.hub_events and self.http and "master" in self.boards
        for b in self.boards.values():
            self.tails.append(PinLogTail(b.pinlog, lambda d, r=b.role: self._pin_line(r, d)))
            if boot is None or b.role in boot:
                b.start()
            if early and b.role == "master":
                # the organs boot once the stream is attached, so it holds their registrations
                threading.Thread(target=self._read_hub, daemon=True).start()
                end = time.monotonic() + HUB_ATTACH_S
                while not self.hub_attached.wait(0.1) and b.alive() and time.monotonic() < end:
                    pass
        if self.hub_events and self.http and not early:
            threading.Thread(target=self._read_hub, daemon=True).start()
        return self

    def _read_hub(self):
        # GET /events for as long as the body runs, again after a master restart: each item
        # is an event {"src": "hub", "event": its kind, ...its data}.
        while not self.stopped:
            try:
                s = socket.create_connection(self.http, timeout=2)
            except OSError:
                time.sleep(0.2)
                continue
            try:
                auth = b"Authorization: Bearer %s\r\n" % self.token.encode() if self.token else b""
                s.sendall(
                    b"GET /events HTTP/1.1\r\nHost: sim\r\n%sAccept: text/event-stream\r\n\r\n"
                    % auth
                )
                s.settimeout(0.5)
                buf = b""
                head = None
                while not self.stopped:
                    try:
                        c = s.recv(65536)
                    except socket.timeout:
                        continue
                    if not c:
                        break
                    buf += c
                    if head is None:
                        i = buf.find(b"\r\n\r\n")
                        if i < 0:
                            continue
                        head, buf = buf[:i], buf[i + 4 :]
                        if b" 200 " not in head.split(b"\r\n")[0]:
                            break
                        self.hub_attached.set()
                    while b"\n\n" in buf:
                        block, _, buf = buf.partition(b"\n\n")
                        self._hub_item(block)
            except OSError:
                pass
            finally:
                s.close()
            time.sleep(0.2)

    def _hub_item(self, block):
        kind, data = None, None
        for line in block.decode("utf-8", "replace").split("\n"):
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                try:
                    data = json.loads(line[6:])
                except ValueError:
                    data = None
        if kind is None or not isinstance(data, dict):
            return
        if kind == "lost":
            self.hub_lost += data.get("count", 0)
        ev = {"src": "hub", "t": time.monotonic()}
        ev.update(data)
        ev["event"] = kind
        self._add(ev)

    def start_board(self, role):
        """Starts (boots) one board process; returns the monotonic time it was started."""
        t = time.monotonic()
        self.board(role).start()
        return t

    def pin_logs_seen(self):
        """Monotonic time up to which every board's pin log has been read and reported."""
        return min([t.seen for t in self.tails] or [time.monotonic()])

    def stop(self):
        if self.stopped:
            return
        self.stopped = True
        for b in self.boards.values():
            b.stop()
        for t in self.tails:
            t.stop()
        for c in self.cables.values():
            c.close()
        try:  # what the bus did (faults, stalls) stays beside the boards' logs
            with open(os.path.join(self.out_dir, "bus.json"), "w") as f:
                json.dump(self.counters(), f, indent=1, sort_keys=True)
        except (OSError, TypeError, ValueError):
            pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- events --------------------------------------------------------------------------------

    def now(self):
        return time.monotonic() - self.t0

    def _add(self, ev):
        with self.cond:
            self.events.append(ev)
            self.cond.notify_all()
        if self.on_event:
            self.on_event(ev)

    def _board_event(self, role, obj):
        ev = dict(obj)
        ev["src"] = role
        ev["t"] = time.monotonic()
        self._add(ev)

    def _pin_line(self, role, d):
        now = time.monotonic()
        ev = {"src": role, "t": now, "t_ms": d.get("t_ms")}
        if isinstance(d.get("t_ms"), (int, float)):  # when it happened, on the monotonic clock
            ev["at"] = min(now, d["t_ms"] / 1000.0 - (time.time() - now))
        if "wav" in d:
            ev.update(event="audio", wav=d["wav"], rate=d.get("rate"))
            if "offset_s" in d:
                ev["offset_s"] = d["offset_s"]
        elif "pin" in d:
            ev.update(event="pin", pin=d["pin"], value=d["value"])
            if "rgb" in d:
                ev["rgb"] = d["rgb"]
        else:
            ev.update(event="pinlog", line=d)
        self._add(ev)

    def wait_for(self, pred, timeout, since=0):
        """First event at index >= since that satisfies pred, or None after timeout seconds."""
        deadline = time.monotonic() + timeout
        with self.cond:
            i = since
            while True:
                while i < len(self.events):
                    if pred(self.events[i]):
                        return self.events[i]
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def mark(self):
        with self.cond:
            return len(self.events)

    def select(self, pred, since=0):
        with self.cond:
            return [e for e in self.events[since:] if pred(e)]

    # -- the master's API ----------------------------------------------------------------------

    def url(self, path):
        return "http://%s:%d%s" % (self.http[0], self.http[1], path)

    def request(self, method, path, body=None, timeout=60):
        """(status, parsed JSON or text) from the master's HTTP API."""
        if self.http is None:
            raise RuntimeError("the master is external: no HTTP API to talk to")
        data = None
        headers = {}
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(self.url(path), data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        except http.client.HTTPException as e:  # e.g. an answer cut short: the caller's OSError
            raise OSError("the master's answer to %s %s broke off: %r" % (method, path, e))
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode("utf-8", "replace")

    def menu(self):
        return self.request("GET", "/menu")[1]

    def status(self):
        return self.request("GET", "/status")[1]

    def plan(self, plan):
        return self.request("POST", "/plan", plan)

    def failure(self):
        """ "the ROLE board exited ...: ERROR" for the first board process that ended by
        itself (a board that dies at boot), else None."""
        for role, b in self.boards.items():
            why = b.failure()
            if why:
                return "the %s board %s" % (role, why)
        if self.starved:
            return self.starved + (" (--heap %s)" % self.heap if self.heap else "")
        return None

    def wait_http(self, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.failure():
            try:
                with socket.create_connection(self.http, timeout=0.5):
                    return True
            except OSError:
                time.sleep(0.05)
        return False

    def menu_names(self):
        """The names on the menu, or None when the master does not answer it (a refusal, such
        as a 503 short of memory, is kept in self.menu_refusal)."""
        try:
            status, m = self.request("GET", "/menu")
            if status != 200:
                self.menu_refusal = (status, m)
                return None
            self.menu_refusal = None
            return sorted(c["name"] for c in m.get("capabilities", []))
        except (OSError, ValueError, AttributeError, KeyError, TypeError):
            return None

    def wait_menu(self, names, timeout=10, exact=False):
        """Polls GET /menu until it holds every name (or exactly those); returns the names."""
        deadline = time.monotonic() + timeout
        got = None
        refused_since = None
        while time.monotonic() < deadline and not self.failure():
            got = self.menu_names()
            if got is not None:
                refused_since = None
                if (set(got) == set(names)) if exact else set(names) <= set(got):
                    return got
            elif self.menu_refusal and self.menu_refusal[0] == 503:
                # a master short of memory for its menu: said once it lasts, not after timeout
                refused_since = refused_since or time.monotonic()
                if time.monotonic() - refused_since > STARVED_S:
                    self.starved = "the master answers GET /menu with 503 for %.0f s: %s" % (
                        STARVED_S,
                        self.menu_refusal[1],
                    )
                    break
            time.sleep(0.05)
        return got

    # -- faults --------------------------------------------------------------------------------

    def cable(self, name):
        if name not in self.cables:
            raise ValueError("no cable %r: the cables are %s" % (name, ", ".join(self.cables)))
        return self.cables[name]

    def board(self, role):
        if role not in self.boards:
            raise ValueError(
                "no %s process here (the processes are %s)" % (role, ", ".join(self.boards))
            )
        return self.boards[role]

    def unplug(self, name):
        self.cable(name).unplug()
        self._add({"src": "bus", "t": time.monotonic(), "event": "unplug", "cable": name})

    def replug(self, name):
        self.cable(name).replug()
        self._add({"src": "bus", "t": time.monotonic(), "event": "replug", "cable": name})

    def power_cycle(self, role):
        self._add({"src": "bus", "t": time.monotonic(), "event": "power_cycle", "board": role})
        self.board(role).power_cycle()

    def restart_master(self):
        self.power_cycle("master")

    def counters(self):
        return {name: c.counters() for name, c in self.cables.items()}
