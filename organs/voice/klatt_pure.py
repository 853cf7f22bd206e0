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
        s = (y * gain) >> 12
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
