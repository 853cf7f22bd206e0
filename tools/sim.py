#!/usr/bin/env python3
# The virtual body: boards as MicroPython unix-port processes on simulated hardware, joined by the paced bus.
"""organbus simulator.

  tools/sim.py                      master + LED organ + speaker organ on the paced bus, console
  tools/sim.py --plan FILE          the same, runs one plan, prints the report JSON, stops
  tools/sim.py --script FILE        the same, runs console lines from FILE, stops
  tools/sim.py board ROLE [...]     one board (master, led, speaker) alone, its UARTs on TCP

Type `help` in the console for its commands.
"""

import argparse
import json
import os
import re
import shlex
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import bus  # noqa: E402

BOARDS = {
    "master": "c6_master",
    "led": "led_organ",
    "speaker": "speaker_organ",
    "button": "template_organ",
}
RESET_EXIT_CODE = 75  # tools/simhw/machine.py: machine.reset()
SIMHW = os.path.join(HERE, "simhw")
MICROPYPATH = ":".join([SIMHW, ".frozen", os.path.join(ROOT, "lib"), ROOT])
BOARDS_DIR = os.environ.get("ORGANBUS_SIM_BOARDS") or os.path.join(ROOT, "boards")  # tests swap it
ORGAN_UART = 1  # the organ boards' cable UART
MASTER_UART = {"led": 0, "speaker": 1}  # master UART per organ cable


def micropython_exe():
    for here in (
        os.path.join(os.path.dirname(sys.executable), "micropython"),
        os.path.join(ROOT, ".venv", "bin", "micropython"),
    ):
        if os.path.exists(here):
            return here
    import shutil

    exe = shutil.which("micropython")
    if not exe:
        raise SystemExit("sim: no micropython executable (pip install -e '.[dev]')")
    return exe


def board_uarts(role):
    with open(os.path.join(BOARDS_DIR, BOARDS[role], "board.json")) as f:
        return sorted(int(n) for n in json.load(f).get("uarts", {}))


def free_port():
    """A free loopback TCP port for a server that a test (or the simulator) starts next.

    Picked at random below the kernel's ephemeral range (net.ipv4.ip_local_port_range), not
    with bind(("127.0.0.1", 0)): a port from that range, released again, can be taken by any
    outgoing connection on the machine (other test runs make hundreds a second) before the
    server binds it, and the server then fails with EADDRINUSE.
    """
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    rng = random.SystemRandom()
    for _ in range(200):
        s = socket.socket()
        try:
            # an unusual range (starting low) leaves only the kernel's own choice
            s.bind(("127.0.0.1", rng.randrange(20000, low) if low > 21000 else 0))
            return s.getsockname()[1]
        except OSError:
            continue
        finally:
            s.close()
    raise OSError("no free loopback port below %d" % low)


def parse_hostport(text, what="--http"):
    host, _, port = text.rpartition(":")
    if host == "localhost":
        host = "127.0.0.1"
    if not host.startswith("127."):
        raise ValueError("%s %r: only loopback addresses (127.x.x.x) are allowed" % (what, text))
    try:
        port = int(port)
    except ValueError:
        raise ValueError("%s %r: expected HOST:PORT" % (what, text)) from None
    return host, port or free_port()


class BoardProc:
    """One board's main.py on the unix port, its events read from stdout as JSON lines.

    `on_event(role, dict)` gets every line (non-JSON lines arrive as {"event": "print"}); a
    process that calls machine.reset() is started again, as a board would reboot.
    """

    def __init__(
        self,
        role,
        out_dir,
        uarts=None,
        on_event=None,
        http=None,
        console=None,
        heap=None,
        heap_report_ms=None,
        stdin=None,
        stdout_passthrough=False,
        pinlog=None,
        wav=None,
        xiaozhi=None,
    ):
        self.role = role
        self.xiaozhi = xiaozhi  # master: the xiaozhi OTA URL its link is pointed at
        self.board_dir = os.path.join(BOARDS_DIR, BOARDS[role])
        self.out_dir = out_dir
        os.makedirs(out_dir, exist_ok=True)
        self.uarts = dict(uarts or {})
        self.on_event = on_event
        self.http = http
        self.console = console
        self.heap = heap
        self.heap_report_ms = heap_report_ms
        self.stdin = stdin
        self.stdout_passthrough = stdout_passthrough
        self.pinlog = pinlog or os.path.join(out_dir, role + ".pins.jsonl")
        self.wav = wav or os.path.join(out_dir, role + "-audio")
        self.stderr_path = os.path.join(out_dir, role + ".stderr")
        self.proc = None
        self.boots = 0
        self.exit_code = None
        self.stopping = False
        self.lock = threading.Lock()

    def env(self):
        env = dict(os.environ)
        for k in list(env):
            if k.startswith("ORGANBUS_SIM_"):
                del env[k]
        env["MICROPYPATH"] = MICROPYPATH
        env["ORGANBUS_SIM_ROLE"] = self.role
        env["ORGANBUS_SIM_PINLOG"] = self.pinlog
        env["ORGANBUS_SIM_WAV"] = self.wav
        for n, spec in self.uarts.items():
            env["ORGANBUS_SIM_UART%d" % n] = spec
        if self.http:
            env["ORGANBUS_SIM_HTTP"] = "%s:%d" % self.http
        if self.console:
            env["ORGANBUS_SIM_CONSOLE"] = self.console
        if self.heap_report_ms:
            env["ORGANBUS_SIM_HEAP_MS"] = str(self.heap_report_ms)
        if self.xiaozhi:
            env["ORGANBUS_SIM_XIAOZHI"] = self.xiaozhi
        return env

    def start(self):
        cmd = [micropython_exe()]
        if self.heap:
            cmd += ["-X", "heapsize=%s" % self.heap]
        cmd.append(os.path.join(SIMHW, "simboot.py"))
        with self.lock:
            self.stopping = False
            self.exit_code = None
            self.boots += 1
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.board_dir,
                env=self.env(),
                stdin=self.stdin if self.stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                # Ctrl-C belongs to the simulator, which stops the boards itself; a board
                # whose simulator died sees EOF on its cable and exits
                start_new_session=True,
            )
            proc = self.proc
        self._emit({"event": "started", "pid": proc.pid, "boot": self.boots})
        threading.Thread(target=self._read_stdout, args=(proc,), daemon=True).start()
        threading.Thread(target=self._read_stderr, args=(proc,), daemon=True).start()
        return self

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def _emit(self, obj):
        if self.on_event:
            self.on_event(self.role, obj)

    def _read_stdout(self, proc):
        for raw in iter(proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if self.stdout_passthrough:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
            obj = None
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except ValueError:
                    obj = None
            if not isinstance(obj, dict):
                obj = {"event": "print", "line": line}
            self._emit(obj)
        code = proc.wait()
        with self.lock:
            if proc is not self.proc:
                return
            self.exit_code = code
            stopping = self.stopping
        if code == RESET_EXIT_CODE and not stopping:
            self._emit({"event": "reboot"})
            self.start()
        else:
            self._emit({"event": "exit", "code": code, "expected": stopping})

    def _read_stderr(self, proc):
        with open(self.stderr_path, "ab") as f:
            for raw in iter(proc.stderr.readline, b""):
                f.write(raw)
                f.flush()
                self._emit({"event": "stderr", "line": raw.decode("utf-8", "replace").rstrip()})

    def stop(self, power_cut=False, timeout=3.0):
        with self.lock:
            self.stopping = True
            proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        if power_cut:
            proc.kill()
        else:
            proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def power_cycle(self, off_s=0.2):
        self.stop(power_cut=True)
        time.sleep(off_s)
        self.start()


class PinLogTail:
    """Follows a board's pin log (written by tools/simhw) and reports each new JSON line."""

    def __init__(self, path, on_line, period=0.05):
        self.path = path
        self.on_line = on_line
        self.period = period
        self.stop_flag = False
        self.pos = os.path.getsize(path) if os.path.exists(path) else 0
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        buf = b""
        while not self.stop_flag:
            try:
                with open(self.path, "rb") as f:
                    f.seek(self.pos)
                    chunk = f.read()
                    self.pos += len(chunk)
            except FileNotFoundError:
                chunk = b""
            if chunk:
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    try:
                        self.on_line(json.loads(line))
                    except ValueError:
                        pass
            time.sleep(self.period)

    def stop(self):
        self.stop_flag = True


# ---------------------------------------------------------------------------------------------
# The virtual body


class Body:
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
        xiaozhi=None,
    ):
        if out_dir is None:
            base = os.path.join(ROOT, "sim-out", time.strftime("%Y%m%d-%H%M%S-") + str(os.getpid()))
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
        self.seed = seed
        self.xiaozhi = xiaozhi  # OTA URL of a xiaozhi server for the master's link, or None
        self.stopped = False

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
            self.http = ("127.0.0.1", free_port())
            uarts = {MASTER_UART[o]: c.a.peer_spec for o, c in self.cables.items()}
            self.boards["master"] = BoardProc(
                "master",
                self.out_dir,
                uarts,
                self._board_event,
                http=self.http,
                heap=self.heap,
                heap_report_ms=self.heap_report_ms,
                xiaozhi=self.xiaozhi,
            )
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
        for b in self.boards.values():
            self.tails.append(PinLogTail(b.pinlog, lambda d, r=b.role: self._pin_line(r, d)))
            if boot is None or b.role in boot:
                b.start()
        return self

    def start_board(self, role):
        """Starts (boots) one board process; returns the monotonic time it was started."""
        t = time.monotonic()
        self.board(role).start()
        return t

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
        ev = {"src": role, "t": time.monotonic(), "t_ms": d.get("t_ms")}
        if "wav" in d:
            ev.update(event="audio", wav=d["wav"], rate=d.get("rate"))
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
        req = urllib.request.Request(self.url(path), data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
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

    def wait_http(self, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(self.http, timeout=0.5):
                    return True
            except OSError:
                time.sleep(0.05)
        return False

    def menu_names(self):
        try:
            m = self.menu()
            return sorted(c["name"] for c in m.get("capabilities", []))
        except (OSError, ValueError, AttributeError, KeyError, TypeError):
            return None

    def wait_menu(self, names, timeout=10, exact=False):
        """Polls GET /menu until it holds every name (or exactly those); returns the names."""
        deadline = time.monotonic() + timeout
        got = None
        while time.monotonic() < deadline:
            got = self.menu_names()
            if got is not None:
                if (set(got) == set(names)) if exact else set(names) <= set(got):
                    return got
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


# ---------------------------------------------------------------------------------------------
# Console


HELP = """\
commands:
  {json plan}                      run a whole plan (may span lines), print the report
  ACTION [key=value ...]           one-step plan, e.g.  led_blink count=3 period_ms=200
  ACTION "text"                    one-step plan with its text, e.g.  speak "Light is on."
  menu                             the live menu
  status                           organs and link counters (master), bus counters
  led                              the LED's last state;  wav: the audio files written so far
  unplug CABLE / replug CABLE      pull or plug a cable (CABLE: led, speaker)
  junk CABLE [N] [to=organ|master] inject N junk bytes (default 32, both directions)
  flip CABLE RATE [to=...]         flip each bit with probability RATE (0 stops), e.g. flip led 1e-3
  drop CABLE RATE [to=...]         drop each byte with probability RATE
  split CABLE on|off [to=...]      split every write in two with a 5 ms pause
  clear [CABLE]                    stop all faults (and replug)
  power ORGAN                      power-cycle an organ (led, speaker)
  restart master                   restart the master process
  bus                              bus counters only
  verbose on|off                   also show every organ event (commands, acks, heartbeats...)
  sleep SECONDS / wait menu [S]    for scripts: pause; wait until every organ is on the menu
  wait EVENT [S]                   for scripts: wait for the next event of that name (e.g. ack)
  help / quit (or Ctrl-C)"""

LIFECYCLE = {
    "boot",
    "http",
    "registered",
    "refused",
    "offline",
    "duplicate",
    "reset",
    "reboot",
    "exit",
    "discover",
    "unplug",
    "replug",
    "power_cycle",
}


class Console:
    def __init__(self, body, as_json=False, out=None):
        self.body = body
        self.as_json = as_json
        self.out = out or sys.stdout
        self.lock = threading.Lock()
        self.verbose = False
        self.led = None
        self.wavs = []
        self.menu_timer = None
        self.last_menu = None
        body.on_event = self.on_event

    # -- output --------------------------------------------------------------------------------

    def emit(self, kind, text, **fields):
        with self.lock:
            if self.as_json:
                obj = {"kind": kind}
                obj.update(fields)
                if "text" not in obj and text:
                    obj["text"] = text
                self.out.write(json.dumps(obj) + "\n")
            else:
                self.out.write(text + "\n")
            self.out.flush()

    def stamp(self):
        return "[%6.1fs]" % self.body.now()

    def on_event(self, ev):
        src, name = ev.get("src"), ev.get("event")
        if name == "pin" and src == "led":
            self.led = ev
            state = "on" if ev["value"] else "off"
            rgb = " rgb %s" % ",".join(map(str, ev["rgb"])) if "rgb" in ev else ""
            self.emit(
                "led",
                "%s LED %s%s" % (self.stamp(), state, rgb),
                value=ev["value"],
                rgb=ev.get("rgb"),
                t_ms=ev.get("t_ms"),
            )
            return
        if name == "audio":
            self.wavs.append(ev["wav"])
            self.emit("audio", "%s speaker audio -> %s" % (self.stamp(), ev["wav"]), wav=ev["wav"])
            return
        if name == "heap":
            return
        if name == "stderr":
            self.emit(
                "stderr",
                "%s %s stderr: %s" % (self.stamp(), src, ev.get("line")),
                src=src,
                line=ev.get("line"),
            )
            return
        if name == "print":
            self.emit(
                "print",
                "%s %s: %s" % (self.stamp(), src, ev.get("line")),
                src=src,
                line=ev.get("line"),
            )
            return
        fields = {k: v for k, v in ev.items() if k not in ("t",)}
        if src == "master" and name in ("registered", "offline"):
            self.schedule_menu()
        if src == "master" and name == "boot":
            self.last_menu = None
        if name in LIFECYCLE or src in ("master", "bus") or self.verbose:
            self.emit("event", "%s %s" % (self.stamp(), self.describe(ev)), **fields)

    def describe(self, ev):
        src, name = ev.get("src"), ev.get("event")
        if src == "master":
            port = ev.get("port")
            if name == "registered":
                how = "rediscovered" if ev.get("again") else "registered"
                return "master: %s (%s) %s on UART%s: %s" % (
                    ev.get("module_id"),
                    ev.get("module_type"),
                    how,
                    port,
                    ", ".join(ev.get("capabilities") or []),
                )
            if name == "offline":
                return "master: %s on UART%s is offline" % (ev.get("module_id"), port)
            if name == "refused":
                return "master: descriptor on UART%s refused: %s" % (port, ev.get("reason"))
            if name == "duplicate":
                return "master: %s from %s on UART%s left off the menu (name taken)" % (
                    ev.get("name"),
                    ev.get("module_id"),
                    port,
                )
            if name == "boot":
                return "master booted: ports %s (%s)" % (ev.get("ports"), ev.get("mode"))
            if name == "http":
                return "master HTTP API on http://%s:%s" % (ev.get("host"), ev.get("port"))
        if name == "exit":
            how = "stopped" if ev.get("expected") else "EXITED"
            return "%s process %s (code %s)" % (src, how, ev.get("code"))
        if name == "started":
            return "%s process started (pid %s)" % (src, ev.get("pid"))
        if name == "reboot":
            return "%s called machine.reset(): rebooting" % src
        if src == "bus":
            if name == "power_cycle":
                return "bus: power-cycling %s" % ev.get("board")
            return "bus: %s %s" % (name, ev.get("cable", ""))
        if name == "boot":
            return "%s organ booted (%s)" % (src, ev.get("module_id"))
        if name == "done":
            return "%s: %s finished (%s)" % (
                src,
                ev.get("name"),
                "completed" if ev.get("status") == 0 else "stopped",
            )
        rest = {k: v for k, v in ev.items() if k not in ("src", "t", "event")}
        return "%s: %s %s" % (src, name, json.dumps(rest) if rest else "")

    def schedule_menu(self):
        if self.menu_timer is not None:
            self.menu_timer.cancel()
        self.menu_timer = threading.Timer(0.3, self.show_menu_if_changed)
        self.menu_timer.daemon = True
        self.menu_timer.start()

    def show_menu_if_changed(self):
        try:
            m = self.body.menu()
        except (OSError, RuntimeError):
            return
        names = [c.get("name") for c in m.get("capabilities", [])] if isinstance(m, dict) else m
        if names != self.last_menu:
            self.last_menu = names
            self.print_menu(m)

    def print_menu(self, m):
        if isinstance(m, dict):
            self.last_menu = [c.get("name") for c in m.get("capabilities", [])]
        if not isinstance(m, dict):
            self.emit("menu", "menu: %s" % m, menu=m)
            return
        lines = ["%s menu (%d abilities):" % (self.stamp(), len(m.get("capabilities", [])))]
        for c in m.get("capabilities", []):
            ps = ", ".join(
                "%s %s %s..%s%s"
                % (
                    p["name"],
                    p["type"],
                    p.get("min"),
                    p.get("max"),
                    (" " + p["unit"]) if p.get("unit") else "",
                )
                for p in c.get("params", [])
            )
            lines.append(
                "  %-10s %-10s %s(%s)  %s"
                % (
                    c.get("module_id", ""),
                    c.get("resource_group", ""),
                    c["name"],
                    ps,
                    c.get("description", ""),
                )
            )
        if not m.get("capabilities"):
            lines.append("  (empty: no organ registered)")
        self.emit("menu", "\n".join(lines), menu=m)

    # -- input ---------------------------------------------------------------------------------

    def step_plan(self, line):
        """'led_blink count=3 period_ms=200' or 'speak "Light is on."' -> a one-step plan."""
        words = shlex.split(line)
        action, args = words[0], words[1:]
        params = {}
        for a in args:
            if "=" in a and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", a):
                k, v = a.split("=", 1)
            else:
                k, v = "text", a
                if "text" in params:
                    raise ValueError("more than one bare text argument: quote the text once")
                params[k] = v
                continue
            try:
                params[k] = json.loads(v)
            except ValueError:
                params[k] = v
        return {
            "heard_req": 0,
            "steps": [
                {
                    "task_id": "t1",
                    "action": action,
                    "params": params,
                    "priority": 5,
                    "depends_on": [],
                }
            ],
            "can_execute": True,
            "missing": [],
            "response": "",
        }

    def run_plan(self, plan):
        t = time.monotonic()
        status, obj = self.body.plan(plan)
        ms = int((time.monotonic() - t) * 1000)
        if status == 200 and isinstance(obj, dict):
            lines = [
                "%s report (%d ms): %s" % (self.stamp(), ms, "ok" if obj.get("ok") else "NOT ok")
            ]
            for s in obj.get("steps", []):
                extra = " %s ms" % s["ms"] if "ms" in s else ""
                why = " (%s)" % s["reason"] if s.get("reason") else ""
                lines.append(
                    "  %-6s %-12s %s%s%s"
                    % (s.get("task_id"), s.get("action"), s.get("status"), extra, why)
                )
            for n in obj.get("notes", []):
                lines.append("  note: %s" % n)
            self.emit("report", "\n".join(lines), status=status, report=obj)
        else:
            probs = obj.get("problems") if isinstance(obj, dict) else None
            if probs:
                text = "%s plan refused (%d):\n" % (self.stamp(), status) + "\n".join(
                    "  - %s" % p for p in probs
                )
            else:
                text = "%s plan refused (%d): %s" % (self.stamp(), status, obj)
            self.emit("refused", text, status=status, reply=obj)
        return status, obj

    def direction(self, opts):
        to = opts.get("to", "both")
        return {"both": "both", "organ": "a>b", "master": "b>a"}[to]

    def handle(self, line):
        """Runs one console line; returns False when the console should stop."""
        line = line.strip()
        if not line or line.startswith("#"):
            return True
        if line.startswith("{"):
            try:
                plan = json.loads(line)
            except ValueError as e:
                self.emit("error", "not a JSON plan: %s" % e, error=str(e))
                return True
            self.run_plan(line.encode() if not isinstance(plan, dict) else plan)
            return True
        try:
            words = shlex.split(line)
        except ValueError as e:
            self.emit("error", "cannot parse the line: %s" % e, error=str(e))
            return True
        cmd, args = words[0], words[1:]
        opts = dict(a.split("=", 1) for a in args if "=" in a)
        pos = [a for a in args if "=" not in a]
        try:
            return self.command(cmd, pos, opts, line)
        except (ValueError, KeyError, IndexError, RuntimeError, OSError) as e:
            self.emit("error", "%s: %s" % (cmd, e), error=str(e))
            return True

    def command(self, cmd, pos, opts, line):
        b = self.body
        if cmd in ("quit", "exit"):
            return False
        if cmd == "help":
            self.emit("help", HELP)
        elif cmd == "menu":
            self.print_menu(b.menu())
        elif cmd == "status":
            if b.http is None:
                self.emit("status", "the master is external: bus counters only", status=None)
            else:
                st = b.status()
                self.emit("status", self.describe_status(st), status=st)
            self.show_bus()
        elif cmd == "bus":
            self.show_bus()
        elif cmd == "led":
            st = "unknown" if self.led is None else ("on" if self.led["value"] else "off")
            self.emit(
                "led", "LED is %s" % st, value=None if self.led is None else self.led["value"]
            )
        elif cmd == "wav":
            self.emit("wav", "\n".join(self.wavs) or "no audio yet", wavs=self.wavs)
        elif cmd == "unplug":
            b.unplug(pos[0])
        elif cmd == "replug":
            b.replug(pos[0])
        elif cmd == "junk":
            n = int(pos[1]) if len(pos) > 1 else 32
            b.cable(pos[0]).junk(n, self.direction(opts))
            self.emit("bus", "bus: %d junk bytes on %s (%s)" % (n, pos[0], opts.get("to", "both")))
        elif cmd in ("flip", "drop"):
            rate = float(pos[1])
            b.cable(pos[0]).set_faults(self.direction(opts), **{cmd: rate})
            self.emit(
                "bus", "bus: %s rate %g on %s (%s)" % (cmd, rate, pos[0], opts.get("to", "both"))
            )
        elif cmd == "split":
            on = pos[1] in ("on", "1", "true")
            b.cable(pos[0]).set_faults(self.direction(opts), split=on)
            self.emit("bus", "bus: split writes %s on %s" % ("on" if on else "off", pos[0]))
        elif cmd == "clear":
            for name in pos or list(b.cables):
                b.cable(name).set_faults("both", flip=0.0, drop=0.0, split=False)
                b.replug(name)
            self.emit("bus", "bus: faults cleared")
        elif cmd == "power":
            if pos[0] == "master":
                b.restart_master()
            else:
                b.power_cycle(pos[0])
        elif cmd == "restart":
            if pos and pos[0] != "master":
                b.power_cycle(pos[0])
            else:
                b.restart_master()
        elif cmd == "verbose":
            self.verbose = not pos or pos[0] == "on"
        elif cmd == "sleep":
            time.sleep(float(pos[0]))
        elif cmd == "wait":
            self.wait(pos, opts)
        elif re.match(r"^[a-z][a-z0-9_]*$", cmd):
            self.run_plan(self.step_plan(line))
        else:
            self.emit("error", "unknown command %r (try help)" % cmd)
        return True

    def expected_names(self):
        names = []
        for organ in self.body.cables:
            names += {"led": ["led_on", "led_off", "led_blink"], "speaker": ["chime"]}.get(
                organ, []
            )
        return names

    def wait(self, pos, opts):
        what = pos[0] if pos else "menu"
        timeout = float(pos[1]) if len(pos) > 1 else 15.0
        if what == "menu":
            got = self.body.wait_menu(self.expected_names(), timeout)
            ok = got is not None and set(self.expected_names()) <= set(got)
            self.emit(
                "wait", "menu %s: %s" % ("ready" if ok else "NOT ready", got), ok=ok, menu=got
            )
        else:
            # an event that happens from now on (`wait ack` after `power speaker`)
            ev = self.body.wait_for(
                lambda e: e.get("event") == what, timeout, since=self.body.mark()
            )
            self.emit("wait", "%s: %s" % (what, "seen" if ev else "not seen"), ok=ev is not None)

    def describe_status(self, st):
        try:
            lines = ["master status: %s, uptime %.1f s" % (st["mode"], st["uptime_ms"] / 1000.0)]
            if st.get("note"):
                lines.append("  note: %s" % st["note"])
            organs = {o.get("port"): o for o in st.get("organs", [])}
            for p in st.get("ports", []):
                o = organs.get(p["port"], {})
                age = p.get("last_frame_age_ms")
                who = "%s (%s)" % (o["module_id"], o.get("module_type")) if o else "no organ"
                lines.append(
                    "  UART%s %s %s, last frame %s: %s"
                    % (
                        p["port"],
                        who,
                        "online" if p.get("online") else "OFFLINE",
                        "never" if age is None else "%d ms ago" % age,
                        ", ".join(o.get("abilities", [])) or "-",
                    )
                )
                if o.get("duplicates"):
                    lines.append("        left off the menu (names taken): %s" % o["duplicates"])
                for r in p.get("refusals", []):
                    lines.append(
                        "        refused descriptor: %s"
                        % (r.get("reason") if isinstance(r, dict) else r)
                    )
                c = p.get("counters", {})
                lines.append(
                    "        decoder: " + " ".join("%s %s" % kv for kv in sorted(c.items()))
                )
            if "plans" in st:
                lines.append(
                    "  plans: " + " ".join("%s %s" % kv for kv in sorted(st["plans"].items()))
                )
            x = st.get("xiaozhi")
            if x:
                lines.append(
                    "  xiaozhi: %s, reconnects %s, messages in %s out %s, dropped audio frames %s%s"
                    % (
                        x.get("state"),
                        x.get("reconnects"),
                        x.get("messages_in"),
                        x.get("messages_out"),
                        x.get("audio_dropped"),
                        ", last error: %s" % x["last_error"] if x.get("last_error") else "",
                    )
                )
            return "\n".join(lines)
        except (KeyError, TypeError, AttributeError):
            return "master status:\n" + json.dumps(st, indent=1)

    def show_bus(self):
        c = self.body.counters()
        lines = ["bus counters:"]
        for name, d in c.items():
            lines.append(
                "  %s cable (%s)%s"
                % (
                    name,
                    "plugged" if d["plugged"] else "UNPLUGGED",
                    ", unplugged %d times" % d["unplugs"] if d["unplugs"] else "",
                )
            )
            for way, label in (("a>b", "master->organ"), ("b>a", "organ->master")):
                w = d[way]
                faults = []
                if w["flip_rate"]:
                    faults.append("flip %g" % w["flip_rate"])
                if w["drop_rate"]:
                    faults.append("drop %g" % w["drop_rate"])
                if w["split"]:
                    faults.append("split")
                lines.append(
                    "    %-14s sent %d delivered %d flipped %d dropped %d junk %d splits %d "
                    "lost-unplugged %d lost-no-receiver %d%s"
                    % (
                        label,
                        w["sent"],
                        w["delivered"],
                        w["flipped"],
                        w["dropped"],
                        w["junk"],
                        w["splits"],
                        w["unplugged"],
                        w["no_receiver"],
                        ("  [" + ", ".join(faults) + "]") if faults else "",
                    )
                )
        self.emit("bus", "\n".join(lines), counters=c)

    def read_lines(self, stream):
        """Console lines from a stream; a JSON plan may span lines until it parses."""
        pending = ""
        for raw in stream:
            if pending:
                pending += raw
                try:
                    json.loads(pending)
                except ValueError:
                    if raw.strip():
                        continue
                line, pending = pending.replace("\n", " "), ""
                yield line
                continue
            if raw.lstrip().startswith("{"):
                try:
                    json.loads(raw)
                except ValueError:
                    pending = raw
                    continue
            yield raw
        if pending:
            yield pending.replace("\n", " ")


def _check_ota_url(url):
    """--xiaozhi takes an http:// OTA URL on a loopback address (the simulation's rule)."""
    if not url.startswith("http://"):
        raise SystemExit("sim: --xiaozhi %r: expected http://127.0.0.1:PORT/..." % url)
    host = url[7:].split("/", 1)[0].rsplit(":", 1)[0]
    if host not in ("127.0.0.1", "localhost"):
        raise SystemExit("sim: --xiaozhi %r: only loopback addresses are accepted" % url)


def run_body(args):
    external = {}
    for key in ("led", "speaker"):
        spec = getattr(args, key)
        if spec:
            bus.parse_spec(spec, "--" + key)
            external[key] = spec
    for m in args.master or []:
        n, _, spec = m.partition("=")
        if n not in ("0", "1") or not spec:
            raise SystemExit("sim: --master %r: expected 0=SPEC or 1=SPEC" % m)
        try:
            bus.parse_spec(spec, "--master")
        except ValueError as e:
            raise SystemExit("sim: %s" % e)
        external["master" + n] = spec
    if args.xiaozhi:
        if args.master:
            raise SystemExit("sim: --xiaozhi points the master's link: not with an external master")
        _check_ota_url(args.xiaozhi)
    body = Body(
        out_dir=args.out, external=external, heap=args.heap, seed=args.seed, xiaozhi=args.xiaozhi
    )
    # --plan: stdout carries the report alone; the running commentary goes to stderr
    console = Console(body, as_json=args.json, out=sys.stderr if args.plan else None)

    def on_signal(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    code = 0
    try:
        body.start()
        info = {
            "out": body.out_dir,
            "pids": {r: b.pid for r, b in body.boards.items()},
            "cables": {n: {"master": c.a.spec, "organ": c.b.spec} for n, c in body.cables.items()},
        }
        if body.http:
            info["http"] = body.url("")
        console.emit(
            "start",
            "organbus virtual body: logs and audio in %s\n%s"
            % (
                body.out_dir,
                (
                    "master HTTP API on %s  (GET /menu, POST /plan, GET /status)" % body.url("")
                    if body.http
                    else "external master"
                ),
            ),
            **info,
        )
        if body.http and not body.wait_http(15):
            console.emit("error", "the master did not open its HTTP port %s:%d" % body.http)
        if args.plan:
            with open(args.plan) as f:
                raw = f.read()
            console.wait(["menu", str(args.ready_timeout)], {})
            status, obj = console.run_plan(raw.encode())
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()
            code = 0 if status == 200 else 1
        elif args.script:
            console.wait(["menu", str(args.ready_timeout)], {})
            with open(args.script) as f:
                for line in console.read_lines(f):
                    console.emit("input", "> " + line.strip(), line=line.strip())
                    if not console.handle(line):
                        break
        else:
            console.emit("hint", "type help for commands; Ctrl-C or quit stops everything")
            interactive = sys.stdin.isatty()

            def lines():
                while True:
                    try:
                        yield input("") + "\n" if interactive else next(sys.stdin)
                    except (EOFError, StopIteration):
                        return

            for line in console.read_lines(lines()):
                if not console.handle(line):
                    break
    except KeyboardInterrupt:
        pass
    finally:
        body.stop()
        console.emit("stop", "stopped: every process the simulator started is gone")
    return code


# ---------------------------------------------------------------------------------------------
# `board ROLE`


def run_board(argv):
    p = argparse.ArgumentParser(
        prog="sim.py board",
        description="Run one board's own main.py on the MicroPython unix port with simulated "
        "hardware; each --uart joins a board UART to a loopback TCP address through a paced "
        "115200 8N1 cable.",
    )
    p.add_argument("role", choices=sorted(BOARDS))
    p.add_argument(
        "--uart",
        action="append",
        default=[],
        metavar="N=listen:HOST:PORT",
        help="UART N of the board on listen:HOST:PORT or connect:HOST:PORT (loopback)",
    )
    p.add_argument(
        "--wav", help="speaker audio: a .wav file (all takes) or a folder (one file per take)"
    )
    p.add_argument(
        "--log", help="JSON lines: pin (LED) changes, audio takes and the board's events"
    )
    p.add_argument(
        "--http", help="master: serve the HTTP API on HOST:PORT (loopback; PORT 0 = any)"
    )
    p.add_argument("--console", choices=["link"], help="master: JSON-lines link on stdin/stdout")
    p.add_argument("--heap", help="unix-port heap size, e.g. 64k")
    p.add_argument("--heap-report-ms", type=int, help="print a heap event every N ms")
    p.add_argument("--no-pace", action="store_true", help="join the UART straight to the address")
    p.add_argument("--out", help="folder for default logs and audio (default sim-out/board-ROLE)")
    args = p.parse_args(argv)

    have = board_uarts(args.role)
    uarts = {}
    cables = []
    try:
        for item in args.uart:
            n, eq, spec = item.partition("=")
            if not eq or not n.isdigit():
                raise ValueError(
                    "--uart %r: expected N=listen:HOST:PORT or N=connect:HOST:PORT" % item
                )
            n = int(n)
            if n not in have:
                raise ValueError(
                    "--uart %d: the %s board has UART %s only"
                    % (n, args.role, ", ".join(map(str, have)))
                )
            if n in uarts:
                raise ValueError("--uart %d given twice" % n)
            bus.parse_spec(spec, "--uart %d" % n)
            uarts[n] = spec
        http = parse_hostport(args.http) if args.http else None
        if (args.http or args.console) and args.role != "master":
            raise ValueError("--http and --console belong to the master board")
    except ValueError as e:
        p.error(str(e))

    out = os.path.abspath(args.out or os.path.join(ROOT, "sim-out", "board-" + args.role))
    board_specs = {}
    for n, spec in uarts.items():
        if args.no_pace:
            board_specs[n] = spec
        else:
            # the address is another simulator or implementation: the wire is plugged in before
            # either side runs, so bytes for it wait for its first connection (bus.End)
            c = bus.Cable("uart%d" % n, "listen:127.0.0.1:0", spec, hold_first="b").start()
            cables.append(c)
            board_specs[n] = c.a.peer_spec
    log = open(args.log, "a") if args.log else None
    log_lock = threading.Lock()

    def on_event(role, obj):
        if log is not None and obj.get("event") not in ("print", "stderr"):
            with log_lock:
                d = {"t_ms": int(time.time() * 1000)}
                d.update(obj)
                log.write(json.dumps(d) + "\n")
                log.flush()
        if obj.get("event") == "stderr":
            sys.stderr.write(obj["line"] + "\n")
            sys.stderr.flush()

    board = BoardProc(
        args.role,
        out,
        board_specs,
        on_event,
        http=http,
        console=args.console,
        heap=args.heap,
        heap_report_ms=args.heap_report_ms,
        stdin=None if args.console else subprocess.DEVNULL,
        stdout_passthrough=True,
        pinlog=os.path.abspath(args.log) if args.log else None,
        wav=os.path.abspath(args.wav) if args.wav else None,
    )
    if args.console:
        board.stdin = sys.stdin  # the link is this process's own stdin
    done = threading.Event()
    orig = board._emit

    def emit(obj):
        orig(obj)
        if obj.get("event") == "exit":
            done.set()

    board._emit = emit

    def on_signal(signum, frame):
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    msg = "sim: %s board (boards/%s/main.py)" % (args.role, BOARDS[args.role])
    for n, spec in uarts.items():
        msg += ", UART%d <-> %s%s" % (n, spec, "" if args.no_pace else " (paced 115200)")
    if http:
        msg += ", HTTP on http://%s:%d" % http
    board.start()
    sys.stderr.write(msg + ", pid %d, out %s\n" % (board.pid, out))
    sys.stderr.flush()
    done.wait()
    stopped_by_us = board.alive()
    board.stop()
    for c in cables:
        c.close()
    return 0 if stopped_by_us else (board.exit_code or 0)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "board":
        return run_board(argv[1:])
    p = argparse.ArgumentParser(
        prog="sim.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--plan", help="run the plan in FILE, print the report JSON, stop")
    p.add_argument("--script", help="run the console lines in FILE, stop")
    p.add_argument("--json", action="store_true", help="every output line is a JSON object")
    p.add_argument(
        "--led", metavar="SPEC", help="an external LED organ at listen:/connect:HOST:PORT"
    )
    p.add_argument("--speaker", metavar="SPEC", help="an external speaker organ")
    p.add_argument(
        "--master",
        action="append",
        metavar="N=SPEC",
        help="an external master: its UART N (0: LED cable, 1: speaker cable)",
    )
    p.add_argument("--heap", help="unix-port heap size of every board, e.g. 64k")
    p.add_argument("--seed", type=int, help="seed of the bus's fault generator")
    p.add_argument(
        "--xiaozhi",
        metavar="OTA_URL",
        help="point the master's xiaozhi link at this OTA URL (tools/xiaozhi_server.py)",
    )
    p.add_argument("--out", help="folder for logs and audio (default sim-out/<time>-<pid>)")
    p.add_argument(
        "--ready-timeout",
        type=float,
        default=15.0,
        help="seconds --plan/--script wait for the menu (default 15)",
    )
    args = p.parse_args(argv)
    try:
        for key in ("led", "speaker"):
            if getattr(args, key):
                bus.parse_spec(getattr(args, key), "--" + key)
    except ValueError as e:
        p.error(str(e))
    return run_body(args)


if __name__ == "__main__":
    sys.exit(main())
