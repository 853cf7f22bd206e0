# Phoneme inventory of the voice: one-character codes and their Klatt (1980) style targets.
#
# The table itself is in tools/voice_data.py (PHONEME_TABLE) and reaches the board as
# phonemes.dat (built by that tool), loaded here into one int16 array. Targets after
# Klatt 1980 (Table III) and durations after Klatt 1976/1979 (inherent and minimum ms), adapted to 11,025 Hz (frication above 5.5 kHz moved into the top band).
# Columns: code, kind flags, inherent ms, minimum ms, F1 F2 F3, B1 B2 B3, end targets
# F1e F2e F3e (0: no glide), AV, AH, AF (dB, 0..80), parallel A2 A3 A4 A5 AB (dB).
# Stops: AV is the voice bar under the closure, the parallel amplitudes the burst.

import sys
from array import array

VOWEL = 1
VOICED = 2
STOP = 4
FRIC = 8
NASAL = 16
GLIDE = 32
DIPH = 64
ASPIR = 128
AFFRIC = 256
LABIAL = 512
ALVEOLAR = 1024
VELAR = 2048

NFIELD = 20
(
    KIND,
    DUR,
    MINDUR,
    F1,
    F2,
    F3,
    B1,
    B2,
    B3,
    F1E,
    F2E,
    F3E,
    AV,
    AH,
    AF,
    A2,
    A3,
    A4,
    A5,
    AB,
) = range(NFIELD)


def _load():
    # phonemes.dat: u8 count, `count` code characters, count * NFIELD int16 little-endian
    from .flash import HERE

    try:
        f = open(HERE + "/phonemes.dat", "rb")
    except OSError:
        return "", array("h")  # Speech() refuses to start; the data tool can still import
    with f:
        n = f.read(1)[0]
        codes = f.read(n).decode()
        raw = f.read(2 * NFIELD * n)  # read(), not readinto(array): some VFS count items
        if len(raw) != 2 * NFIELD * n:
            raise OSError("phonemes.dat is truncated: %d of %d bytes" % (len(raw), 2 * NFIELD * n))
        params = array("h", raw)
    if sys.byteorder != "little":
        params.byteswap()
    return codes, params


CODES, PARAMS = _load()
del _load


def index(code):
    """Phoneme index of a one-character code, -1 when unknown."""
    return CODES.find(code)


def get(p, field):
    return PARAMS[p * NFIELD + field]
