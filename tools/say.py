# Speaks text with the organ's own voice into a WAV file (CPython or the MicroPython unix port).
#
#   python tools/say.py "Hello there." -o out.wav [--rate 11025] [--pure]
#   micropython tools/say.py "Hello there." -o out.wav   (viper path)

import struct
import sys

import toolpath  # noqa: F401  (the tree, lib/ and tools/ on sys.path)
from organs.voice import Speech

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
            try:
                rate = int(argv[i + 1])
            except ValueError:
                print("say.py: --rate needs an integer, got %r" % argv[i + 1])
                return 2
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
    try:
        n = say(text, out, rate, viper)
    except (ValueError, OSError) as e:
        print("say.py: %s" % e)
        return 2
    print("%s: %d samples, %.2f s at %d Hz" % (out, n, n / rate, rate))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
