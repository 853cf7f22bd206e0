# Master benchmarks: overhead per step, heap per heartbeat, lifecycle + 16-step plan in a 64 KB heap.
#
# `run()` (CPython) returns a dict of figures; it runs the measuring half of this file on the
# MicroPython unix port (default heap, then -X heapsize=64k) and the whole virtual body with
# `tools/sim.py --heap 64k`. `python tools/bench_master.py` prints the figures.
import json
import os
import sys

MP = sys.implementation.name == "micropython"
ROUNDS = 20


def _plan16(speak=True):
    steps = []
    for i in range(16):
        if i % 4 == 3:
            a, p = ("speak", {"text": "Step %d." % i}) if speak else ("chime", {})
        elif i % 4 == 1:
            a, p = "led_blink", {"count": 2, "period_ms": 100}
        else:
            a, p = ("led_on" if i % 2 == 0 else "led_off"), {}
        dep = ["t%d" % (i - 1)] if i else []
        steps.append(
            {"task_id": "t%d" % i, "action": a, "params": p, "priority": 5, "depends_on": dep}
        )
    return {"heard_req": 0, "steps": steps, "can_execute": True, "missing": [], "response": ""}


# -- the half that runs on the unix port -----------------------------------------------------


def _ticks():
    import time

    return time.ticks_us()


def _stream16():
    # the virtual body's round-trip plan (tools/bench_body.py): 16 independent led_on/led_off
    steps = [
        {
            "task_id": "t%d" % i,
            "action": "led_on" if i % 2 == 0 else "led_off",
            "params": {},
            "priority": 5,
            "depends_on": [],
        }
        for i in range(16)
    ]
    return {"heard_req": 0, "steps": steps, "can_execute": True, "missing": [], "response": ""}


def registered_body():
    """(body, wire, feeder, clock cell): the sans-IO master with the LED on port 0 and the
    speaker on port 1 registered, its clock now[0] moved by hand."""
    from organbus import frame
    import master_fakes as mf
    from master.bus.body import build

    out = _Wire()
    now = [0]
    body = build({0: _Out(out, 0), 1: _Out(out, 1)}, lambda: now[0])
    reg = _Feeder(body)
    reg.feed(0, frame.encode(frame.DESCRIPTOR, mf.encode_descriptor(mf.led())), 0)
    reg.feed(1, frame.encode(frame.DESCRIPTOR, mf.encode_descriptor(mf.speaker())), 0)
    return body, out, reg, now


def _overhead():
    # Registry + Scheduler + Body with an instant organ: the time the master itself spends.
    body, out, reg, now = registered_body()
    raw = json.dumps(_plan16())
    first, per_step, heap_step = _steps(body, reg, out, raw, now)
    _, stream_step, stream_heap = _steps(body, reg, out, json.dumps(_stream16()), now)
    return {
        "accept_to_first_command_us_median": _median(first),
        "resp_to_next_command_us_median": _median(per_step),
        "resp_to_next_command_heap_bytes_median": _median(heap_step),
        "stream_resp_to_next_command_us_median": _median(stream_step),
        "stream_resp_to_next_command_heap_bytes_median": _median(stream_heap),
        "plan_bytes": len(raw),
    }


class _Wire:
    # The frames the ports handed over, oldest first, in preallocated lists: the real UART
    # edge's send allocates nothing (master/edge.py), so neither does the rig's tx, and a
    # step's count or heap figure is the master's own. Frames are taken (pop) soon after
    # they are put: the lists start over whenever every frame was taken.
    def __init__(self, size=64):
        self.ports = [0] * size
        self.frames = [None] * size
        self.start = 0
        self.end = 0

    def put(self, port, f):
        i = self.end  # an IndexError past `size` frames not taken
        self.ports[i] = port
        self.frames[i] = f
        self.end = i + 1

    def pop(self, _first=0):
        """(port, frame) of the oldest frame; IndexError when there is none."""
        i = self.start
        if i >= self.end:
            raise IndexError("bench wire: no frame")
        f = self.frames[i]
        self.frames[i] = None
        if i + 1 == self.end:
            self.start = self.end = 0
        else:
            self.start = i + 1
        return self.ports[i], f

    def clear(self):
        for i in range(self.start, self.end):
            self.frames[i] = None
        self.start = self.end = 0

    def __len__(self):
        return self.end - self.start


class _Out:
    # a port's tx for the overhead figures: frames onto the wire as (port, frame)
    def __init__(self, out, port):
        self.out = out
        self.port = port

    def send(self, f):
        self.out.put(self.port, f)

    def command(self, f):
        # As the real edge's command (master/edge.py): one Python call, its queue written
        # inline (there the driver's write with nothing queued, here _Wire.put's body).
        w = self.out
        i = w.end  # an IndexError past the wire's size, as put
        w.ports[i] = self.port
        w.frames[i] = f
        w.end = i + 1

    def unread(self):
        return False


class _Feeder:
    # bytes into the body's ports by port number: feed(port)(data, now) is the Port's own feed
    def __init__(self, body):
        self.feeds = {}
        for p in body.ports:
            self.feeds[p.index] = p.feed

    def feed(self, port, data, now):
        self.feeds[port](data, now)


def _median(xs):
    xs.sort()
    return xs[len(xs) // 2]


def _steps(body, reg, out, raw, now):
    # ROUNDS runs of the plan `raw` against instant organs: submit times, and per COMMAND_RESP
    # the time and the bytes allocated (GC off) until the next COMMAND is handed to the link.
    import gc

    from organbus import frame
    import master_fakes as mf

    feeds = reg.feeds  # the measured call is the Port's own feed, as Registry.feed was
    ev_cache = {}
    first = []
    per_step = []
    heap_step = []
    for _ in range(ROUNDS):
        out.clear()
        gc.collect()
        t0 = _ticks()
        kind, run = body.submit(raw)
        t1 = _ticks()
        first.append(t1 - t0)
        assert kind == "accepted", run
        while not run.finished:
            port, f = out.pop(0)
            if f[2] != frame.COMMAND:
                continue
            name = str(bytes(f[6 : 6 + f[5]]), "utf-8")
            gc.disable()
            a = gc.mem_alloc()
            t0 = _ticks()
            feeds[port](frame.RESP_OK_FRAME, now[0])
            t1 = _ticks()
            heap_step.append(gc.mem_alloc() - a)
            gc.enable()
            if name in ("led_blink", "speak", "chime"):
                ev = ev_cache.get(name)
                if ev is None:
                    ev = ev_cache[name] = frame.encode(
                        frame.EVENT, mf.command.encode_event(name, 0)
                    )
                reg.feed(port, ev, now[0])
            per_step.append(t1 - t0)
        assert run.report()["ok"], run.report()
    return first, per_step, heap_step


def _heap_per_heartbeat():
    import gc

    from organbus import frame
    import master_fakes as mf

    rig = mf.standard_rig(record=False)
    rig.organs[0].alive = False  # the ACKs go nowhere: only the master's own heap is counted
    reg = _Feeder(rig.body)
    hb = frame.HEARTBEAT_FRAME
    desc = frame.encode(frame.DESCRIPTOR, rig.organs[0].payload)
    n = 1000
    reg.feed(0, hb, rig.now)
    gc.collect()
    gc.disable()
    a = gc.mem_alloc()
    for i in range(n):
        reg.feed(0, hb, rig.now + i)
    b = gc.mem_alloc()
    sink = []
    c = gc.mem_alloc()
    for i in range(100):
        reg.feed(0, desc, rig.now + n + i)
    d = gc.mem_alloc()
    gc.enable()
    del sink
    return {
        "heap_bytes_per_heartbeat": (b - a) / n,
        "heap_bytes_per_repeated_descriptor": (d - c) / 100,
    }


def _lifecycle_64k():
    # The whole sans-IO master with two fake organs: boot, register, a 16-step plan, offline.
    # `base` is the heap held by loaded code (frozen in flash on a board, so not counted there).
    import gc

    import master_fakes as mf

    gc.collect()
    base = gc.mem_alloc()
    rig = mf.standard_rig(record=False)
    rig.organs[0].event_ms = 50
    rig.organs[1].event_ms = 50
    gc.collect()
    registered = gc.mem_alloc() - base
    rig.body.menu()
    gc.collect()
    with_menu = gc.mem_alloc() - base
    peak = 0
    kind, run = rig.body.submit(json.dumps(_plan16()))
    k = 0
    while not run.finished:
        rig.advance(10)
        k += 1
        if k % 10 == 0:
            gc.collect()
            peak = max(peak, gc.mem_alloc() - base)
    report = run.report()
    rig.organs[0].alive = False
    rig.advance(15100, 50)
    offline = [e for e in rig.events if e[0] == "offline"]
    gc.collect()
    return {
        "ok": report["ok"],
        "steps_done": len([s for s in report["steps"] if s["status"] == "done"]),
        "offline_events": len(offline),
        "code_heap_bytes": base,
        "live_after_registration_bytes": registered,
        "live_with_menu_bytes": with_menu,
        "live_peak_during_plan_bytes": peak,
        "live_after_offline_bytes": gc.mem_alloc() - base,
    }


def _mp_link(n):
    # The asyncio edge on the unix port: a simulated UART (tools/simhw) fed by the CPython
    # side with one DESCRIPTOR, then n HEARTBEATs; heap allocated per heartbeat, GC off.
    import asyncio
    import gc

    import machine

    from master import app

    b, edges = app.build({0: machine.UART(0, rxbuf=1024)}, emit=None)
    app.start(b, edges)
    slot = b.registry.slot(0)

    async def main():
        p = b.port(0)
        while not slot.online:
            await asyncio.sleep_ms(5)
        print("READY")
        await asyncio.sleep_ms(100)
        dec = p.decoder
        f0 = dec.frames
        gc.collect()
        gc.disable()
        a = gc.mem_alloc()
        t0 = time_ms()
        while dec.frames < f0 + n:
            await asyncio.sleep_ms(20)
        used = gc.mem_alloc() - a
        took = time_ms() - t0
        gc.enable()
        print(
            json.dumps(
                {
                    "link_heap_bytes_per_frame": used / n,
                    "link_frames": n,
                    "link_acks_sent": slot.acks,
                    "link_wall_ms": took,
                }
            )
        )

    asyncio.run(main())


def time_ms():
    import time

    return time.ticks_ms()


def _mp_main(which):
    import gc

    gc.collect()
    from organbus import (
        frame,
    )  # noqa: F401  (its 4 KB CRC table first, while the heap is unfragmented)

    if which == "overhead":
        r = _overhead()
        r.update(_heap_per_heartbeat())
    else:
        r = _lifecycle_64k()
    print(json.dumps(r))


# -- CPython side ----------------------------------------------------------------------------


def _unix_port(which, heapsize=None, mpy=None):
    import subprocess

    import toolpath  # the tree, lib/ and tools/ on sys.path

    here, root = toolpath.TOOLS, toolpath.ROOT
    from vbody import launch

    args = ["tools/bench_master.py", which]
    path = launch.micropypath(here, simhw=False)
    if mpy:
        # The port puts "" (the cwd, the repo root) first on sys.path: master/ would load from
        # source there, compiled in the measured heap and fragmenting it, not from the .mpy.
        args = [
            "-c",
            "import sys\nif '' in sys.path: sys.path.remove('')\n"
            "import bench_master\nbench_master._mp_main(%r)" % which,
        ]
        path = ":".join([".frozen", mpy + "/lib", mpy, mpy + "/tools"])  # asyncio is frozen
    cmd = [launch.micropython_exe()] + (["-X", "heapsize=%s" % heapsize] if heapsize else [])
    r = subprocess.run(
        cmd + args,
        env=dict(os.environ, MICROPYPATH=path),
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        return {"error": (r.stdout + r.stderr)[-600:]}
    return json.loads(lines[-1])


def _link_heap(n=300):
    import socket
    import subprocess
    import time

    import toolpath  # the tree, lib/ and tools/ on sys.path

    here, root = toolpath.TOOLS, toolpath.ROOT
    from vbody import launch

    from organbus import frame
    import master_fakes as mf

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    env = launch.sim_env({0: "connect:127.0.0.1:%d" % port}, path=launch.micropypath(here))
    p = subprocess.Popen(
        [launch.micropython_exe(), "-c", "import bench_master; bench_master._mp_link(%d)" % n],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        srv.settimeout(10)
        conn, _ = srv.accept()
        conn.sendall(frame.encode(frame.DESCRIPTOR, mf.encode_descriptor(mf.led())))
        line = p.stdout.readline()
        if "READY" not in line:
            return {"error": line + p.stdout.read()[-400:]}
        time.sleep(0.3)
        desc = frame.encode(frame.DESCRIPTOR, mf.encode_descriptor(mf.led()))
        for i in range(n):
            # the organ's steady state: HEARTBEATs and, every fifth frame here, its DESCRIPTOR
            conn.sendall(desc if i % 5 == 4 else frame.HEARTBEAT_FRAME)
            time.sleep(0.003)
        out = p.communicate(timeout=30)[0]
        conn.close()
    finally:
        srv.close()
        if p.poll() is None:
            p.kill()
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": out[-400:]}


def _precompiled(tmp):
    """The master's modules as .mpy for the unix port (the board has them frozen)."""
    import glob
    import platform
    import subprocess

    arch = {"x86_64": "x64", "AMD64": "x64", "aarch64": "arm64"}.get(platform.machine())
    if arch is None:
        return None
    import toolpath  # the tree, lib/ and tools/ on sys.path

    root = toolpath.ROOT
    from vbody.launch import mpy_cross_exe

    files = glob.glob(os.path.join(root, "lib", "organbus", "*.py"))
    found = glob.glob(os.path.join(root, "master", "**", "*.py"), recursive=True)
    files += [f for f in found if not f.endswith("manifest.py")]  # the rooms; not build scripts
    files += [
        os.path.join(root, "tools", "master_fakes.py"),
        os.path.abspath(__file__),
    ]
    for f in files:
        rel = os.path.relpath(f, root)
        out = os.path.join(tmp, rel[:-3] + ".mpy")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        r = subprocess.run([mpy_cross_exe(), "-march=" + arch, "-o", out, f], capture_output=True)
        if r.returncode:
            return None
    return tmp


def _heap_64k():
    # Loaded code lives in the unix port's heap (and takes 64-bit pointers); on the board it is
    # frozen in flash. So: measure the code, then give the port 64 KB on top of it.
    import tempfile

    from vbody import launch

    with tempfile.TemporaryDirectory() as tmp:
        mpy = _precompiled(tmp)
        free = _unix_port("lifecycle", mpy=mpy)
        if "error" in free:
            return free
        code = free["code_heap_bytes"]
        heap = 65536 + launch.code_share(code)  # as tools/sim.py --heap 64k (docs/sim.md)
        tight = _unix_port("lifecycle", heapsize=str(heap), mpy=mpy)
    tight["heapsize"] = heap
    tight["heapsize_note"] = (
        "64 KB plus the loaded code (%d bytes on the 64-bit unix port) and its GC tables" % code
    )
    return tight


def _sim_64k():
    # The real processes: master and both organs each in a 64 KB heap, a 16-step plan.
    import subprocess
    import tempfile
    import time

    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "plan16.json")
        with open(path, "w") as f:
            json.dump(_plan16(speak=False), f)
        t0 = time.monotonic()
        r = subprocess.run(
            [
                sys.executable,
                os.path.join(here, "sim.py"),
                "--heap",
                "64k",
                "--plan",
                path,
                "--out",
                os.path.join(tmp, "out"),
                "--ready-timeout",
                "10",
            ],
            capture_output=True,
            text=True,
            timeout=240,
        )
        took = time.monotonic() - t0
    report = refused = None
    for ln in r.stdout.splitlines():
        try:
            obj = json.loads(ln)
        except ValueError:
            continue
        if isinstance(obj, dict) and "steps" in obj and "ok" in obj:
            report = obj
        elif isinstance(obj, dict) and "error" in obj:  # the plan refused (a 503 short of memory)
            refused = obj["error"]
    if report is None and refused:
        return {"error": "plan refused", "why": refused}
    if report is None:
        text = r.stdout + r.stderr
        short = [
            b
            for b in ("master", "led", "speaker")
            if '"src": "%s", "line": "MemoryError' % b in text
        ]
        if short:
            why = "MemoryError while importing its code in: " + ", ".join(short)
        else:
            why = text[-300:]
        return {"error": "no report", "why": why}
    return {
        "ok": report["ok"],
        "statuses": sorted(set(s["status"] for s in report["steps"])),
        "steps": len(report["steps"]),
        "wall_s": round(took, 1),
    }


def _flat(prefix, d, out):
    for k in d:
        v = d[k]
        if isinstance(v, dict):
            _flat(prefix + k + "_", v, out)
        else:
            out[prefix + k] = v
    return out


def _processes():
    # The figures that need other processes or sockets (CPython drives them).
    out = {}
    _flat("master_", _link_heap(), out)
    _flat("master_64k_sans_io_", _heap_64k(), out)
    _flat("master_64k_virtual_body_", _sim_64k(), out)
    return out


def _run_mp():
    # Called by tools/bench.py on the unix port: in-process figures here, the rest through the
    # CPython half of this file.
    import os
    import time

    tools = __file__.rsplit("/", 1)[0] if "/" in __file__ else "."
    root = tools.rsplit("/", 1)[0] if "/" in tools else ".."
    out = {}
    _flat("master_", _overhead(), out)
    _flat("master_", _heap_per_heartbeat(), out)
    py = root + "/.venv/bin/python"
    try:
        os.stat(py)
    except OSError:
        py = "python3"
    tmp = "/tmp/organbus-bench-master-%d.json" % time.ticks_ms()
    rc = os.system("%s %s/bench_master.py --processes > %s" % (py, tools, tmp))
    try:
        with open(tmp) as f:
            out.update(json.loads(f.read().strip().splitlines()[-1]))
        os.remove(tmp)
    except (OSError, ValueError, IndexError):
        out["master_processes"] = "not measured (CPython half exited %r)" % rc
    for k in sorted(out):
        print("  %-52s %s" % (k, out[k]))
    return out


def run():
    """Figures as one flat dict (keys start with master_); prints them too."""
    if MP:
        return _run_mp()
    out = {}
    _flat("master_", _unix_port("overhead"), out)
    out.update(_processes())
    for k in sorted(out):
        print("  %-52s %s" % (k, out[k]))
    return out


if __name__ == "__main__":
    if MP:
        _mp_main(sys.argv[1] if len(sys.argv) > 1 else "overhead")
    elif "--processes" in sys.argv:
        print(json.dumps(_processes()))
    else:
        print(json.dumps(run()))
