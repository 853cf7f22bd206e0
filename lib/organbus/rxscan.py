# The decoder's scanning core: one read's SOF scan, copy, checks, CRC and rescans over the decoder's memory.
#
# Viper on MicroPython; on CPython the same lines run as Python, over tools/shim/viperhost.py's
# casts and addresses (the shim's decorators leave the functions as they are).
import sys

import micropython
from micropython import const

from organbus.crc16 import TABLE as _TABLE

# The decoder's memory, one bytearray per decoder, so the scanner takes one buffer and the
# steady state touches no attribute:
#   [0:520]     the candidate: mem[0] is its SOF, mem[0:fill] the bytes taken so far
#   [520:776]   handled: 1 for each TYPE the receiver handles (others count as unknown)
#   [776:864]   22 words (32-bit, native order), below
#   [864:...]   cap words: mark ticks, as offsets from TBASE (0 .. DMAX)
#   then        cap halfwords: mark positions in the candidate
# Arrival marks: the tick of each read that added bytes to a carried candidate, and where
# they begin; mark 0 is the candidate's SOF, whose read its age counts from.
# Ticks are kept as their low 32 bits. A difference of two is taken in the ticks' own wrap,
# TMASK (the wrap less one): 2**30 on a 32-bit port (as on the C6) and on CPython
# (organbus.ticks), 2**32 on a 64-bit port (which wraps at 2**62: exact for differences
# under 2**31 ms); a difference of half the wrap or more is negative, as in ticks_diff.
# The counters wrap at 2**32 (over 4 days of one link at line rate); reading or counting them
# never allocates.
HANDLED = const(520)
W = const(776)
MT = const(864)
FILL = const(0)  # bytes held
NEED = const(1)  # bytes the candidate needs (5 until LEN is known)
NM = const(2)  # arrival marks held
CAP = const(3)  # room for marks
TAB = const(4)  # the CRC tables' address on a 32-bit port, else 0 (run() then reads _TABLE)
FRAMES = const(5)  # the counters, in frame.COUNTER_NAMES order: FRAMES .. UNKNOWN
BYTES = const(6)
JUNK = const(7)
CRC = const(8)
BADVER = const(9)
OVERSIZE = const(10)
BADEOF = const(11)
ABANDONED = const(12)
UNKNOWN = const(13)
POS = const(14)  # where in the read the scan stopped for on_frame (for RESUME)
MODE = const(15)  # the mode that scan was in
D = const(16)  # and its tick, as an offset from TBASE
LAST = const(17)  # tick of the last byte
TBASE = const(18)  # tick the mark offsets count from (the read that found nothing pending)
AGE = const(19)  # the age limit and the quiet time, in ticks
QUIET = const(20)
TMASK = const(21)  # the ticks' wrap less one (see above)
DMAX = const(0x1FFFFFFF)  # an age offset is capped here (such a candidate is long abandoned)
TAKE = const(0)  # run() modes: take data[:n] arriving at now (n == 0: an empty read, IDLE)
IDLE = const(1)  # no byte came: the quiet rule, else the age rule
FLUSH = const(2)  # end of input: abandon candidates until nothing is pending
RESUME = const(3)  # go on after on_frame raised: drop the frame it had, finish the run
OLD = const(4)  # (internal) the age rule alone


MP = sys.implementation.name == "micropython"
if not MP:  # CPython: viper's casts are viperhost's (mypy checks the board's: the stubs' types)
    import typing

    if not typing.TYPE_CHECKING:
        from viperhost import (
            ptr8,
            ptr16,
            ptr32,
            uint,
        )  # noqa: F401 (tools/shim, beside micropython's)


def memory(cap, handled, age, quiet):
    """A decoder's memory with room for `cap` arrival marks; `handled`: the TYPEs it takes;
    `age`, `quiet`: the time rules in ticks."""
    mpos = MT + 4 * cap
    mem = bytearray(mpos + 2 * cap)
    for t in handled:
        mem[HANDLED + t] = 1
    put(mem, NEED, 5)
    put(mem, CAP, cap)
    put(mem, AGE, age)
    put(mem, QUIET, quiet)
    put(mem, TMASK, 0xFFFFFFFF if MP and sys.maxsize >= (1 << 32) else 0x3FFFFFFF)
    if MP and sys.maxsize < (1 << 32):
        # the array never moves (MicroPython's heap does not) and lives with the module: a
        # read then takes the tables without a global lookup and a buffer query (~150 RV32
        # instructions a read)
        put(mem, TAB, _address(_TABLE))
    return mem


@micropython.viper
def _address(t: ptr16) -> uint:
    return uint(t)


@micropython.viper
def word(mem: ptr8, k: int) -> uint:
    w = ptr32(uint(mem) + W)
    return uint(w[k])


@micropython.viper
def put(mem: ptr8, k: int, v: int):
    w = ptr32(uint(mem) + W)
    w[k] = v


@micropython.viper
def zero(mem: ptr8, a: int, b: int):
    w = ptr32(uint(mem) + W)
    while a < b:
        w[a] = 0
        a += 1


@micropython.viper
def run(on_frame, payload, mem: ptr8, data: ptr8, n: int, now: int, mode: int) -> int:
    # One call per read (or empty poll, or end of input), the whole receive path in machine
    # code: time rules, arrival marks, SOF scan, copy, header checks, CRC, rescans and
    # counters; on_frame(ftype, payload, n) for each legal frame (the decoder's callback
    # and its fixed payload view, passed in: no attribute read per frame). Before each
    # on_frame the state is written back with where the run stopped, so when on_frame
    # raises, RESUME finishes the run. Returns the bytes left pending.
    w = ptr32(uint(mem) + W)
    mt = ptr32(uint(mem) + MT)
    mp = ptr16(uint(mem) + MT + 4 * w[CAP])
    fill = w[FILL]
    need = w[NEED]
    i = 0
    drop = 0  # bytes to drop from the front of the candidate before going on
    if mode == RESUME:
        mode = w[MODE]
        d = w[D]
        i = w[POS]
        drop = need
    else:
        if mode == TAKE and n == 0:
            mode = IDLE
        if mode == IDLE and fill == 0:
            return 0  # an empty poll with nothing pending: no rule applies
        tm = w[TMASK]
        d = 0
        if fill:
            d = (now - w[TBASE]) & tm
            if d > tm >> 1:
                d = 0  # (a negative difference)
            if d > DMAX:
                d = DMAX
        if mode == TAKE:
            # Bytes that come in are no evidence of a quiet line (they may have waited in
            # the UART while the reader was held up): the quiet rule is an empty read's.
            w[LAST] = now
            w[BYTES] += n
            if fill:  # a carried candidate: this read's bytes arrived at d
                nm = w[NM]
                if nm < w[CAP] and d > mt[nm - 1]:
                    mp[nm] = fill
                    mt[nm] = d
                    w[NM] = nm + 1
            else:
                w[TBASE] = now
        elif mode == IDLE:
            mode = OLD
            gap = (now - w[LAST]) & tm
            if gap <= tm >> 1 and gap >= w[QUIET]:
                mode = FLUSH
        w[MODE] = mode
        w[D] = d
    age = w[AGE]
    if w[TAB]:
        t = ptr16(w[TAB])
    else:
        t = ptr16(_TABLE)
    t1 = ptr16(uint(t) + 512)
    t2 = ptr16(uint(t) + 1024)
    t3 = ptr16(uint(t) + 1536)
    t4 = ptr16(uint(t) + 2048)
    t5 = ptr16(uint(t) + 2560)
    t6 = ptr16(uint(t) + 3072)
    t7 = ptr16(uint(t) + 3584)
    while True:
        if drop:
            # Drop mem[0:drop]; the next candidate starts at the next SOF in what remains.
            j = drop
            while j < fill and mem[j] != 0xAA:
                j += 1
            w[JUNK] += j - drop
            drop = 0
            need = 5
            if j >= fill:
                fill = 0
            else:
                k = 0
                while j + k < fill:
                    mem[k] = mem[j + k]
                    k += 1
                fill = k
                # Marks of the dropped bytes go; the new candidate's age is its SOF's read.
                nm = w[NM]
                a = 1
                while a < nm and mp[a] <= j:
                    a += 1
                a -= 1
                mt[0] = mt[a]
                mp[0] = 0
                b = 1
                a += 1
                while a < nm:
                    mp[b] = mp[a] - j
                    mt[b] = mt[a]
                    a += 1
                    b += 1
                w[NM] = b
        if fill >= 2:
            # Decide the candidate as far as its bytes allow.
            if mem[1] != 3:
                w[BADVER] += 1
                drop = 1
            elif fill >= 5:
                length = int((mem[3] << 8) | mem[4])
                if length > 512:
                    w[OVERSIZE] += 1
                    drop = 1
                else:
                    need = length + 8
                    if fill >= need:
                        e = need - 3
                        if mem[need - 1] != 0x55:
                            w[BADEOF] += 1
                            drop = 1
                        else:
                            # CRC of mem[1:e], slicing-by-8 (crc16.py has the tables),
                            # then by 4, then byte by byte
                            crc = 0xFFFF
                            q = uint(mem) + 1
                            qe = uint(mem) + uint(e)
                            while q + 8 <= qe:
                                p = ptr8(q)
                                crc = (
                                    t[p[7]]
                                    ^ t1[p[6]]
                                    ^ t2[p[5]]
                                    ^ t3[p[4]]
                                    ^ t4[p[3]]
                                    ^ t5[p[2]]
                                    ^ t6[(crc >> 8) ^ p[1]]
                                    ^ t7[(crc ^ p[0]) & 0xFF]
                                )
                                q += 8
                            if q + 4 <= qe:
                                p = ptr8(q)
                                crc = (
                                    t[p[3]]
                                    ^ t1[p[2]]
                                    ^ t2[(crc >> 8) ^ p[1]]
                                    ^ t3[(crc ^ p[0]) & 0xFF]
                                )
                                q += 4
                            while q < qe:
                                crc = (crc >> 8) ^ t[(crc ^ ptr8(q)[0]) & 0xFF]
                                q += 1
                            if crc != int((mem[e] << 8) | mem[e + 1]):
                                w[CRC] += 1
                                drop = 1
                            else:
                                w[FRAMES] += 1
                                ftype = mem[2]
                                if not mem[HANDLED + ftype]:
                                    w[UNKNOWN] += 1
                                w[FILL] = fill
                                w[NEED] = need
                                w[POS] = i
                                on_frame(ftype, payload, length)
                                if fill == need:
                                    fill = 0
                                    need = 5
                                else:
                                    drop = need
            if drop:
                if drop == 1:
                    w[JUNK] += 1  # the rejected SOF
                continue
        if mode == TAKE and i < n:
            if fill == 0:
                # The next SOF in data[i:n], four bytes a step.
                q = uint(data) + uint(i)
                qe = uint(data) + uint(n)
                while q + 4 <= qe:
                    p = ptr8(q)
                    if p[0] == 0xAA:
                        break
                    if p[1] == 0xAA:
                        q += 1
                        break
                    if p[2] == 0xAA:
                        q += 2
                        break
                    if p[3] == 0xAA:
                        q += 3
                        break
                    q += 4
                else:
                    while q < qe:
                        if ptr8(q)[0] == 0xAA:
                            break
                        q += 1
                j = int(q - uint(data))
                w[JUNK] += j - i
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
                # A whole frame in this read (the common case): its header read here, so one
                # copy takes all its bytes (the checks below decide it as ever)
                if j + 5 <= n:
                    p = ptr8(uint(data) + uint(j))
                    if p[1] == 3:
                        length = int((p[3] << 8) | p[4])
                        if length <= 512 and j + length + 8 <= n:
                            need = length + 8
            k = need - fill
            if k > n - i:
                k = n - i
            # Copy data[i:i+k] to mem[fill:], eight bytes a step.
            q = uint(data) + uint(i)
            qe = q + uint(k)
            r = uint(mem) + uint(fill)
            while q + 8 <= qe:
                p = ptr8(q)
                o = ptr8(r)
                o[0] = p[0]
                o[1] = p[1]
                o[2] = p[2]
                o[3] = p[3]
                o[4] = p[4]
                o[5] = p[5]
                o[6] = p[6]
                o[7] = p[7]
                q += 8
                r += 8
            while q < qe:
                ptr8(r)[0] = ptr8(q)[0]
                q += 1
                r += 1
            fill += k
            i += k
            continue
        # No more input: the time rules. Old candidate: incomplete 90 ms after the read
        # that brought its SOF; it goes, and so does every candidate the rescan finds that
        # is as old. Quiet line (FLUSH): every candidate goes.
        if fill and (mode == FLUSH or d - mt[0] >= age):
            w[ABANDONED] += 1
            drop = 1
            w[JUNK] += 1
            continue
        break
    w[FILL] = fill
    w[NEED] = need
    return fill
