# Benchmarks on the MicroPython unix port: protocol-core figures plus each area's tools/bench_<area>.py.
#
#   python tools/bench.py [core|master|body|voice|organ|AREA|all]     (default: core)
#
# Human-readable figures go first; the LAST line is one JSON object merging every area's figures.
# CPython orchestrates: the core and every area module run on the unix port (one process per
# area, launched with the project's import path), except an area module that says
# `CPYTHON = True` at top level or imports threading, subprocess, argparse or statistics there
# (a host program), which CPython imports and runs itself. An area module has run() -> dict and prints its own figures. A missing or
# failing area is reported (missing_areas / failed_areas), never faked; the exit status is then 1.
# `micropython tools/bench.py AREA` runs everything in that one process instead.
import sys

import toolpath  # the tree, lib/ and tools/ on sys.path

AREAS = ("core", "master", "body", "voice", "organ")  # `all` also takes any other bench_*.py
_HOST_ONLY = ("threading", "subprocess", "argparse", "statistics")
LINE_RATE = 23040  # two links at 115200 8N1: 2 * 11520 B/s
MP = sys.implementation.name == "micropython"
TOOLS = toolpath.TOOLS


# ---- measurement helpers (unix port)


if MP:
    from time import ticks_diff, ticks_us


class Rand:
    """xorshift32: reproducible streams without the random module."""

    def __init__(self, seed):
        self.x = seed or 1

    def next(self):
        x = self.x
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        self.x = x
        return x

    def below(self, n):
        return self.next() % n

    def bytes(self, n):
        out = bytearray(n)
        for i in range(n):
            out[i] = self.next() & 0xFF
        return out


def _r(x, digits):
    return round(x, digits)


def to_json(v):
    """JSON text with numbers as printed figures: MicroPython's repr(9.38) is 9.380000000000001."""
    if v is None:
        return "null"
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return "null"
        return "%.6g" % v
    if isinstance(v, str):
        import json

        return json.dumps(v)
    if isinstance(v, dict):
        return "{" + ", ".join(to_json(str(k)) + ": " + to_json(v[k]) for k in sorted(v)) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(to_json(x) for x in v) + "]"
    return to_json(str(v))


def best_of(fn, trials):
    """Smallest wall time in microseconds over `trials` calls of fn (the machine is shared)."""
    # nothing but the two clock reads around fn: an import or a helper call in the timed
    # region costs microseconds, which a 100 us run would count as CRC time
    best = None
    for _ in range(trials):
        t0 = ticks_us()
        fn()
        dt = ticks_diff(ticks_us(), t0)
        if best is None or dt < best:
            best = dt
    return max(best, 1)


# ---- CRC


def bench_crc(trials=301):
    import binascii

    from organbus.crc16 import crc16, crc16_pure

    rnd = Rand(2024)
    buf = bytes(rnd.bytes(4096))
    # Short runs, many of them, interleaved: on a shared machine the smallest time of each
    # run is the least disturbed one, and all three methods see the same moments. Every run
    # takes about 100 us: 40 passes of the fast ones; the pure one goes through the buffer
    # in four quarters (chained, crc in -> crc out), each timed on its own, and its time is
    # the sum of the four smallest.
    fast_reps, pure_reps = 40, 1
    quarter = len(buf) // 4
    assert crc16(buf) == crc16_pure(buf), "viper and pure CRC disagree"
    chained = 0xFFFF
    for q in range(4):
        chained = crc16_pure(buf, chained, q * quarter, (q + 1) * quarter)
    assert chained == crc16(buf), "the quarters do not chain to the whole"

    def c_run():
        for _ in range(fast_reps):
            binascii.crc32(buf)

    def viper_run():
        for _ in range(fast_reps):
            crc16(buf)

    pure_quarters = []
    for q in range(4):
        a, b = q * quarter, (q + 1) * quarter
        pure_quarters.append(lambda a=a, b=b: crc16_pure(buf, 0xFFFF, a, b))

    t_c = t_v = None
    t_q = [None] * 4
    for _ in range(trials):
        a, b = best_of(c_run, 1), best_of(viper_run, 1)
        t_c = a if t_c is None else min(t_c, a)
        t_v = b if t_v is None else min(t_v, b)
        for q in range(4):
            c = best_of(pure_quarters[q], 1)
            t_q[q] = c if t_q[q] is None else min(t_q[q], c)
    t_p = t_q[0] + t_q[1] + t_q[2] + t_q[3]
    mb_c = len(buf) * fast_reps / t_c
    mb_v = len(buf) * fast_reps / t_v
    mb_p = len(buf) * pure_reps / t_p
    print("CRC-16/MODBUS over a 4096-byte buffer (best of %d):" % trials)
    print("  viper crc16          %8.1f MB/s" % mb_v)
    print("  C binascii.crc32     %8.1f MB/s" % mb_c)
    print("  pure crc16_pure      %8.2f MB/s" % mb_p)
    return {
        "crc_viper_mb_s": _r(mb_v, 1),
        "crc_c_mb_s": _r(mb_c, 1),
        "crc_pure_mb_s": _r(mb_p, 2),
        "crc_viper_vs_c": _r(mb_v / mb_c, 2),
        "crc_viper_vs_pure": _r(mb_v / mb_p, 1),
    }


# ---- decoder


def build_mix(rnd, cycles):
    """A link's traffic, both directions: per cycle 5 heartbeats, 1 descriptor, 2 spoken
    commands with 10..120 bytes of text, 1 led_blink, 3 COMMAND_RESP, 1 EVENT; then junk
    bytes (random, 0xAA included) worth 5% of the stream between frames."""
    from organbus import command
    from organbus import frame

    desc = bytes.fromhex(
        "074c45445f303031036c65640100010003066c65645f6f6e125475726e20746865206c69676874206f6e"
        "2e00036c65640000000000076c65645f6f6666135475726e20746865206c69676874206f66662e00036c"
        "65640000000000096c65645f626c696e6b22426c696e6b20746865206c696768742061206e756d626572"
        "206f662074696d65732e01036c656400009c400205636f756e74003f80000041a0000000097065726966"
        "6f645f6d730042c8000044fa0000026d73"
    )
    words = (b"light ", b"is ", b"on ", b"hello ", b"the ", b"robot ", b"speaks ", b"now ")
    frames = []
    for _ in range(cycles):
        for _ in range(5):
            frames.append(frame.HEARTBEAT_FRAME)
        frames.append(frame.encode(frame.DESCRIPTOR, desc))
        for _ in range(2):
            text = bytearray()
            want = 10 + rnd.below(111)
            while len(text) < want:
                text.extend(words[rnd.below(len(words))])
            frames.append(
                frame.encode(frame.COMMAND, command.encode_command("speak", (), text[:want]))
            )
        frames.append(frame.encode(frame.COMMAND, command.encode_command("led_blink", (3, 250))))
        for _ in range(3):
            frames.append(frame.RESP_OK_FRAME)
        frames.append(frame.encode(frame.EVENT, command.encode_event("led_blink", 0)))
    # shuffle the cycle order a little so types interleave irregularly
    for i in range(len(frames) - 1, 0, -1):
        j = rnd.below(i + 1)
        frames[i], frames[j] = frames[j], frames[i]
    total = 0
    for f in frames:
        total += len(f)
    junk_total = total * 5 // 95
    stream = bytearray()
    left = junk_total
    for f in frames:
        if left > 0 and rnd.below(4) == 0:
            k = min(left, 1 + rnd.below(24))
            stream.extend(rnd.bytes(k))
            left -= k
        stream.extend(f)
    if left > 0:
        stream.extend(rnd.bytes(left))
    return frames, bytes(stream)


def chunked(rnd, stream, most=128):
    """The stream as UART reads of 1..most bytes."""
    out = []
    i = 0
    while i < len(stream):
        k = 1 + rnd.below(most)
        out.append(stream[i : i + k])
        i += k
    return out


def mix_reads():
    """(frames, stream, reads): the realistic mix of the decoder figures, cut into reads."""
    rnd = Rand(7)
    frames, stream = build_mix(rnd, 60)
    return frames, stream, chunked(rnd, stream)


def feed_pass(dec, reads):
    """One pass of the reads through `dec`, one ms tick apart, then the time rules."""
    now = 0
    for ch in reads:
        dec.feed(ch, now)
        now += 1
    dec.idle(now + 100)


def bench_decoder(trials=41):
    import gc

    from organbus import frame
    import micropython

    frames, stream, chunks = mix_reads()
    got = [0]

    def on_frame(ftype, payload, n):
        got[0] += 1

    dec = frame.Decoder(on_frame)
    feed_pass(dec, chunks)
    if got[0] < len(frames):
        raise AssertionError("decoder lost frames: %d of %d" % (got[0], len(frames)))
    extra = got[0] - len(frames)  # CRC collisions in the junk (counted, not hidden)
    per_run = got[0]

    # Timed in pieces of 16 reads (~1 KB, ~100 us) along each pass, the smallest time of
    # every piece summed: each pass starts from the same empty decoder, so piece k always
    # meets the same state, and a busy moment of the machine spoils one piece, not the pass.
    pieces = [chunks[i : i + 16] for i in range(0, len(chunks), 16)]
    best = [None] * len(pieces)
    for _ in range(trials):
        now = 0
        for k in range(len(pieces)):
            piece = pieces[k]
            t0 = ticks_us()
            for ch in piece:
                dec.feed(ch, now)
                now += 1
            dt = ticks_diff(ticks_us(), t0)
            if best[k] is None or dt < best[k]:
                best[k] = dt
        dec.idle(now + 100)
    t = 0
    for dt in best:
        t += dt
    t = max(t, 1)
    rate = len(stream) / (t / 1e6)

    # steady-state allocation: the whole stream again with the collector off
    gc.collect()
    gc.disable()
    try:
        a = gc.mem_alloc()
        feed_pass(dec, chunks)
        b = gc.mem_alloc()
    finally:
        gc.enable()
    alloc = (b - a) / per_run
    locked = "ok"
    micropython.heap_lock()
    try:
        feed_pass(dec, chunks)
    except MemoryError as e:
        locked = "MemoryError: %s" % e
    finally:
        micropython.heap_unlock()

    print(
        "Decoder over a realistic mix (%d frames, %d bytes, 5%% junk, reads of 1..128 bytes):"
        % (len(frames), len(stream))
    )
    print(
        "  throughput           %8.2f MB/s = %.0f x the two-link line rate of %d B/s"
        % (rate / 1e6, rate / LINE_RATE, LINE_RATE)
    )
    print("  per frame            %8.2f us" % (t / per_run))
    print(
        "  heap per frame       %8.2f bytes (gc.mem_alloc delta); under heap_lock: %s"
        % (alloc, locked)
    )
    if extra:
        print("  CRC collisions in junk: %d extra frame(s)" % extra)
    c = dec.counters()
    return {
        "rx_line_rate_multiple": _r(rate / LINE_RATE, 1),
        "rx_mb_s": _r(rate / 1e6, 2),
        "rx_us_per_frame": _r(t / per_run, 2),
        "rx_alloc_bytes_per_frame": alloc,
        "rx_heap_lock": locked,
        "rx_frames_per_run": per_run,
    }


TARGETS = (
    ("crc_viper_vs_c", ">=", 1.0),
    ("crc_viper_vs_pure", ">=", 100.0),
    ("rx_line_rate_multiple", ">=", 200.0),
    ("rx_alloc_bytes_per_frame", "==", 0),
)


def run_core():
    out = {}
    out.update(bench_crc())
    out.update(bench_decoder())
    ok = True
    print("Targets:")
    for key, op, want in TARGETS:
        v = out[key]
        met = v >= want if op == ">=" else v == want
        ok = ok and met
        print("  %-26s %10s  target %s %s  %s" % (key, v, op, want, "met" if met else "MISSED"))
    out["core_targets_met"] = ok
    return out


def _module_path(area):
    return TOOLS + "/bench_" + area + ".py"


def _module_exists(area):
    import os

    try:
        os.stat(_module_path(area))
        return True
    except OSError:
        return False


def _wants_cpython(area):
    with open(_module_path(area)) as f:
        for line in f:
            if line.startswith("CPYTHON = True"):
                return True
            if line.startswith("import ") or line.startswith("from "):
                name = line.split()[1].split(".")[0].rstrip(",")
                if name in _HOST_ONLY:
                    return True
    return False


def _all_areas():
    import os

    found = []
    for name in os.listdir(TOOLS):
        if name.startswith("bench_") and name.endswith(".py"):
            found.append(name[6:-3])
    rest = sorted(a for a in found if a not in AREAS)
    return AREAS + tuple(rest)


def run_here(area):
    """Run one area in this interpreter; returns its figures (raises on failure)."""
    if area == "core":
        if not MP:
            raise RuntimeError("the core figures are measured on the unix port")
        return run_core()
    if MP and _wants_cpython(area):
        raise RuntimeError("bench_%s.py says CPYTHON = True: run python tools/bench.py" % area)
    mod = __import__("bench_" + area)
    if not hasattr(mod, "run"):
        raise AttributeError("tools/bench_%s.py has no run() -> dict" % area)
    figures = mod.run()
    if not isinstance(figures, dict):
        raise TypeError("bench_%s.run() returned %s, not a dict" % (area, type(figures)))
    return figures


class WorkerFailed(Exception):
    """The unix-port process of an area failed (it printed its own traceback)."""


def run_on_unix_port(area):
    """CPython: run one area in a unix-port process, passing its figures through; returns them."""
    import json
    import os
    import subprocess

    from vbody import launch

    env = dict(os.environ, MICROPYPATH=launch.micropypath(launch.TOOLS, simhw=False))
    cmd = [launch.micropython_exe(), os.path.abspath(__file__), "--one", area]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    last = None
    for line in proc.stdout:
        if last is not None:
            sys.stdout.write(last)
            sys.stdout.flush()
        last = line
    rc = proc.wait()
    if rc != 0 or last is None:
        if last:
            sys.stdout.write(last)
        raise WorkerFailed("the unix-port run of %s exited with %d" % (area, rc))
    return json.loads(last)


def main(argv):
    one = len(argv) > 2 and argv[1] == "--one"
    if one:  # a unix-port worker started by the CPython orchestrator
        area = argv[2]
        try:
            figures = run_here(area)
        except Exception as e:
            from organbus import log

            log.print_exception(e)
            return 1
        print(to_json(figures))
        return 0
    if MP:  # the unix port has no argparse: one optional AREA
        want = argv[1] if len(argv) > 1 else "core"
        if want not in AREAS + ("all",) and not _module_exists(want):
            print("bench: unknown area %r (core, %s, all)" % (want, ", ".join(_all_areas()[1:])))
            return 2
    else:
        import argparse

        names = ("core",) + tuple(_all_areas()[1:]) + ("all",)
        ap = argparse.ArgumentParser(
            prog="bench.py",
            description="Benchmark figures (they print; they are not timed tests). The last "
            "line is one JSON object with every figure.",
        )
        ap.add_argument(
            "area",
            nargs="?",
            default="core",
            choices=names,
            help="what to measure (default core): %s" % ", ".join(names),
        )
        want = ap.parse_args(argv[1:]).area
    areas = _all_areas() if want == "all" else (want,)
    result = {}
    missing = []
    failed = []
    for area in areas:
        print("== %s ==" % area)
        sys.stdout.flush()
        if area != "core" and not _module_exists(area):
            print("  not measured: tools/bench_%s.py does not exist" % area)
            missing.append(area)
            continue
        try:
            if MP or (area != "core" and _wants_cpython(area)):
                figures = run_here(area)
            else:
                figures = run_on_unix_port(area)
        except Exception as e:  # report it, keep the other areas' figures
            if not isinstance(e, WorkerFailed):
                from organbus import log

                log.print_exception(e)
            print("  %s: not measured (%s)" % (area, e))
            failed.append(area)
            continue
        for k in figures:
            if k in result:
                print("  key %r of %s overrides an earlier area's" % (k, area))
            result[k] = figures[k]
    if missing:
        result["missing_areas"] = missing
    if failed:
        result["failed_areas"] = failed
    print(to_json(result))
    return 1 if missing or failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
