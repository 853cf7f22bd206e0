# The virtual body's human console: events as lines, direct steps, pasted plans, faults.
import json
import re
import shlex
import sys
import threading
import time
import urllib.error

from vbody.lines import plan_lines
from vbody.text import HUB_LOGGED, bus_text, describe, describe_hub, describe_status, menu_text

HELP = """\
commands:
  {json plan}                      run a whole plan, print the report; a pasted plan may span
                                   lines: it ends when its braces close, at an empty line, or at
                                   a line that cannot continue it (the parse error is said then)
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
  power BOARD                      power-cycle a board (led, speaker, master); the console
                                   waits for the master's HTTP API after `power master`
  restart master                   restart the master process (the same as power master)
  bus                              bus counters only
  verbose on|off                   also show every organ event line (command, done, ack,
                                   discover); heartbeats are frames, not event lines: see status
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


TAKE_GAP_S = 0.15  # tools/simhw/machine.py I2S.TAKE_GAP_MS: silence that starts a new WAV file
STAMP = re.compile(r"\[\s*-?[\d.]+s\]")  # a line's leading time, as stamp() writes it
HOLD_S = 0.2  # events wait this long to be printed in the order they happened (pin logs lag)
SETTLE_MAX_S = 5.0  # and at most this long for a pin log's reader that lags on a loaded machine


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
        self.held = []  # events not printed yet: (at, seq, kind, text, fields), kept sorted
        self.printed = None  # the latest time among the held events printed
        self.seq = 0
        self.held_lock = threading.Lock()
        self.flusher = None
        self.opened = False  # the start line is out
        self.take = None  # (wav, at): the speaker's current take
        self.speaker_done = None  # when the speaker last said done
        body.on_event = self.on_event

    # -- output --------------------------------------------------------------------------------

    def emit(self, kind, text, **fields):
        """Prints one output now (after the held events that happened before it)."""
        if kind == "start":  # the first line: where the logs are; then what happened so far
            self._write(kind, text, fields)
            self.opened = True
            self.flush(time.monotonic())
            return
        now = time.monotonic()
        self._wait_seen(now)
        self.flush(now)
        with self.held_lock:  # the line goes out as of now: after what was just printed
            self.printed = now if self.printed is None or now > self.printed else self.printed
            at = self.printed
        if STAMP.match(text):
            text = self.stamp(at) + STAMP.sub("", text, count=1)
        self._write(kind, text, fields)

    def _write(self, kind, text, fields):
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

    def stamp(self, at=None):
        """[  12.3s]: when something happened (default: now), on the body's clock."""
        return "[%6.1fs]" % ((at - self.body.t0) if at is not None else self.body.now())

    # Events are printed in the order they happened, not the order they arrived: a pin log is
    # read every 50 ms, a board's event line at once. Each waits HOLD_S in `held`, sorted by
    # its time ("at"), then goes out; a command's own output first lets out what is due. An
    # event that reaches `hold` after later ones were printed (its reader thread kept off the
    # CPU past HOLD_S on a loaded machine) is stamped with the latest printed time: a board's
    # line is stamped when it was read, and it is shown no earlier than what was shown before it.

    def hold(self, at, kind, text, **fields):
        with self.held_lock:
            if self.printed is not None and at < self.printed:
                old = self.stamp(at)
                if text.startswith(old):
                    text = self.stamp(self.printed) + text[len(old) :]
                at = self.printed
            self.seq += 1
            self.held.append((at, self.seq, kind, text, fields))
            self.held.sort(key=lambda h: (h[0], h[1]))
            if self.flusher is None:
                self.flusher = threading.Thread(target=self._flush_loop, daemon=True)
                self.flusher.start()

    def flush(self, upto=None):
        """Prints the held events that happened up to `upto` (monotonic s; None: all); nothing
        before the start line, which says where the logs are."""
        if upto is not None and not self.opened:
            return
        if upto is not None:  # not past what the pin logs' readers have seen: they may lag
            upto = min(upto, self._seen())
        with self.held_lock:
            n = len(self.held)
            if upto is not None:
                n = 0
                while n < len(self.held) and self.held[n][0] <= upto:
                    n += 1
            out, self.held = self.held[:n], self.held[n:]
            for at, _, kind, text, fields in out:
                self.printed = at if self.printed is None or at > self.printed else self.printed
                self._write(kind, text, fields)

    def settle(self):
        """Waits until every event that happened before now is printed."""
        upto = time.monotonic()
        time.sleep(HOLD_S)
        self._wait_seen(upto)
        self.flush(upto)

    def _wait_seen(self, upto):
        """Waits (at most SETTLE_MAX_S) until every pin log has been read up to `upto`."""
        end = time.monotonic() + SETTLE_MAX_S
        while self._seen() < upto and time.monotonic() < end:
            time.sleep(0.01)

    def _seen(self):
        seen = getattr(self.body, "pin_logs_seen", None)
        return seen() if seen else float("inf")

    def _flush_loop(self):
        while True:
            time.sleep(0.05)
            self.flush(time.monotonic() - HOLD_S)

    def on_event(self, ev):
        src, name = ev.get("src"), ev.get("event")
        at = ev.get("at", ev.get("t", time.monotonic()))
        stamp = self.stamp(at)
        if name == "pin" and src == "led":
            self.led = ev
            state = "on" if ev["value"] else "off"
            rgb = " rgb %s" % ",".join(map(str, ev["rgb"])) if "rgb" in ev else ""
            self.hold(
                at,
                "led",
                "%s LED %s%s" % (stamp, state, rgb),
                value=ev["value"],
                rgb=ev.get("rgb"),
                t_ms=ev.get("t_ms"),
            )
            return
        if name == "audio":
            self.wavs.append(ev["wav"])
            self.take = (ev["wav"], at)
            self.hold(at, "audio", "%s speaker audio -> %s" % (stamp, ev["wav"]), wav=ev["wav"])
            return
        if src == "speaker" and name == "done":
            self.speaker_done = at
        if name == "command" and src == "speaker" and ev.get("status") == 0:
            # A take is one WAV file of sound without a pause (tools/simhw: a new file after
            # 150 ms of silence); sound that follows sound at once goes on in the same file.
            # Each piece still gets its line: this one names the file and where in it it starts.
            done = self.speaker_done
            if self.take and done is not None and self.take[1] < done and at - done < TAKE_GAP_S:
                wav, start = self.take
                self.hold(
                    at,
                    "audio",
                    "%s speaker audio -> %s (from %.2f s: one take with the sound before)"
                    % (stamp, wav, at - start),
                    wav=wav,
                    offset_s=round(at - start, 3),
                )
        if name == "heap":
            return
        if src == "hub":
            if name in HUB_LOGGED:
                return  # the master's event log line says it already
            fields = {k: v for k, v in ev.items() if k not in ("t", "at")}
            self.hold(at, "hub", "%s %s" % (stamp, describe_hub(ev)), **fields)
            return
        if name in ("stderr", "print"):
            what = " stderr" if name == "stderr" else ""
            line = ev.get("line")
            self.hold(at, name, "%s %s%s: %s" % (stamp, src, what, line), src=src, line=line)
            return
        fields = {k: v for k, v in ev.items() if k not in ("t", "at")}
        if src == "master" and name in ("registered", "offline"):
            self.schedule_menu()
        if src == "master" and name == "boot":
            self.last_menu = None
        shown = name in LIFECYCLE or src in ("master", "bus") or self.verbose
        if shown or (name == "started" and ev.get("heap")):  # --heap: what each board got
            self.hold(at, "event", "%s %s" % (stamp, describe(ev)), **fields)

    def schedule_menu(self):
        if self.menu_timer is not None:
            self.menu_timer.cancel()
        self.menu_timer = threading.Timer(0.3, self.show_menu_if_changed)
        self.menu_timer.daemon = True
        self.menu_timer.start()

    def show_menu_if_changed(self):
        try:
            status, m = self.body.request("GET", "/menu")
        except (OSError, RuntimeError):
            return
        if status != 200:
            self.emit("menu", "%s menu not served (%d): %s" % (self.stamp(), status, m), menu=None)
            return
        names = [c.get("name") for c in m.get("capabilities", [])] if isinstance(m, dict) else m
        if names != self.last_menu:
            self.last_menu = names
            self.print_menu(m)

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
                    raise ValueError(
                        "%r: params are name=value (e.g. %s count=3); the one bare argument is "
                        'a text, quoted once (speak "Hello there")' % (a, action)
                    )
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
        self.settle()  # the plan's LED and audio lines first, in the order they happened
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
                json.loads(line)
            except ValueError as e:
                self.emit("error", "not a JSON plan: %s" % e, error=str(e))
                return True
            # the master reads the bytes as written, with its own strict parser
            return self._safely("plan", lambda: self.run_plan(line.encode()) and True)
        try:
            words = shlex.split(line)
        except ValueError as e:
            self.emit("error", "cannot parse the line: %s" % e, error=str(e))
            return True
        cmd, args = words[0], words[1:]
        opts = dict(a.split("=", 1) for a in args if "=" in a)
        pos = [a for a in args if "=" not in a]
        return self._safely(cmd, lambda: self.command(cmd, pos, opts, line))

    def _safely(self, cmd, run):
        try:
            return run()
        except urllib.error.URLError as e:
            why = "the master's HTTP API does not answer (%s): is the master down?" % e.reason
            self.emit("error", "%s: %s" % (cmd, why), error=why)
            return True
        except (ValueError, KeyError, IndexError, RuntimeError, OSError) as e:
            self.emit("error", "%s: %s" % (cmd, e), error=str(e))
            return True

    def command(self, cmd, pos, opts, line):
        b = self.body
        if cmd in ("unplug", "replug", "junk", "flip", "drop", "split") and not pos:
            raise ValueError("which cable? %s" % " or ".join(b.cables))
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
                self.emit("status", describe_status(st), status=st)
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
            n = _number(pos, 1, "N", int, 32, "junk led 64")
            b.cable(pos[0]).junk(n, self.direction(opts))
            self.emit("bus", "bus: %d junk bytes on %s (%s)" % (n, pos[0], opts.get("to", "both")))
        elif cmd in ("flip", "drop"):
            rate = _number(
                pos, 1, "RATE", float, None, "%s %s 1e-3" % (cmd, pos[0] if pos else "led")
            )
            if not 0.0 <= rate <= 1.0:
                raise ValueError("RATE %g is not a probability between 0 and 1" % rate)
            b.cable(pos[0] if pos else "").set_faults(self.direction(opts), **{cmd: rate})
            self.emit(
                "bus", "bus: %s rate %g on %s (%s)" % (cmd, rate, pos[0], opts.get("to", "both"))
            )
        elif cmd == "split":
            if len(pos) < 2 or pos[1] not in ("on", "off"):
                raise ValueError("say on or off: split %s on" % (pos[0] if pos else "led"))
            on = pos[1] == "on"
            b.cable(pos[0]).set_faults(self.direction(opts), split=on)
            self.emit(
                "bus",
                "bus: split writes on the %s cable: %s" % (pos[0], "on" if on else "off"),
                cable=pos[0],
                split=on,
            )
        elif cmd == "clear":
            for name in pos or list(b.cables):
                b.cable(name).set_faults("both", flip=0.0, drop=0.0, split=False)
                b.replug(name)
            self.emit("bus", "bus: faults cleared")
        elif cmd in ("power", "restart"):
            if cmd == "power" and not pos:
                raise ValueError("which board? power led, power speaker or power master")
            role = pos[0] if pos else "master"
            b.power_cycle(role)
            if role == "master" and b.http is not None:
                self.wait_master()
        elif cmd == "verbose":
            if pos and pos[0] not in ("on", "off"):
                raise ValueError("say on or off: verbose on")
            self.verbose = not pos or pos[0] == "on"
            self.emit(
                "verbose",
                "verbose %s: %s"
                % (
                    "on" if self.verbose else "off",
                    (
                        "every organ event line is shown (command, done, ack, discover)"
                        if self.verbose
                        else "organ events are shown for the lifecycle only"
                    ),
                ),
                verbose=self.verbose,
            )
        elif cmd == "sleep":
            time.sleep(float(pos[0]))
        elif cmd == "wait":
            self.wait(pos, opts)
        elif re.match(r"^[a-z][a-z0-9_]*$", cmd):
            self.run_plan(self.step_plan(line))
        else:
            self.emit("error", "unknown command %r (try help)" % cmd)
        return True

    def wait_master(self, timeout=15.0):
        """After a master restart: wait until its HTTP API answers again, or say it is down."""
        if self.body.wait_http(timeout) and self.body.menu_names() is not None:
            self.emit("wait", "master is back (HTTP API answers)", ok=True)
        else:
            self.emit(
                "error",
                "the master did not come back within %.0f s: its HTTP API is down" % timeout,
                error="master down",
            )

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
            if self.body.failure():
                return  # a board is gone: the caller says which, in one line
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

    def print_menu(self, m):
        if not isinstance(m, dict):
            self.emit("menu", "menu: %s" % m, menu=m)
            return
        self.last_menu = [c.get("name") for c in m.get("capabilities", [])]
        self.emit("menu", menu_text(m, self.stamp()), menu=m)

    def show_bus(self):
        c = self.body.counters()
        self.emit("bus", bus_text(c), counters=c)

    def read_lines(self, stream):
        """Console lines from a stream; a pasted plan joined into one line (plan_lines)."""
        return plan_lines(stream)


def _number(pos, i, what, kind, default, example):
    """pos[i] as a number (int or float), or default; a clear error otherwise."""
    if len(pos) <= i:
        if default is None:
            raise ValueError("%s is missing, e.g. %s" % (what, example))
        return default
    try:
        return kind(pos[i])
    except ValueError:
        raise ValueError("%s %r is not a number, e.g. %s" % (what, pos[i], example)) from None
