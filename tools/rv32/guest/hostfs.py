# Guest side of tools/rv32/run.py: a read-only VFS over host files, read through QEMU semihosting.
# Sent as source over the UART at boot; everything else is read from the host through it.
import array
import io
import micropython
import vfs

# The semihosting call is the uncompressed trio slli x0,x0,31; ebreak; srai x0,x0,7, which QEMU
# only recognises inside one page. It is written into a word buffer at a 16-byte aligned offset
# (16 divides 4096, so the trio and its ret never straddle a page) and called through jalr.
_code = array.array("I", [0] * 8)


@micropython.asm_rv32
def _address(a0) -> uint:
    pass


_at = (-_address(_code)) & 15  # bytes to the next 16-byte boundary
_code[_at // 4] = 0x01F01013  # slli x0, x0, 31
_code[_at // 4 + 1] = 0x00100073  # ebreak
_code[_at // 4 + 2] = 0x40705013  # srai x0, x0, 7
_code[_at // 4 + 3] = 0x00008067  # ret
_entry = _address(_code) + _at


@micropython.asm_rv32
def _trap(a0, a1, a2) -> int:
    mv(a3, ra)
    jalr(ra, a2, 0)
    mv(ra, a3)


WHOLE = 256 * 1024  # files up to this size are opened as in-memory streams
_OPEN, _CLOSE, _READ, _SEEK, _FLEN = 0x01, 0x02, 0x06, 0x0A, 0x0C
_args = array.array("I", [0, 0, 0])


def _call(op, a, b=0, c=0):
    _args[0] = a
    _args[1] = b
    _args[2] = c
    return _trap(op, _args, _entry)


def _nbytes(buf):
    """The byte length of any buffer (an array's len() counts items): item size from addresses."""
    n = len(buf)
    if n < 2:
        return len(bytes(buf))
    return n * (_address(memoryview(buf)[1:]) - _address(buf))


class HostFile(io.IOBase):
    """One host file opened read-only; text mode decodes UTF-8."""

    def __init__(self, host, size, text):
        name = bytearray(host.encode())
        name.append(0)
        self._h = _call(_OPEN, _address(name), 1, len(name) - 1)  # mode 1: "rb"
        if self._h < 0:
            raise OSError(2)
        self._size = _call(_FLEN, self._h) if size is None else size
        self._pos = 0
        self._text = text

    def readinto(self, buf, n=-1):
        size = _nbytes(buf)
        n = size if n < 0 else min(n, size)
        n = min(n, self._size - self._pos)
        if n <= 0:
            return 0
        got = n - _call(_READ, self._h, _address(buf), n)  # returns the count NOT read
        self._pos += got
        return got

    def _out(self, b):
        return str(b, "utf-8") if self._text else b

    def read(self, n=-1):
        left = self._size - self._pos
        n = left if n is None or n < 0 else min(n, left)
        buf = bytearray(n)
        got = self.readinto(buf) if n else 0
        return self._out(bytes(memoryview(buf)[:got]))

    def readline(self, limit=-1):
        out = bytearray()
        chunk = bytearray(256)
        while limit < 0 or len(out) < limit:
            start = self._pos
            got = self.readinto(chunk)
            if not got:
                break
            i = chunk.find(b"\n", 0, got)
            end = got if i < 0 else i + 1
            if limit >= 0:
                end = min(end, limit - len(out))
            out.extend(memoryview(chunk)[:end])
            if end < got:
                self.seek(start + end)  # read ahead: give back what is past the line
                break
            if i >= 0:
                break
        return self._out(bytes(out))

    def readlines(self):
        return list(self)

    def __iter__(self):
        return self

    def __next__(self):
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def seek(self, off, whence=0):
        base = (0, self._pos, self._size)[whence]
        pos = max(0, min(base + off, self._size))
        if _call(_SEEK, self._h, pos) != 0:
            raise OSError(5)
        self._pos = pos
        return pos

    def tell(self):
        return self._pos

    def close(self):
        if self._h >= 0:
            _call(_CLOSE, self._h)
            self._h = -1

    def ioctl(self, req, arg):
        if req == 4:  # MP_STREAM_CLOSE
            self.close()
            return 0
        return -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class HostFS:
    """files: {guest path relative to the mount: (host path, size)}; directories follow from it."""

    def __init__(self, files):
        self._files = files
        dirs = {""}
        for p in files:
            i = p.rfind("/")
            while i > 0:
                dirs.add(p[:i])
                i = p.rfind("/", 0, i)
        self._dirs = dirs
        self._cwd = ""

    def mount(self, readonly, mkfs):
        pass

    def umount(self):
        pass

    def _rel(self, p):
        p = p.strip("/")
        return p

    def chdir(self, p):
        p = self._rel(p)
        if p not in self._dirs:
            raise OSError(2)
        self._cwd = p

    def getcwd(self):
        return self._cwd

    def stat(self, p):
        p = self._rel(p)
        if p in self._files:
            return (0x8000, 0, 0, 0, 0, 0, self._files[p][1], 0, 0, 0)
        if p in self._dirs:
            return (0x4000, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        raise OSError(2)

    def ilistdir(self, p):
        p = self._rel(p)
        if p not in self._dirs:
            raise OSError(2)
        head = p + "/" if p else ""
        seen = set()
        for name in list(self._files) + list(self._dirs):
            if name and name.startswith(head):
                entry = name[len(head) :].split("/")[0]
                if entry and entry not in seen:
                    seen.add(entry)
                    kind = 0x4000 if (head + entry) in self._dirs else 0x8000
                    yield (entry, kind, 0)

    def open(self, p, mode):
        if "w" in mode or "a" in mode or "+" in mode or "x" in mode:
            raise OSError(30)  # EROFS
        p = self._rel(p)
        if p not in self._files:
            raise OSError(2)
        host, size = self._files[p]
        text = "b" not in mode
        if size > WHOLE:
            return HostFile(host, size, text)
        # Read at once into a C stream: reads, lines and seeks then cost what a board's flash
        # filesystem costs (C code), not this file's Python, in the instruction counts.
        f = HostFile(host, size, False)
        data = f.read()
        f.close()
        return io.StringIO(str(data, "utf-8")) if text else io.BytesIO(data)

    def remove(self, p):
        raise OSError(30)

    def mkdir(self, p):
        raise OSError(30)

    def rename(self, a, b):
        raise OSError(30)


def load_listing(host):
    """The runner's listing file: one 'guest<TAB>host<TAB>size' line per file."""
    f = HostFile(host, None, True)
    text = f.read()
    f.close()
    files = {}
    for line in text.split("\n"):
        if line:
            guest, path, size = line.split("\t")
            files[guest] = (path, int(size))
    return files


def mount(listing, where):
    vfs.mount(HostFS(load_listing(listing)), where)
