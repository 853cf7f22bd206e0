# The C6 budget: instruction counts of the hot paths on the RV32IMC image under QEMU -icount, as C6 time.
"""python tools/bench_rv32.py [PART ...]   (or: python tools/bench.py rv32)

Runs tools/rv32/guest/budget.py on the RV32 image (tools/rv32/run.py: the tree this file sits in,
compiled with mpy-cross -march=rv32imc) and converts its exact instruction counts to ESP32-C6
time at 160 MHz for a cycles-per-instruction of 1.0 and a conservative 2.0 (flash-cache misses,
the interpreter's loads). The targets hold at CPI 2.0. The last line is one JSON object.
PART: crc decoder descriptor organ_command scheduler links voice (default: all).
"""

import importlib.util
import json
import os
import sys

CPYTHON = True  # a host program: tools/bench.py runs it on CPython
TOOLS = os.path.dirname(os.path.abspath(__file__))
MHZ = 160.0
CPIS = (1.0, 2.0)
PARTS = ("crc", "decoder", "descriptor", "organ_command", "scheduler", "links", "voice")
LINE_RATE = 23040  # two links at 115200 8N1: 2 * 11520 B/s
AUDIO_RATE = 11025


def _runner():
    spec = importlib.util.spec_from_file_location(
        "organbus_rv32_run", os.path.join(TOOLS, "rv32", "run.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def measure(parts=()):
    """The guest's counts (a dict); raises RuntimeError with the reason when the image cannot run."""
    rv = _runner()
    why = rv.unavailable(tests=False)
    if why:
        raise RuntimeError("rv32 budget not measured: " + why)
    stage = rv.Stage(os.path.dirname(TOOLS))
    # frozen modules first, as on a board, where a build freezes the core and the master
    # (on the test image only asyncio and unittest are frozen: the order changes nothing there)
    path = [p for p in rv.sys_path() if p != ".frozen"]
    path.insert(0, ".frozen")
    out = {"image": rv.image_note()}
    for part in parts or PARTS:
        if part not in PARTS:
            raise RuntimeError("unknown part %r (%s)" % (part, " ".join(PARTS)))
        # one boot per part: each count starts from a fresh heap, whatever ran before
        body = "import budget\nbudget.main([%r])" % part
        r = rv.run(stage, body, path, timeout=900)
        if r.rc != 0:
            raise RuntimeError(
                "the %s budget run on RV32 failed (status %d):\n%s%s" % (part, r.rc, r.out, r.err)
            )
        lines = [ln for ln in r.out.splitlines() if ln.startswith("BUDGET ")]
        if not lines:
            raise RuntimeError("the %s budget run printed no BUDGET line:\n%s" % (part, r.out))
        out.update(json.loads(lines[-1][7:]))
    return out


def _us(insn, cpi):
    return insn * cpi / MHZ


def _time(us):
    if us < 1:
        return "%.3f us" % us
    if us < 10000:
        return "%.0f us" % us
    return "%.1f ms" % (us / 1000)


def figures(c):
    """Counts -> C6 figures: (rows for the table, the JSON dict)."""
    rows = []
    out = {}
    for k in sorted(c):
        out["rv32_" + k] = c[k]

    def row(label, insn, fmt, key, target=None, op=None):
        cells = []
        for cpi in CPIS:
            v = fmt(insn, cpi)
            cells.append(v)
        rows.append((label, insn, cells, target, op, key))

    if "crc_insn_per_byte" in c:
        out["c6_crc_insn_per_byte"] = round(c["crc_insn_per_byte"], 2)
        row(
            "CRC-16 per byte (viper)",
            c["crc_insn_per_byte"],
            lambda n, cpi: _time(_us(n, cpi)),
            None,
        )
    if "rx_insn_per_byte" in c:
        for cpi in CPIS:
            mult = MHZ * 1e6 / (c["rx_insn_per_byte"] * cpi) / LINE_RATE
            out["c6_rx_line_rate_multiple_cpi%g" % cpi] = round(mult, 1)
        out["c6_rx_line_rate_multiple"] = out["c6_rx_line_rate_multiple_cpi2"]
        out["c6_rx_us_per_frame"] = round(_us(c["rx_insn_per_frame"], 2.0), 1)
        row(
            "decoder per frame (mix, %d frames)" % c["rx_frames"],
            c["rx_insn_per_frame"],
            lambda n, cpi: _time(_us(n, cpi)),
            None,
        )
        row(
            "decoder: two-link line rate multiple",
            c["rx_insn_per_byte"],
            lambda n, cpi: "%.1f x" % (MHZ * 1e6 / (n * cpi) / LINE_RATE),
            "c6_rx_line_rate_multiple",
            40,  # issue 28 (the last round: 20)
            ">=",
        )
    if "organ_led_on_insn" in c:
        out["c6_organ_cmd_us"] = round(_us(c["organ_led_on_insn"], 2.0), 1)
        out["c6_organ_cmd_us_cpi1"] = round(_us(c["organ_led_on_insn"], 1.0), 1)
        row(
            "organ led_on: COMMAND in -> COMMAND_RESP out",
            c["organ_led_on_insn"],
            lambda n, cpi: _time(_us(n, cpi)),
            "c6_organ_cmd_us",
            600,  # issue 28 (the last round: 1000)
            "<=",
        )
    if "step_insn" in c:
        out["c6_step_us"] = round(_us(c["step_insn"], 2.0), 1)
        out["c6_step_us_cpi1"] = round(_us(c["step_insn"], 1.0), 1)
        row(
            "scheduler per step (16-step plan, median)",
            c["step_insn"],
            lambda n, cpi: _time(_us(n, cpi)),
            "c6_step_us",
            300,  # issue 28 (the last round: 500)
            "<=",
        )
        out["c6_plan16_validate_ms"] = round(_us(c["plan16_validate_insn"], 2.0) / 1000, 2)
        row(
            "validate a 16-step plan (%d B)" % c["plan16_bytes"],
            c["plan16_validate_insn"],
            lambda n, cpi: _time(_us(n, cpi)),
            None,
        )
    if "plan16_to_command_insn" in c:
        for key, label, target, n in (
            (
                "c6_plan16_to_command_ms",
                "POST /plan (16 steps, %d B) -> first COMMAND" % c["plan16_request_bytes"],
                25,
                c["plan16_to_command_insn"],
            ),
            (
                "c6_mcp_call_ms",
                "MCP tools/call led_on (%d B) -> COMMAND" % c["mcp_request_bytes"],
                10,
                c["mcp_call_insn"],
            ),
        ):
            out[key] = round(_us(n, 2.0) / 1000, 2)
            out[key + "_cpi1"] = round(_us(n, 1.0) / 1000, 2)
            row(label, n, lambda n, cpi: _time(_us(n, cpi)), key, target, "<=")
        row(
            "  gc.mem_free() (%d KB heap), once a second" % (c["http_heap_bytes"] // 1024),
            c["http_mem_free_insn"],
            lambda n, cpi: _time(_us(n, cpi)),
            None,
        )
        for who in ("plan16", "mcp"):
            row(
                "  of %s: httpd.parse_head" % ("the plan's" if who == "plan16" else "MCP's"),
                c[who + "_parse_head_insn"],
                lambda n, cpi: _time(_us(n, cpi)),
                None,
            )
    for organ in ("led", "speaker"):
        key = "descriptor_decode_insn_" + organ
        if key in c:
            out["c6_descriptor_decode_ms_" + organ] = round(_us(c[key], 2.0) / 1000, 2)
            row(
                "descriptor decode (%s, %d B)" % (organ, c["descriptor_bytes_" + organ]),
                c[key],
                lambda n, cpi: _time(_us(n, cpi)),
                None,
            )
    if "descriptor_register_insn_led" in c:
        n = c["descriptor_register_insn_led"]
        out["c6_descriptor_ms"] = round(_us(n, 2.0) / 1000, 2)
        out["c6_descriptor_ms_cpi1"] = round(_us(n, 1.0) / 1000, 2)
        row(
            "LED descriptor: frame bytes -> registered",
            n,
            lambda n, cpi: _time(_us(n, cpi)),
            "c6_descriptor_ms",
            5,
            "<=",
        )
    if "voice_insn_per_audio_s" in c:
        for cpi in CPIS:
            out["c6_voice_rtf_cpi%g" % cpi] = round(_us(c["voice_insn_per_audio_s"], cpi) / 1e6, 3)
        out["c6_voice_rtf"] = out["c6_voice_rtf_cpi2"]
        out["c6_voice_rtf_no_gc"] = round(_us(c["voice_insn_per_audio_s_no_gc"], 2.0) / 1e6, 3)
        row(
            "voice per second of audio, collector off",
            c["voice_insn_per_audio_s_no_gc"],
            lambda n, cpi: "RTF %.3f" % (_us(n, cpi) / 1e6),
            None,
        )
        row(
            "voice per second of audio (%d-byte text)" % c["voice_text_bytes"],
            c["voice_insn_per_audio_s"],
            lambda n, cpi: "RTF %.3f" % (_us(n, cpi) / 1e6),
            "c6_voice_rtf",
            0.3,
            "<=",
        )
    return rows, out


def _insn(n):
    if n < 100:
        return "%.1f" % n
    return "{:,}".format(int(round(n)))


def report(rows, out):
    ok = True
    print(
        "RV32IMC instructions (MicroPython v1.28.0, qemu VIRT_RV32, -icount shift=0) as ESP32-C6 time"
    )
    print("at %g MHz; the targets hold at CPI 2.0." % MHZ)
    print("image: %s" % (out.get("rv32_image") or "(no IMAGE note)"))
    head = "%-46s %14s %14s %14s  %s" % ("figure", "instructions", "CPI 1.0", "CPI 2.0", "target")
    print(head)
    print("-" * len(head))
    for label, insn, cells, target, op, key in rows:
        verdict = ""
        if target is not None:
            v = out[key]
            met = v >= target if op == ">=" else v <= target
            ok = ok and met
            verdict = "%s %g  %s" % (op, target, "met" if met else "MISSED")
        print("%-46s %14s %14s %14s  %s" % (label, _insn(insn), cells[0], cells[1], verdict))
    out["c6_targets_met"] = ok
    return ok


def run(parts=()):
    rows, out = figures(measure(parts))
    report(rows, out)
    return out


def main(argv):
    try:
        out = run(argv[1:])
    except RuntimeError as e:
        print(e)
        print(json.dumps({"rv32_not_measured": str(e).splitlines()[0]}))
        return 1
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
