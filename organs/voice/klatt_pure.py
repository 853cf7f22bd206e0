# Pure-Python twin of klatt.py's viper loop: the same integer operations, sample for sample.
#
# Used on CPython and whenever Speech(viper=False); kept in its own module so a board that
# runs the viper loop never loads it. st/co layouts are documented in klatt.py.


def render_pure(buf, st, co, gl):
    n = st[0]
    o = st[1] * 2
    ph = st[2]
    seed = st[3]
    x1 = st[4]
    x2 = st[5]
    n1 = st[6]
    n2 = st[7]
    r1a = st[8]
    r1b = st[9]
    r2a = st[10]
    r2b = st[11]
    r3a = st[12]
    r3b = st[13]
    r4a = st[14]
    r4b = st[15]
    r5a = st[16]
    r5b = st[17]
    p2a = st[18]
    p2b = st[19]
    p3a = st[20]
    p3b = st[21]
    p4a = st[22]
    p4b = st[23]
    p5a = st[24]
    p5b = st[25]
    dph = co[0]
    av = co[1]
    ah = co[2]
    af = co[3]
    flags = co[4]
    gain = co[5]
    bz = co[6]
    cz = co[7]
    gn = co[8]
    bn = co[9]
    cn = co[10]
    a1 = co[11]
    b1 = co[12]
    c1 = co[13]
    a2 = co[14]
    b2 = co[15]
    c2 = co[16]
    a3 = co[17]
    b3 = co[18]
    c3 = co[19]
    a4 = co[20]
    b4 = co[21]
    c4 = co[22]
    a5 = co[23]
    b5 = co[24]
    c5 = co[25]
    pa2 = co[26]
    pb2 = co[27]
    pc2 = co[28]
    pa3 = co[29]
    pb3 = co[30]
    pc3 = co[31]
    pa4 = co[32]
    pb4 = co[33]
    pc4 = co[34]
    pa5 = co[35]
    pb5 = co[36]
    pc5 = co[37]
    g2 = co[38]
    g3 = co[39]
    g4 = co[40]
    g5 = co[41]
    gab = co[42]
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
