# The virtual body's console lines: what an event, the status, the menu and the bus counters read as.
import json

HUB_LOGGED = ("registered", "refused", "offline", "duplicate")  # the event log prints these


def describe_hub(ev):
    """One console line for a GET /events item (the body's hub): steps, plans, organ EVENTs."""
    name = ev.get("event")
    port = ev.get("port")
    if name == "step":
        what = "plan %s: %s (%s) %s" % (ev.get("plan"), ev.get("action"), ev.get("task_id"),
                                        ev.get("status"))  # fmt: skip
        if port is not None and ev.get("status") == "sent":
            what += " on UART%s" % port
        if ev.get("ms") is not None and ev.get("status") != "running":
            what += " after %s ms" % ev["ms"]
        if ev.get("reason"):
            what += ": " + ev["reason"]
        return what
    if name == "plan":
        bad = [s for s in ev.get("steps") or [] if s.get("status") not in ("done", "started")]
        if ev.get("ok"):
            return "plan %s finished: ok" % ev.get("plan")
        return "plan %s finished: failed (%s)" % (
            ev.get("plan"),
            ", ".join("%s %s" % (s.get("action"), s.get("status")) for s in bad),
        )
    if name == "event":
        how = "completed" if ev.get("status") == 0 else "stopped early or failed"
        return "UART%s EVENT %s: %s" % (port, ev.get("name"), how)
    if name == "menu":
        parts = []
        if ev.get("added"):
            parts.append("+" + ", +".join(ev["added"]))
        if ev.get("removed"):
            parts.append("-" + ", -".join(ev["removed"]))
        return "menu v%s: %s" % (ev.get("version"), " ".join(parts) or "unchanged")
    if name == "rejected":
        return "plan refused: %s" % "; ".join(ev.get("problems") or [])
    if name == "decoder":
        rest = {k: v for k, v in ev.items() if k not in ("src", "t", "at", "event", "port",
                                                        "t_ms")}  # fmt: skip
        return "UART%s decoder errors: %s" % (port, json.dumps(rest))
    if name == "lost":
        return "hub: %s events lost (this console read too slowly)" % ev.get("count")
    rest = {k: v for k, v in ev.items() if k not in ("src", "t", "at", "event")}
    return "hub %s %s" % (name, json.dumps(rest))


def describe(ev):
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
        heap = ""
        if ev.get("heap"):
            data = ev.get("data") or ev["heap"] - ev["code"]
            heap = (
                ", heap %.1f KB: %.1f KB for data + %.1f KB of loaded code + %.1f KB"
                % (
                    ev["heap"] / 1024.0,
                    data / 1024.0,
                    ev["code"] / 1024.0,
                    (ev["heap"] - data - ev["code"]) / 1024.0,
                )
                + " of GC tables and rounding"
            )
        return "%s process started (pid %s%s)" % (src, ev.get("pid"), heap)
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


def describe_status(st):
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
            lines.append("        decoder: " + " ".join("%s %s" % kv for kv in sorted(c.items())))
        if "plans" in st:
            lines.append("  plans: " + " ".join("%s %s" % kv for kv in sorted(st["plans"].items())))
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


def bus_text(c):
    """The bus counters of every cable, as the console prints them (`bus`, `status`)."""
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
    return "\n".join(lines)


def menu_text(m, stamp):
    """The live menu, one line an ability, under `stamp` (when it was read)."""
    lines = ["%s menu (%d abilities):" % (stamp, len(m.get("capabilities", [])))]
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
    return "\n".join(lines)
