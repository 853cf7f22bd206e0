# Viper's casts and pointer arithmetic on CPython, so organbus.rxscan's viper lines are its one source; host only, beside the micropython shim, never shipped to a board.
#
# uint(buf) is an address (Addr: the buffer and a byte offset); an address plus or minus an int
# is another, the difference of two in one buffer is an int, and two in one buffer compare by
# their offsets. ptr8, ptr16 and ptr32 of a buffer or an address index it in elements of 1, 2
# or 4 bytes (native order, at an offset that is a multiple of the size); a store keeps the
# element's low bits, as a machine store does. uint of an int is its low 32 bits. Python's ints
# do not wrap: viper code that relies on a machine word's wrap in arithmetic is not for this.
_SIZE = {1: "B", 2: "H", 4: "I"}


class Addr:
    __slots__ = ("buf", "off")

    def __init__(self, buf, off):
        self.buf = buf
        self.off = off

    def __add__(self, k):
        return Addr(self.buf, self.off + k)

    def __sub__(self, other):
        if isinstance(other, Addr):
            if other.buf is not self.buf:
                raise ValueError("viperhost: the difference of addresses in two buffers")
            return self.off - other.off
        return Addr(self.buf, self.off - other)

    def _at(self, other):
        if not isinstance(other, Addr) or other.buf is not self.buf:
            raise ValueError("viperhost: addresses in two buffers compared")
        return other.off

    def __lt__(self, other):
        return self.off < self._at(other)

    def __le__(self, other):
        return self.off <= self._at(other)

    def __gt__(self, other):
        return self.off > self._at(other)

    def __ge__(self, other):
        return self.off >= self._at(other)


class _Ptr:
    __slots__ = ("buf", "off", "at", "items", "mask")

    def __init__(self, x, size):
        if isinstance(x, _Ptr):
            x = Addr(x.buf, x.off)
        buf, off = (x.buf, x.off) if isinstance(x, Addr) else (x, 0)
        if off % size:
            raise ValueError("viperhost: ptr%d at byte %d" % (8 * size, off))
        self.buf = buf
        self.off = off
        self.at = off // size
        self.mask = (1 << (8 * size)) - 1
        if size == 1 and (
            isinstance(buf, (bytes, bytearray)) or (type(buf) is memoryview and buf.itemsize == 1)
        ):
            self.items = buf  # bytes as they are (the common case)
        else:
            b = memoryview(buf).cast("B")
            self.items = b[: len(b) // size * size].cast(_SIZE[size])

    def __getitem__(self, k):
        return self.items[self.at + k]

    def __setitem__(self, k, v):
        self.items[self.at + k] = v & self.mask


def uint(x):
    if isinstance(x, int):
        return x & 0xFFFFFFFF
    if isinstance(x, _Ptr):
        return Addr(x.buf, x.off)
    if isinstance(x, Addr):
        return x
    return Addr(x, 0)


def ptr8(x):
    return _Ptr(x, 1)


def ptr16(x):
    return _Ptr(x, 2)


def ptr32(x):
    return _Ptr(x, 4)
