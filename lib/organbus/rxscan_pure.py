# The pure-Python twin of organbus.rxscan's machine code, for CPython (never imported on a board).
from organbus.crc16 import crc16_pure
from organbus.rxscan import (
    _OLD,
    ABANDONED,
    AGE,
    BADEOF,
    BADVER,
    BYTES,
    CAP,
    CRC,
    DMAX,
    FILL,
    FLUSH,
    FRAMES,
    HANDLED,
    IDLE,
    JUNK,
    LAST,
    MODE,
    MPOS,
    MT,
    NEED,
    NM,
    OVERSIZE,
    POS,
    QUIET,
    RESUME,
    TAKE,
    TBASE,
    UNKNOWN,
    W,
    D,
)
from organbus.ticks import ticks_diff

_TICKS = (1 << 30) - 1  # CPython's ticks (organbus.ticks) wrap at 2**30, as on the C6


def _words(mem):
    return memoryview(mem)[W:MT].cast("I")


def word(mem, k):
    return _words(mem)[k]


def put(mem, k, v):
    _words(mem)[k] = v


def zero(mem, a, b):
    w = _words(mem)
    for k in range(a, b):
        w[k] = 0


def _count(w, k, v=1):
    w[k] = (w[k] + v) & 0xFFFFFFFF


def run(dec, mem, data, n, now, mode):
    """rxscan.run on CPython: the same memory, the same steps (and ticks_diff for the shifts)."""
    w = _words(mem)
    cap = w[CAP]
    mt = memoryview(mem)[MT : MT + 4 * cap].cast("I")
    mp = memoryview(mem)[w[MPOS] : w[MPOS] + 2 * cap].cast("H")
    fill = w[FILL]
    need = w[NEED]
    i = 0
    drop = 0
    if mode == RESUME:
        mode = w[MODE]
        d = w[D]
        i = w[POS]
        drop = need
    else:
        if mode == TAKE and n == 0:
            mode = IDLE
        if mode == IDLE and fill == 0:
            return 0
        now &= _TICKS
        d = 0
        if fill:
            d = min(max(ticks_diff(now, w[TBASE]), 0), DMAX)
        if mode == TAKE:
            w[LAST] = now
            _count(w, BYTES, n)
            if fill:
                nm = w[NM]
                if nm < cap and d > mt[nm - 1]:
                    mp[nm] = fill
                    mt[nm] = d
                    w[NM] = nm + 1
            else:
                w[TBASE] = now
        elif mode == IDLE:
            mode = FLUSH if ticks_diff(now, w[LAST]) >= w[QUIET] else _OLD
        w[MODE] = mode
        w[D] = d
    age = w[AGE]
    while True:
        if drop:
            j = mem.find(b"\xaa", drop, fill)
            if j < 0:
                j = fill
            _count(w, JUNK, j - drop)
            drop = 0
            need = 5
            if j >= fill:
                fill = 0
            else:
                mem[0 : fill - j] = mem[j:fill]
                fill -= j
                nm = w[NM]
                a = 1
                while a < nm and mp[a] <= j:
                    a += 1
                a -= 1
                mt[0] = mt[a]
                mp[0] = 0
                b = 1
                for a in range(a + 1, nm):
                    mp[b] = mp[a] - j
                    mt[b] = mt[a]
                    b += 1
                w[NM] = b
        if fill >= 2:
            if mem[1] != 3:
                _count(w, BADVER)
                drop = 1
            elif fill >= 5:
                length = (mem[3] << 8) | mem[4]
                if length > 512:
                    _count(w, OVERSIZE)
                    drop = 1
                else:
                    need = length + 8
                    if fill >= need:
                        if mem[need - 1] != 0x55:
                            _count(w, BADEOF)
                            drop = 1
                        elif crc16_pure(mem, 0xFFFF, 1, need - 3) != (
                            (mem[need - 3] << 8) | mem[need - 2]
                        ):
                            _count(w, CRC)
                            drop = 1
                        else:
                            _count(w, FRAMES)
                            ftype = mem[2]
                            if not mem[HANDLED + ftype]:
                                _count(w, UNKNOWN)
                            w[FILL] = fill
                            w[NEED] = need
                            w[POS] = i
                            dec.on_frame(ftype, dec.payload, length)
                            if fill == need:
                                fill = 0
                                need = 5
                            else:
                                drop = need
            if drop:
                if drop == 1:
                    _count(w, JUNK)
                continue
        if mode == TAKE and i < n:
            if fill == 0:
                j = bytes(data[i:n]).find(b"\xaa")
                j = n if j < 0 else i + j
                _count(w, JUNK, j - i)
                if j >= n:
                    i = n
                    continue
                mem[0] = 0xAA
                fill = 1
                need = 5
                mp[0] = 0
                mt[0] = d
                w[NM] = 1
                i = j + 1
                continue
            k = min(need - fill, n - i)
            mem[fill : fill + k] = data[i : i + k]
            fill += k
            i += k
            continue
        if fill and (mode == FLUSH or d - mt[0] >= age):
            _count(w, ABANDONED)
            _count(w, JUNK)
            drop = 1
            continue
        break
    w[FILL] = fill
    w[NEED] = need
    return fill
