# Sorted fixed-width records searched on the filesystem (flash), one record in RAM at a time.
#
# A record is REC bytes: key, one space, value, space padding, "\n". Keys are ASCII and the
# file is sorted by key bytes, so get() is a binary search by seek + readinto.

REC = 32


def _here():
    """Where the data files are: beside this module, else /lib/organs/voice (a frozen
    module's __file__ is its path inside the firmware, not on the filesystem)."""
    import os

    try:
        d = __file__.rsplit("/", 1)[0] if "/" in __file__ else "."
    except NameError:
        d = "."
    for cand in (d, "/lib/organs/voice"):
        try:
            os.stat(cand + "/lexicon.dat")
            return cand
        except OSError:
            pass
    return d


HERE = _here()


class Records:
    def __init__(self, path):
        self._f = open(path, "rb")
        self._f.seek(0, 2)
        self._n = self._f.tell() // REC
        self._rec = bytearray(REC)

    def close(self):
        try:
            self._f.close()
        except Exception:
            pass

    def get(self, key):
        """The value stored for key (str), or None."""
        n = len(key)
        if n == 0 or n >= REC - 2:
            return None
        lo, hi = 0, self._n
        rec = self._rec
        f = self._f
        while lo < hi:
            mid = (lo + hi) >> 1
            f.seek(mid * REC)
            f.readinto(rec)
            c = 0
            for k in range(n):
                c = rec[k] - ord(key[k])
                if c:
                    break
            if c == 0 and rec[n] != 32:
                c = 1
            if c == 0:
                end = REC - 1
                while end > n + 1 and rec[end - 1] == 32:
                    end -= 1
                return rec[n + 1 : end].decode()
            if c < 0:
                lo = mid + 1
            else:
                hi = mid
        return None


def build(entries):
    """Sorted record bytes for a {key: value} dict (host tool side)."""
    out = []
    for k in sorted(entries):
        line = k + " " + entries[k]
        if len(line) > REC - 1 or " " in k or not line.isascii():
            raise ValueError("record too long or malformed: %r" % line)
        out.append((line + " " * (REC - 1 - len(line)) + "\n").encode())
    return b"".join(out)
