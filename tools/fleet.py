#!/usr/bin/env python3
# The fleet on a broker: list the organbus bodies with their menus and state, send one plan to one body or every body able to run it.
"""organbus fleet over MQTT (docs/links.md "MQTT").

  tools/fleet.py --mqtt HOST:PORT                  the bodies: availability, abilities, diagnostics
  tools/fleet.py --mqtt HOST:PORT --plan FILE      the plan to every online body whose menu has
                                                   all its actions; each body's report printed
  tools/fleet.py --mqtt HOST:PORT --plan FILE --to NAME    to that body alone

Each report is printed as one JSON line {"body", "status", "reply"}: the same status and body as
POST /plan on that body.
"""

import argparse
import json
import os
import queue
import sys
import time

import paho.mqtt.client as paho


def _hostport(text):
    host, _, port = text.rpartition(":")
    try:
        return host or "127.0.0.1", int(port)
    except ValueError:
        raise SystemExit("fleet.py: --mqtt %r: expected HOST:PORT" % text)


class Fleet:
    """The retained state of every body under `base`, read from the broker."""

    def __init__(self, host, port, base="organbus"):
        self.base = base
        self.bodies = {}  # name -> {"availability", "menu", "diagnostics"}
        self.reports = queue.Queue()
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="fleet-%d" % os.getpid())
        self.c.on_message = self._message
        self.c.connect(host, port, 30)
        self.c.loop_start()
        for leaf in ("availability", "menu", "diagnostics", "report/+"):
            self.c.subscribe("%s/+/%s" % (base, leaf), 1)

    def _message(self, client, userdata, m):
        parts = m.topic.split("/")
        if len(parts) < 3 or parts[0] != self.base:
            return
        name, leaf = parts[1], parts[2]
        if leaf == "report" and len(parts) == 4:
            self.reports.put((name, parts[3], m.payload))
            return
        if len(parts) != 3 or leaf not in ("availability", "menu", "diagnostics"):
            return
        body = self.bodies.setdefault(name, {})
        try:
            body[leaf] = m.payload.decode() if leaf == "availability" else json.loads(m.payload)
        except ValueError:
            body[leaf] = None

    def abilities(self, name):
        menu = self.bodies.get(name, {}).get("menu") or {}
        return [c["name"] for c in menu.get("capabilities", [])]

    def online(self):
        return sorted(n for n, b in self.bodies.items() if b.get("availability") == "online")

    def send(self, names, raw, timeout=60.0):
        """Publish `raw` to each body in `names`; [(name, report or None)] in that order."""
        ref = "fleet%d_%d" % (os.getpid(), int(time.time() * 1000) % 1000000)
        for n in names:
            self.c.publish("%s/%s/plan/%s" % (self.base, n, ref), raw, qos=1)
        got = {}
        end = time.monotonic() + timeout
        while len(got) < len(names) and time.monotonic() < end:
            try:
                name, r, payload = self.reports.get(timeout=max(0.05, end - time.monotonic()))
            except queue.Empty:
                break
            if r == ref and name in names:
                got[name] = json.loads(payload)
        return [(n, got.get(n)) for n in names]

    def close(self):
        self.c.loop_stop()
        self.c.disconnect()


def _actions(raw):
    try:
        plan = json.loads(raw)
        return [s["action"] for s in plan["steps"]]
    except (ValueError, KeyError, TypeError):
        return None  # the bodies say what is wrong with it (the same refusal as POST /plan)


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="fleet.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--mqtt", required=True, metavar="HOST:PORT", help="the broker")
    p.add_argument("--base", default="organbus", help="the bodies' base topic (default organbus)")
    p.add_argument("--plan", metavar="FILE", help="a plan (JSON) to send")
    p.add_argument("--to", metavar="NAME", help="the one body to send it to")
    p.add_argument("--json", action="store_true", help="the list as JSON lines too")
    p.add_argument("--wait", type=float, default=1.5, help="seconds to read the retained state")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for reports")
    args = p.parse_args(argv)
    raw = None
    if args.plan:
        try:
            with open(args.plan, "rb") as f:
                raw = f.read()
        except OSError as e:
            sys.stderr.write("fleet.py: error: --plan %s: %s\n" % (args.plan, e.strerror or e))
            return 2
    host, port = _hostport(args.mqtt)
    try:
        fleet = Fleet(host, port, args.base)
    except OSError as e:
        sys.stderr.write("fleet.py: error: broker %s:%d: %s\n" % (host, port, e.strerror or e))
        return 2
    try:
        time.sleep(args.wait)
        if raw is None:
            for name in sorted(fleet.bodies):
                b = fleet.bodies[name]
                caps = fleet.abilities(name)
                if args.json:
                    item = {"body": name, "availability": b.get("availability")}
                    item.update({"abilities": caps, "diagnostics": b.get("diagnostics")})
                    print(json.dumps(item))
                else:
                    d = b.get("diagnostics") or {}
                    print(
                        "%-16s %-8s %s  (organs online %s, plans run %s, decoder errors %s)"
                        % (name, b.get("availability") or "?", ", ".join(caps) or "-",
                           d.get("organs_online"), d.get("plans_run"), d.get("decoder_errors"))
                    )  # fmt: skip
            if not fleet.bodies:
                print("no bodies under %s/ on %s:%d" % (args.base, host, port))
            return 0
        if args.to:
            names = [args.to]
        else:
            need = _actions(raw)
            names = [
                n for n in fleet.online() if need is None or set(need) <= set(fleet.abilities(n))
            ]
            if not names:
                sys.stderr.write("fleet.py: no online body has every action of the plan\n")
                return 1
        code = 0
        for name, rep in fleet.send(names, raw, args.timeout):
            if rep is None:
                print(json.dumps({"body": name, "status": None, "reply": "no report"}))
                code = 1
            else:
                print(json.dumps({"body": name, "status": rep["status"], "reply": rep["reply"]}))
                if rep["status"] != 200:
                    code = 1
        return code
    finally:
        fleet.close()


if __name__ == "__main__":
    sys.exit(main())
