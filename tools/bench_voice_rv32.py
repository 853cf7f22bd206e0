# The voice's C6 budget in RV32IMC instructions: runs ON the RV32 image (qemu -icount), not on a host.
#
#   tools/bench_voice.py --rv32      (builds the .mpy files and runs this through the RV32 runner)
#
# Needs organs/voice as .mpy files compiled with `mpy-cross -march=rv32imc` (plus its four data
# files) on sys.path. Counts the instructions of every fill() of the 240-byte bench text (minstret
# is the exact executed-instruction count under -icount), and prints one JSON line: instructions
# per second of audio, the largest single fill(), and the C6 real-time factor at 160 MHz for
# CPI 1.0 and 2.0 (target c6_voice_rtf <= 0.3 at CPI 2.0).
import gc
import json

import micropython

from organs.voice import Speech

RATE = 11025
MHZ = 160
TEXT = (
    "The kitchen light is on and the front door is locked. It is 7:20 in the evening, "
    "outside it is 12 degrees, and rain is expected after midnight. Would you like me "
    "to play some music, set a timer, or read the news for you right now, please?!!"
)


@micropython.asm_rv32
def _instret() -> uint:
    csrrs(a0, zero, 0xB02)  # minstret, low 32 bits (one fill() stays far below 2**32)


def count(text, block=512):
    buf = bytearray(2 * block)
    job = Speech(text, rate=RATE)
    total = worst = samples = 0
    gc.collect()  # once: the collections speaking causes are counted
    while True:
        a = _instret()
        n = job.fill(buf)
        d = (_instret() - a) & 0xFFFFFFFF
        total += d
        worst = max(worst, d)
        if not n:
            break
        samples += n // 2
    return total, samples, worst


def main():
    total, samples, worst = count(TEXT)
    audio_s = samples / RATE
    per_s = total / audio_s
    out = {
        "voice_rv32_insn": total,
        "voice_rv32_audio_s": round(audio_s, 3),
        "voice_rv32_insn_per_audio_s": int(per_s),
        "voice_rv32_worst_fill_insn": worst,
        "c6_voice_rtf_cpi1": round(per_s * 1.0 / (MHZ * 1e6), 4),
        "c6_voice_rtf": round(per_s * 2.0 / (MHZ * 1e6), 4),
        "c6_voice_worst_fill_ms_cpi2": round(worst * 2.0 / (MHZ * 1e3), 1),
    }
    print(json.dumps(out))


main()
