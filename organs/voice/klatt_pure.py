# Pure-Python twin of klatt.py's viper loop: the same integer operations, sample for sample.
#
# Used on CPython and whenever Speech(viper=False); kept in its own module so a board that
# runs the viper loop never loads it. st/co layouts are documented in klatt.py.


def render_pure(buf, st, co, gl):
    # st and co are exactly NST and NCO long: unpack them whole, in layout order.
    n, o, ph, seed, x1, x2, n1, n2, r1a, r1b, r2a, r2b, r3a, r3b, r4a, r4b, r5a, r5b = st[:18]
    p2a, p2b, p3a, p3b, p4a, p4b, p5a, p5b = st[18:]
    dph, av, ah, af, flags, gain, bz, cz, gn, bn, cn = co[:11]
    a1, b1, c1, a2, b2, c2, a3, b3, c3, a4, b4, c4, a5, b5, c5 = co[11:26]
    pa2, pb2, pc2, pa3, pb3, pc3, pa4, pb4, pc4, pa5, pb5, pc5, g2, g3, g4, g5, gab = co[26:]
    o *= 2
    for _ in range(n):
        ph = (ph + dph) & 0xFFFF
        g = gl[ph >> 8] - 128
        seed = (seed * 1664525 + 1013904223) & 0xFFFFFF
        nz = (seed >> 8) - 32768
        if av > 0 and ph >= 32768:
            nz = nz >> 1
        x = ((g * av) >> 3) + ((nz * ah) >> 11)
        if flags & 1:
            t = x - ((bz * x1 + cz * x2) >> 12)
            x2 = x1
            x1 = x
            if t > 65535:
                t = 65535
            elif t < -65535:
                t = -65535
            y = (gn * t + bn * n1 + cn * n2) >> 12
            if y > 65535:
                y = 65535
            elif y < -65535:
                y = -65535
            n2 = n1
            n1 = y
            x = y
        y = (a1 * x + b1 * r1a + c1 * r1b) >> 12
        if y > 65535:
            y = 65535
        elif y < -65535:
            y = -65535
        r1b = r1a
        r1a = y
        y = (a2 * y + b2 * r2a + c2 * r2b) >> 12
        if y > 65535:
            y = 65535
        elif y < -65535:
            y = -65535
        r2b = r2a
        r2a = y
        y = (a3 * y + b3 * r3a + c3 * r3b) >> 12
        if y > 65535:
            y = 65535
        elif y < -65535:
            y = -65535
        r3b = r3a
        r3a = y
        y = (a4 * y + b4 * r4a + c4 * r4b) >> 12
        if y > 65535:
            y = 65535
        elif y < -65535:
            y = -65535
        r4b = r4a
        r4a = y
        y = (a5 * y + b5 * r5a + c5 * r5b) >> 12
        if y > 65535:
            y = 65535
        elif y < -65535:
            y = -65535
        r5b = r5a
        r5a = y
        if flags & 2:
            f = (nz * af) >> 11
            p = (pa2 * f + pb2 * p2a + pc2 * p2b) >> 12
            if p > 65535:
                p = 65535
            elif p < -65535:
                p = -65535
            p2b = p2a
            p2a = p
            p = (pa3 * f + pb3 * p3a + pc3 * p3b) >> 12
            if p > 65535:
                p = 65535
            elif p < -65535:
                p = -65535
            p3b = p3a
            p3a = p
            p = (pa4 * f + pb4 * p4a + pc4 * p4b) >> 12
            if p > 65535:
                p = 65535
            elif p < -65535:
                p = -65535
            p4b = p4a
            p4a = p
            p = (pa5 * f + pb5 * p5a + pc5 * p5b) >> 12
            if p > 65535:
                p = 65535
            elif p < -65535:
                p = -65535
            p5b = p5a
            p5a = p
            y += (g2 * p2a - g3 * p3a + g4 * p4a - g5 * p5a + gab * f) >> 10
            if y > 131071:
                y = 131071
            elif y < -131071:
                y = -131071
        s = ((y * gain) >> 12) + (nz >> 11)  # a noise floor: never digital silence
        if s > 32767:
            s = 32767
        elif s < -32767:
            s = -32767
        buf[o] = s & 255
        buf[o + 1] = (s >> 8) & 255
        o += 2
    st[2] = ph
    st[3] = seed
    st[4] = x1
    st[5] = x2
    st[6] = n1
    st[7] = n2
    st[8] = r1a
    st[9] = r1b
    st[10] = r2a
    st[11] = r2b
    st[12] = r3a
    st[13] = r3b
    st[14] = r4a
    st[15] = r4b
    st[16] = r5a
    st[17] = r5b
    st[18] = p2a
    st[19] = p2b
    st[20] = p3a
    st[21] = p3b
    st[22] = p4a
    st[23] = p4b
    st[24] = p5a
    st[25] = p5b


def frame_pure(co, st, fp, memo, tabs):
    """Twin of klatt._viper_frame: fp[] (klatt.NFP layout) -> co[], the same integer steps."""
    rate = fp[22]
    top = fp[23]
    f0 = fp[0]
    if f0 <= 0:
        f0 = 100
    co[0] = (f0 * 65536) // rate
    loud = 0
    for k in range(3):
        a = fp[1 + k]
        if a < 0:
            a = 0
        elif a > 80:
            a = 80
        v = tabs[a]
        co[1 + k] = v
        loud |= v
    if loud:
        memo[129] = 0
    else:
        q = memo[129] + 1
        memo[129] = q
        if q == 3:
            for k in range(4, 26):
                st[k] = 0
    old = co[4]
    fnp = fp[14]
    fnz = fp[15]
    nasal = fnz != fnp
    par_on = 0
    if co[3]:
        par_on = fp[16] | fp[17] | fp[18] | fp[19] | fp[20]
    flags = 0
    if nasal:
        flags = 1
    elif old & 1:
        for k in range(4, 8):
            st[k] = 0
    if par_on:
        flags |= 2
        for k in range(5):
            a = fp[16 + k]
            if a < 0:
                a = 0
            elif a > 80:
                a = 80
            co[38 + k] = tabs[a]
    elif old & 2:
        for k in range(18, 26):
            st[k] = 0
    az = ap = 0
    for r in range(11):
        norm = 1
        if r == 0:
            if not nasal:
                continue
            slot, f, bw, norm = 6, fnz, 200, 0  # the nasal zero: wider than the pole
        elif r == 1:
            if not nasal:
                continue
            slot, f, bw, norm = 9, fnp, 100, 0
        elif r < 7:
            slot = 11 + 3 * (r - 2)
            f = fp[4 + r - 2]
            bw = fp[9 + r - 2]
        else:
            if not par_on:
                break
            slot = 26 + 3 * (r - 7)
            if r == 10:
                f, bw = fp[21], 400
            else:
                f = fp[5 + r - 7]
                bw = 250 if r == 8 else (320 if r == 9 else 200)
        if f > top:
            f = top
        m = 3 * slot
        if memo[m] == f and memo[m + 1] == bw:
            a = memo[m + 2]
        else:
            memo[m] = f
            memo[m + 1] = bw
            bi = bw // 10
            if bi < 1:
                bi = 1
            elif bi > 200:
                bi = 200
            rr = tabs[338 + bi]
            p = (f * 16384) // rate
            if p > 8192:
                p = 8192
            elif p < 0:
                p = 0
            q = 8192 - p if p > 4096 else p
            i = q >> 4
            v = tabs[81 + i]
            if i < 256:
                v += ((tabs[82 + i] - v) * (q & 15)) >> 4
            if p > 4096:
                v = -v
            b = (rr * v) >> 15
            c = -((rr * rr) >> 16)
            a = 4096 - b - c
            memo[m + 2] = a
            if norm:
                co[slot] = a
                co[slot + 1] = b
                co[slot + 2] = c
            else:
                co[slot] = b
                co[slot + 1] = c
        if r == 0:
            az = a
        elif r == 1:
            ap = a
    if nasal:
        co[8] = (ap * 4096) // az if az > 0 else 4096
    co[4] = flags


def track_pure(fp, seg, k, an, t):
    """Twin of klatt._viper_track: F1..F3 and F0 of frame k of a phoneme (seg[] layout)."""
    n = seg[14]
    tin = seg[12]
    tout = seg[13]
    hold = seg[17]
    kk = k - hold if k > hold else 0
    for j in range(3):
        a = seg[3 + j]
        v = a + ((seg[6 + j] - a) * kk) // (n - hold)
        if k < tin:
            a = seg[j]
            v = a + ((v - a) * (2 * k + 1)) // (2 * tin)
        elif n - 1 - k < tout:
            a = seg[9 + j]
            v = a + ((v - a) * (2 * (n - k) - 1)) // (2 * tout)
        fp[4 + j] = v
    ai = seg[15]
    na = seg[16]
    while ai + 1 < na and an[2 * ai + 2] <= t:
        ai += 1
    seg[15] = ai
    if ai + 1 < na:
        t0 = an[2 * ai]
        h0 = an[2 * ai + 1]
        t1 = an[2 * ai + 2]
        h1 = an[2 * ai + 3]
        fp[0] = h0 + ((h1 - h0) * (t - t0)) // (t1 - t0) if t1 > t0 else h1
    else:
        fp[0] = an[2 * ai + 1]
