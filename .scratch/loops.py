import gc
import micropython
from organbus.crc16 import TABLE, crc16_raw

@micropython.asm_rv32
def instret() -> uint:
    csrrs(a0, zero, 0xB02)

def cnt(fn, *a):
    gc.collect()
    best = None
    for _ in range(3):
        x = instret(); r = fn(*a); y = instret()
        d = (y - x) & 0xFFFFFFFF
        best = d if best is None or d < best else best
    return best, r

@micropython.viper
def copy_a(dec, mem: ptr8, data: ptr8, n: int, now: int, mode: int) -> int:
    i = 0
    fill = 0
    e = n
    while i < e:
        mem[fill] = data[i]
        fill += 1
        i += 1
    return fill

@micropython.viper
def copy_b(dec, mem: ptr8, data: ptr8, n: int, now: int, mode: int) -> int:
    # pointer walk, unrolled by 4
    s = uint(data)
    dd = uint(mem)
    e = s + uint(n)
    while s + 4 <= e:
        ptr8(dd)[0] = ptr8(s)[0]
        ptr8(dd)[1] = ptr8(s)[1]
        ptr8(dd)[2] = ptr8(s)[2]
        ptr8(dd)[3] = ptr8(s)[3]
        s += 4
        dd += 4
    while s < e:
        ptr8(dd)[0] = ptr8(s)[0]
        s += 1
        dd += 1
    return int(dd - uint(mem))

@micropython.viper
def copy_c(dec, mem: ptr8, data: ptr8, n: int, now: int, mode: int) -> int:
    # index unrolled by 4
    i = 0
    e = n - 3
    while i < e:
        mem[i] = data[i]
        mem[i + 1] = data[i + 1]
        mem[i + 2] = data[i + 2]
        mem[i + 3] = data[i + 3]
        i += 4
    while i < n:
        mem[i] = data[i]
        i += 1
    return i

@micropython.viper
def crc_a(dec, mem: ptr8, data: ptr8, n: int, now: int, mode: int) -> int:
    t = ptr16(TABLE)
    crc = 0xFFFF
    p = 0
    while p < n:
        crc = (crc >> 8) ^ t[(crc ^ mem[p]) & 0xFF]
        p += 1
    return crc

@micropython.viper
def crc_b(dec, mem: ptr8, data: ptr8, n: int, now: int, mode: int) -> int:
    t = ptr16(TABLE)
    crc = 0xFFFF
    q = uint(mem)
    e = q + uint(n)
    while q + 4 <= e:
        p = ptr8(q)
        crc = (crc >> 8) ^ t[(crc ^ p[0]) & 0xFF]
        crc = (crc >> 8) ^ t[(crc ^ p[1]) & 0xFF]
        crc = (crc >> 8) ^ t[(crc ^ p[2]) & 0xFF]
        crc = (crc >> 8) ^ t[(crc ^ p[3]) & 0xFF]
        q += 4
    while q < e:
        crc = (crc >> 8) ^ t[(crc ^ ptr8(q)[0]) & 0xFF]
        q += 1
    return crc

@micropython.viper
def crc_c(dec, mem: ptr8, data: ptr8, n: int, now: int, mode: int) -> int:
    # slicing-by-4 over 4-byte steps: T3[b0^crc lo] ^ T2[b1^crc hi] ^ T1[b2] ^ T0[b3]
    t = ptr16(TABLE)
    t1 = ptr16(uint(t) + 512)
    t2 = ptr16(uint(t) + 1024)
    t3 = ptr16(uint(t) + 1536)
    crc = 0xFFFF
    q = uint(mem)
    e = q + uint(n)
    while q + 4 <= e:
        p = ptr8(q)
        crc = t[p[3]] ^ t1[p[2]] ^ t2[(crc >> 8) ^ p[1]] ^ t3[(crc ^ p[0]) & 0xFF]
        q += 4
    while q < e:
        crc = (crc >> 8) ^ t[(crc ^ ptr8(q)[0]) & 0xFF]
        q += 1
    return crc

@micropython.viper
def sof_a(dec, mem: ptr8, data: ptr8, n: int, now: int, mode: int) -> int:
    j = 0
    while j < n and data[j] != 0xAA:
        j += 1
    return j

@micropython.viper
def sof_b(dec, mem: ptr8, data: ptr8, n: int, now: int, mode: int) -> int:
    q = uint(data)
    e = q + uint(n)
    while q < e:
        if ptr8(q)[0] == 0xAA:
            break
        q += 1
    return int(q - uint(data))

@micropython.viper
def sof_c(dec, mem: ptr8, data: ptr8, n: int, now: int, mode: int) -> int:
    q = uint(data)
    e = q + uint(n)
    while q + 4 <= e:
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
        while q < e:
            if ptr8(q)[0] == 0xAA:
                break
            q += 1
    return int(q - uint(data))

@micropython.viper
def crc_d(dec, mem: ptr8, data: ptr8, n: int, now: int, mode: int) -> int:
    t = ptr16(TABLE)
    t1 = ptr16(uint(t) + 512)
    t2 = ptr16(uint(t) + 1024)
    t3 = ptr16(uint(t) + 1536)
    t4 = ptr16(uint(t) + 2048)
    t5 = ptr16(uint(t) + 2560)
    t6 = ptr16(uint(t) + 3072)
    t7 = ptr16(uint(t) + 3584)
    crc = 0xFFFF
    q = uint(mem)
    e = q + uint(n)
    while q + 8 <= e:
        p = ptr8(q)
        crc = t[p[7]] ^ t1[p[6]] ^ t2[p[5]] ^ t3[p[4]] ^ t4[p[3]] ^ t5[p[2]] ^ t6[(crc >> 8) ^ p[1]] ^ t7[(crc ^ p[0]) & 0xFF]
        q += 8
    while q < e:
        crc = (crc >> 8) ^ t[(crc ^ ptr8(q)[0]) & 0xFF]
        q += 1
    return crc

mem = bytearray(600)
data = bytes((i * 7 + 3) & 0x7F for i in range(512))
for N in (8, 128, 512):
    for f in (copy_b, crc_c, crc_d, sof_c):
        c0, _ = cnt(f, None, mem, data, 0, 0, 0)
        c, r = cnt(f, None, mem, data, N, 0, 0)
        print(N, f.__name__ if hasattr(f, "__name__") else f, "%.1f/byte" % ((c - c0) / N), r)
mem[:512] = data
print(crc16_raw(0xFFFF, mem, TABLE, 0, 512), crc_a(None, mem, data, 512, 0, 0), crc_b(None, mem, data, 512, 0, 0), crc_c(None, mem, data, 512, 0, 0), crc_d(None, mem, data, 512, 0, 0))
