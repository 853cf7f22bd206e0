# The command lines of tools/sim.py: the virtual body with its console, and `board ROLE`.
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from vbody import bus, launch
from vbody.body import VirtualBody
from vbody.console import Console
from vbody.proc import BoardProc

USAGE = """organbus simulator.

  tools/sim.py                      master + LED organ + speaker organ on the paced bus, console
  tools/sim.py --plan FILE          the same, runs one plan, prints the report JSON, stops
  tools/sim.py --script FILE        the same, runs console lines from FILE, stops
  tools/sim.py --events             the same, stdout: the master's GET /events as JSON lines
  tools/sim.py --idle FILE          the master runs the idle plan in FILE when nobody sends one
  tools/sim.py --config FILE        the master's /config.json (token, update key, nudges, ...)
  tools/sim.py --mqtt HOST:PORT [--id NAME]  the master joins an MQTT broker (Home Assistant)
  tools/sim.py board ROLE [...]     one board (master, led, speaker) alone, its UARTs on TCP

Type `help` in the console for its commands.
"""


def _check_ota_url(url):
    """--xiaozhi takes an http:// OTA URL on a loopback address (the simulation's rule)."""
    if not url.startswith("http://"):
        raise SystemExit("sim: --xiaozhi %r: expected http://127.0.0.1:PORT/..." % url)
    host = url[7:].split("/", 1)[0].rsplit(":", 1)[0]
    if host not in ("127.0.0.1", "localhost"):
        raise SystemExit("sim: --xiaozhi %r: only loopback addresses are accepted" % url)


def _check_endpoint_url(url):
    """--xiaozhi-endpoint takes a ws:// URL on a loopback address (the simulation's rule)."""
    if not url.startswith("ws://"):
        raise SystemExit(
            "sim: --xiaozhi-endpoint %r: expected ws://127.0.0.1:PORT/...?token=T" % url
        )
    host = url[5:].split("/", 1)[0].split("?", 1)[0].rsplit(":", 1)[0]
    if host not in ("127.0.0.1", "localhost"):
        raise SystemExit("sim: --xiaozhi-endpoint %r: only loopback addresses are accepted" % url)


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
    inputs = {}  # read before anything boots: a missing file is one line, exit status 2
    for flag, path in (("--plan", args.plan), ("--script", args.script)):
        if path:
            try:
                with open(path, "rb") as f:
                    inputs[flag] = f.read()
            except OSError as e:
                sys.stderr.write("sim.py: error: %s %s: %s\n" % (flag, path, e.strerror or e))
                return 2
    if args.xiaozhi:
        if args.master:
            raise SystemExit("sim: --xiaozhi points the master's link: not with an external master")
        _check_ota_url(args.xiaozhi)
    if args.xiaozhi_endpoint:
        if args.master:
            raise SystemExit(
                "sim: --xiaozhi-endpoint is the virtual master's: not with an external master"
            )
        _check_endpoint_url(args.xiaozhi_endpoint)
    master_config = None
    if args.config:
        if args.master:
            raise SystemExit("sim: --config is the virtual master's: not with an external master")
        try:
            master_config, note = board_config(args.config)
        except ValueError as e:
            sys.stderr.write("sim.py: error: --config %s: %s\n" % (args.config, e))
            return 2
        if note:
            sys.stderr.write("sim.py: note: --config %s: %s\n" % (args.config, note))
    if args.id and not args.mqtt:
        raise SystemExit("sim: --id names the body on a broker: give --mqtt HOST:PORT too")
    if args.mqtt:
        if args.master:
            raise SystemExit("sim: --mqtt is the virtual master's: not with an external master")
        try:
            host, port = launch.parse_hostport(args.mqtt, "--mqtt")
        except ValueError as e:
            raise SystemExit("sim: %s" % e)
        master_config = dict(master_config or {})
        mqtt = dict(master_config.get("mqtt") or {})  # --mqtt and --id over the config's
        mqtt.update(
            {"host": host, "port": port, "client_id": args.id or mqtt.get("client_id") or "vbody"}
        )
        master_config["mqtt"] = mqtt
    if args.idle:
        try:
            idle = idle_config(args.idle)
        except ValueError as e:
            sys.stderr.write("sim.py: error: --idle %s: %s\n" % (args.idle, e))
            return 2
        master_config = dict(master_config or {}, **idle)  # --idle over the config's idle
    if args.heap and not args.master:
        note = launch.heap_note("master", args.heap)
        if note:
            sys.stderr.write("sim.py: note: %s\n" % note)
    body = VirtualBody(
        out_dir=args.out,
        external=external,
        heap=args.heap,
        seed=args.seed,
        xiaozhi=args.xiaozhi,
        xiaozhi_endpoint=args.xiaozhi_endpoint,
        master_config=master_config,
        hub_events=True,
    )
    # --plan, --events: stdout carries the report or the stream alone; the commentary, stderr
    quiet = args.plan or args.events
    console = Console(body, as_json=args.json, out=sys.stderr if quiet else None)
    if args.events:
        console_event = body.on_event
        lock = threading.Lock()

        def on_event(ev):
            if ev.get("src") == "hub":
                item = {"event": ev["event"]}
                item.update({k: v for k, v in ev.items() if k not in ("src", "t", "event")})
                with lock:
                    sys.stdout.write(json.dumps(item) + "\n")
                    sys.stdout.flush()
            console_event(ev)

        body.on_event = on_event

    def on_signal(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    code = 0
    try:
        try:
            body.start()
        except (OSError, ValueError) as e:  # an address in use, code that does not compile
            sys.stderr.write("sim.py: error: %s\n" % e)
            code = 2
            return code
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
        if body.http and not body.wait_http(15) and not body.failure():
            console.emit("error", "the master did not open its HTTP port %s:%d" % body.http)
        if args.plan or args.script:
            console.wait(["menu", str(args.ready_timeout)], {})
        if body.failure():  # a board died at boot: say which and why, in one line, and stop
            console.emit("error", "sim.py: error: " + body.failure(), error=body.failure())
            code = 1
        elif args.plan:
            status, obj = console.run_plan(inputs["--plan"])
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()
            code = 0 if status == 200 else 1
        elif args.script:
            text = inputs["--script"].decode("utf-8", "replace")
            for line in console.read_lines(text.splitlines(True)):
                console.emit("input", "> " + line.strip(), line=line.strip())
                if not console.handle(line):
                    break
        else:
            console.emit("hint", "type help for commands; Ctrl-C or quit stops everything")
            interactive = sys.stdin.isatty()
            if not interactive:  # piped lines wait for the organs as --script's do
                console.wait(["menu", str(args.ready_timeout)], {})

            def lines():
                while True:
                    try:
                        yield input("") + "\n" if interactive else next(sys.stdin)
                    except (EOFError, StopIteration):
                        return

            for line in console.read_lines(lines()):
                if not console.handle(line):
                    break
            else:
                if args.events:  # stdin ended (not a terminal): the stream goes on until Ctrl-C
                    while not body.failure():
                        time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        body.stop()
        console.settle()
        console.emit("stop", "stopped: every process the simulator started is gone")
    return code


def board_config(path):
    """(config, note) from FILE, the master's /config.json as on a board (token, update key,
    nudge_url, idle, xiaozhi, mqtt: docs/sim.md); the master checks its sections itself and says
    what it refuses on its event log. ValueError for a FILE that is no JSON object, or a URL
    the master would reach beyond the loopback (the simulation's rule); the note names what
    only a board uses."""
    try:
        with open(path, "rb") as f:
            obj = json.loads(f.read())
    except OSError as e:
        raise ValueError(e.strerror or str(e))
    except ValueError as e:
        raise ValueError("not JSON: %s" % e)
    if not isinstance(obj, dict):
        raise ValueError("expected a JSON object, the board's /config.json")
    xz = obj.get("xiaozhi")
    for what, url in (
        ("nudge_url", obj.get("nudge_url")),
        ("xiaozhi.ota_url", xz.get("ota_url") if isinstance(xz, dict) else None),
        ("xiaozhi.mcp_endpoint", xz.get("mcp_endpoint") if isinstance(xz, dict) else None),
    ):
        if isinstance(url, str) and (url.startswith("http://") or url.startswith("ws://")):
            rest = url.split("://", 1)[1]
            host = rest.split("/", 1)[0].split("?", 1)[0].rsplit(":", 1)[0]
            if host not in ("127.0.0.1", "localhost"):
                raise ValueError("%s %r: only loopback addresses are accepted" % (what, url))
    mq = obj.get("mqtt")
    mq_host = mq.get("host") if isinstance(mq, dict) else None
    if isinstance(mq_host, str) and mq_host not in ("127.0.0.1", "localhost"):
        raise ValueError("mqtt.host %r: only loopback addresses are accepted" % mq_host)
    board_only = [k for k in ("wifi", "http_port") if k in obj]
    note = None
    if board_only:
        note = "%s: a board's only (the virtual master serves HTTP on 127.0.0.1)" % (
            ", ".join(board_only)
        )
    return obj, note


def idle_config(path):
    """The master config's idle section from FILE: {"idle": PLAN, "idle_after_s": N}, or a
    plan alone (idle_after_s 30). The master checks the plan itself (and logs idle_refused)."""
    try:
        with open(path, "rb") as f:
            obj = json.loads(f.read())
    except OSError as e:
        raise ValueError(e.strerror or str(e))
    except ValueError as e:
        raise ValueError("not JSON: %s" % e)
    if not isinstance(obj, dict):
        raise ValueError('expected a JSON object (a plan, or {"idle": PLAN, "idle_after_s": N})')
    if "steps" in obj:
        obj = {"idle": obj, "idle_after_s": 30}
    if not isinstance(obj.get("idle"), dict):
        raise ValueError('expected "idle": a plan object (or the plan itself)')
    after = obj.get("idle_after_s", 30)
    if not isinstance(after, int) or isinstance(after, bool) or after < 1:
        raise ValueError("idle_after_s must be a whole number of seconds, at least 1")
    out = dict(obj)
    out["idle_after_s"] = after
    return out


def _check_free(what, addr):
    """OSError naming the address when something already listens on it."""
    s = socket.socket()
    s.setsockopt(
        socket.SOL_SOCKET, socket.SO_REUSEADDR, 1
    )  # as the listener will: TIME_WAIT is free
    try:
        s.bind(addr)
    except OSError as e:
        raise OSError(e.errno, "%s: %s:%d is in use (%s)" % (what, addr[0], addr[1], e.strerror))
    finally:
        s.close()


def run_board(argv):
    p = argparse.ArgumentParser(
        prog="sim.py board",
        description="Run one board's own main.py on the MicroPython unix port with simulated "
        "hardware; each --uart joins a board UART to a loopback TCP address through a paced "
        "115200 8N1 cable.",
    )
    p.add_argument("role", choices=sorted(launch.BOARDS))
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

    have = launch.board_uarts(args.role)
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
        http = launch.parse_hostport(args.http) if args.http else None
        if args.heap:
            launch.heap_bytes(args.heap)
        if (args.http or args.console) and args.role != "master":
            raise ValueError("--http and --console belong to the master board")
    except ValueError as e:
        p.error(str(e))

    out = os.path.abspath(args.out or os.path.join(launch.ROOT, "sim-out", "board-" + args.role))
    board_specs = {}
    try:
        # every address this board listens on is free, or one line says which is not
        listens = [("--http", http)] if http else []
        if args.no_pace:
            for n, spec in uarts.items():
                mode, host, port = bus.parse_spec(spec)
                if mode == "listen":
                    listens.append(("--uart %d" % n, (host, port)))
        for what, addr in listens:
            _check_free(what, addr)
        for n, spec in uarts.items():
            if args.no_pace:
                board_specs[n] = spec
            else:
                # the address is another simulator or implementation: the wire is plugged in
                # before either side runs, so bytes for it wait for its first connection (bus.End)
                mode, host, port = bus.parse_spec(spec)
                if mode == "listen":
                    _check_free("--uart %d=%s" % (n, spec), (host, port))
                c = bus.Cable("uart%d" % n, "listen:127.0.0.1:0", spec, hold_first="b").start()
                cables.append(c)
                board_specs[n] = c.a.peer_spec
    except OSError as e:
        for c in cables:
            c.close()
        sys.stderr.write("sim.py board: error: %s\n" % (e.strerror or e))
        return 2
    log = open(args.log, "a") if args.log else None
    log_lock = threading.Lock()
    done = threading.Event()

    def on_event(role, obj):
        if obj.get("event") == "exit":
            done.set()
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
        stdin=sys.stdin if args.console else subprocess.DEVNULL,  # the link: this process's stdin
        stdout_passthrough=True,
        pinlog=os.path.abspath(args.log) if args.log else None,
        wav=os.path.abspath(args.wav) if args.wav else None,
    )

    def on_signal(signum, frame):
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    msg = "sim: %s board (boards/%s/main.py)" % (args.role, launch.BOARDS[args.role])
    for n, spec in uarts.items():
        msg += ", UART%d <-> %s%s" % (n, spec, "" if args.no_pace else " (paced 115200)")
    if http:
        msg += ", HTTP on http://%s:%d" % http
    note = launch.heap_note(args.role, args.heap) if args.heap else None
    if note:
        sys.stderr.write("sim.py board: note: %s\n" % note)
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
        description=USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--plan", help="run the plan in FILE, print the report JSON, stop")
    p.add_argument("--script", help="run the console lines in FILE, stop")
    p.add_argument("--json", action="store_true", help="every output line is a JSON object")
    p.add_argument(
        "--events",
        action="store_true",
        help="print the master's GET /events stream on stdout as JSON lines",
    )
    p.add_argument(
        "--idle",
        metavar="FILE",
        help="the master's idle plan (docs/links.md: the local loop), e.g. "
        "boards/c6_master/idle.example.json",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="the master's /config.json, as on a board: http.token, ota.key, nudge_url, idle, "
        "xiaozhi (docs/sim.md); --idle and --xiaozhi go over it",
    )
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
    p.add_argument(
        "--xiaozhi-endpoint",
        metavar="URL",
        help="serve the master's tools to this xiaozhi MCP endpoint (relay), ws://...?token=T "
        "(tools/xiaozhi_server.py --relay)",
    )
    p.add_argument(
        "--mqtt",
        metavar="HOST:PORT",
        help="the master joins this MQTT broker (loopback): Home Assistant discovery, its menu, "
        "plans and events (docs/links.md MQTT; tools/fleet.py)",
    )
    p.add_argument(
        "--id",
        metavar="NAME",
        help="with --mqtt: the body's name on the broker (its client id and topics; default "
        "vbody); several virtual bodies share a broker under different names",
    )
    p.add_argument("--out", help="folder for logs and audio (default sim-out/<time>-<pid>)")
    p.add_argument(
        "--ready-timeout",
        type=float,
        default=15.0,
        help="seconds --plan, --script and piped stdin wait for the menu (default 15)",
    )
    args = p.parse_args(argv)
    try:
        for key in ("led", "speaker"):
            if getattr(args, key):
                bus.parse_spec(getattr(args, key), "--" + key)
        if args.heap:
            launch.heap_bytes(args.heap)
    except ValueError as e:
        p.error(str(e))
    return run_body(args)
