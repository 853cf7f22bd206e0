# Speaks text with the organ's own voice into a WAV file (CPython or the MicroPython unix port).
#
#   python tools/say.py "Hello there." -o out.wav [--rate 11025] [--pure]
#   micropython tools/say.py "Hello there." -o out.wav   (viper path)

import struct
import sys

try:
    _ROOT = __file__.rsplit("/", 2)[0] if "/" in __file__ else "."
    if _ROOT.endswith("tools"):
        _ROOT = _ROOT[:-5] or "."
except NameError:
    _ROOT = "."
if __file__.count("/") == 1:
    _ROOT = __file__.split("/")[0].rsplit("tools", 1)[0] or "."
for _p in (_ROOT + "/tools/shim", _ROOT):
    if sys.implementation.name != "micropython" or _p == _ROOT:
        if _p not in sys.path:
            sys.path.insert(0, _p)

from organs.voice import Speech  # noqa: E402

USAGE = "usage: say.py TEXT -o OUT.wav [--rate HZ] [--pure]"


def wav_header(rate, nbytes):
    return (
        b"RIFF"
        + struct.pack("<I", 36 + nbytes)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
        + b"data"
        + struct.pack("<I", nbytes)
    )


def say(text, path, rate=11025, viper=True, block=512):
    """Speak text into a WAV at path; returns the number of samples."""
    job = Speech(text, rate=rate, viper=viper)
    buf = bytearray(block * 2)
    total = 0
    with open(path, "wb") as f:
        f.write(wav_header(rate, 0))
        while True:
            n = job.fill(buf)
            if not n:
                break
            f.write(buf if n == len(buf) else buf[:n])
            total += n
        f.seek(0)
        f.write(wav_header(rate, total))
    return total // 2


def main(argv):
    text = None
    out = None
    rate = 11025
    viper = True
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "-o" and i + 1 < len(argv):
            out = argv[i + 1]
            i += 1
        elif a == "--rate" and i + 1 < len(argv):
            rate = int(argv[i + 1])
            i += 1
        elif a == "--pure":
            viper = False
        elif text is None:
            text = a
        else:
            text += " " + a
        i += 1
    if text is None or out is None:
        print(USAGE)
        return 2
    n = say(text, out, rate, viper)
    print("%s: %d samples, %.2f s at %d Hz" % (out, n, n / rate, rate))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
