# The virtual body's human console: events as lines, direct steps, pasted plans, faults.
import json
import re
import shlex
import sys
import threading
import time

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
