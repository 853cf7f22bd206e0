# The master's update over the air, sans-IO: the signed bundle, its streamed check into a stage folder, the trial state.
#
# A bundle is HEAD + manifest + the files, in the manifest's order:
#   HEAD      b"OBOTA1", manifest length (2 bytes, big-endian), HMAC-SHA256(key, manifest) (32)
#   manifest  JSON {"version": str, "seq": int, "files": [{"path": str, "size": int, "sha256": hex}]}
#   files     each file's bytes, back to back
# The manifest's bytes go to a scratch file as they arrive, signed on the way; nothing of them is
# parsed until the signature matched. Then they are read back entry by entry (`Entries`): once to
# check the whole manifest (a 24-bit hash of each path kept, for the duplicates), then each file's
# entry again as its bytes come: the heap holds one entry, never the list. A bundle whose `seq` is
# not above the highest this master accepted (ota.seq) is refused: a replayed or older bundle never
# runs. Each file goes to the stage folder as it arrives, hashed on the way; a wrong size or hash
# aborts with the reason and removes the stage. The running slot, the rollback target, the root and
# the state file are never touched by an upload until it is complete and verified: only then does
# the stage become the inactive slot and the state a trial.
#
# The flash (a board's "/", a host's board folder) holds: boot.py, main.py, board.json (the
# root, installed over USB, never updated here), ota.json (the state), ota.seq (the highest
# sequence number accepted), the slots "a" and "b" (a slot is a folder laid out as /lib) and,
# during an upload, the stage "new" and the scratch "ota.manifest". Slot "" is the root's /lib,
# the USB install.
import binascii
from array import array
import gc
import hashlib
import json
import os
import sys

from micropython import const

from organbus import jsonread, log

MAGIC = b"OBOTA1"
HEAD = const(40)  # magic (6) + manifest length (2) + HMAC-SHA256 (32)
MAX_MANIFEST = const(8192)  # bytes: about 60 files (the role has 46, its packages included)
MAX_FILES = const(96)
MAX_VERSION = const(40)
MAX_SEQ = 0x7FFFFFFF
STATE_FILE = "ota.json"
SEQ_FILE = "ota.seq"
SCRATCH = "ota.manifest"  # the manifest's bytes until their signature is checked
STAGE = "new"  # the files of the upload under way, a slot once every one is verified
SLOTS = ("a", "b")
# The master role's entry modules (each as .mpy or .py): what main.py imports, and the update's
# own, which commits or rolls back the trial. A bundle without them would run the USB
# install's copies under the bundle's version.
ENTRY = (
    "organbus/boardfile",
    "organbus/log",
    "master/app",
    "master/ota/service",
    "master/ota/routes",
)
ROOT_FILES = ("boot.py", "main.py", "board.json", "settings.json", "config.json", STATE_FILE)
_BLOCK = const(64)  # SHA-256 block size, for HMAC
_PATH_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./"

RUNNING = "running"
TRIAL = "trial"
ROLLED_BACK = "rolled_back"


class OtaError(Exception):
    """A refused update: the HTTP status and the reason."""

    def __init__(self, status, reason):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def hmac_start(key):
    """(inner hash, outer pad) of HMAC-SHA256 (RFC 2104): update the inner hash with the
    message as it comes, then `hmac_end`. hashlib alone: MicroPython has no hmac module."""
    if len(key) > _BLOCK:
        key = hashlib.sha256(key).digest()
    k = bytearray(_BLOCK)
    k[: len(key)] = key
    inner = bytearray(_BLOCK)
    outer = bytearray(_BLOCK)
    for i in range(_BLOCK):
        inner[i] = k[i] ^ 0x36
        outer[i] = k[i] ^ 0x5C
    return hashlib.sha256(inner), outer


def hmac_end(inner, outer):
    o = hashlib.sha256(outer)
    o.update(inner.digest())
    return o.digest()


def hmac_sha256(key, msg):
    """HMAC-SHA256 of a whole message."""
    h, outer = hmac_start(key)
    h.update(msg)
    return hmac_end(h, outer)


def same(a, b):
    """Equal byte strings, compared without an early exit (the time tells nothing)."""
    if len(a) != len(b):
        return False
    d = 0
    for i in range(len(a)):
        d |= a[i] ^ b[i]
    return d == 0


def key_bytes(text):
    """The update key from its hex text (config.json "ota": {"key": ...}); ValueError if not hex."""
    try:
        k = binascii.unhexlify(text)
    except Exception:
        raise ValueError("the update key must be hex digits")
    if len(k) < 16:
        raise ValueError("the update key must be at least 16 bytes (32 hex digits)")
    return k


def bundle_head(key, manifest):
    """HEAD for a manifest's bytes (the host's signing side and the tests)."""
    n = len(manifest)
    return MAGIC + bytes([n >> 8, n & 255]) + hmac_sha256(key, manifest)


def check_path(p):
    """A manifest path is relative, plain and not a root file; raises OtaError(400)."""
    if not isinstance(p, str) or not p or len(p) > 96:
        raise OtaError(400, "manifest: a file path must be a string of 1 to 96 characters")
    for c in p:
        if c not in _PATH_CHARS:
            raise OtaError(400, "manifest: path %r has the character %r" % (p, c))
    if p[0] == "/" or p[-1] == "/" or "//" in p:
        raise OtaError(400, "manifest: path %r must be relative, naming a file" % p)
    for part in p.split("/"):
        if part in (".", ".."):
            raise OtaError(400, "manifest: path %r may not hold . or .." % p)
    if p in ROOT_FILES:
        raise OtaError(400, "manifest: %r is a root file, never updated over the air" % p)


def parse_manifest(raw):
    """(version, seq, [(path, size, digest bytes)]) of a signed manifest's bytes; raises
    OtaError(400)."""
    try:
        doc, dups = jsonread.read(raw)
    except jsonread.JsonError as e:
        raise OtaError(400, "manifest: not JSON: %s" % e.msg)
    return manifest_of(doc, dups)


def manifest_of(doc, dups=()):
    """(version, seq, [(path, size, digest bytes)]) of a manifest read as JSON (`dups`: its
    duplicate keys, (path, key)); raises OtaError(400)."""
    version, seq = manifest_head(doc, dups)
    out = []
    seen = set()
    for f in doc["files"]:
        p = file_path(f)
        if p in seen:
            raise OtaError(400, "manifest: %r is listed twice" % p)
        seen.add(p)
        size, d = file_rest(f, p)
        out.append((p, size, d))
    for p in seen:  # a path that is also another one's folder ("q" and "q/y.py")
        i = p.find("/")
        while i > 0:
            if p[:i] in seen:
                raise OtaError(400, folder_clash(p[:i], p))
            i = p.find("/", i + 1)
    return version, seq, out


def manifest_head(doc, dups, count=None):
    """(version, seq) of a manifest read as JSON, its files list checked to hold 1 to MAX_FILES
    (`count` of them when they were read one at a time: ManifestReader(True)); raises
    OtaError(400)."""
    if dups:
        raise OtaError(400, "manifest: duplicate key %r" % (dups[0][1],))
    if not isinstance(doc, dict):
        raise OtaError(400, "manifest: not a JSON object")
    version = doc.get("version")
    if not isinstance(version, str) or not 0 < len(version) <= MAX_VERSION:
        raise OtaError(
            400, "manifest: version must be a string of 1 to %d characters" % MAX_VERSION
        )
    seq = doc.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or not 0 < seq <= MAX_SEQ:
        raise OtaError(
            400,
            "manifest: seq (the update's sequence number) must be a whole number from 1 to %d"
            % MAX_SEQ,
        )
    files = doc.get("files")
    if count is None and isinstance(files, list):
        count = len(files)
    if not isinstance(files, list) or not 0 < count <= MAX_FILES:
        raise OtaError(400, "manifest: files must be a list of 1 to %d files" % MAX_FILES)
    return version, seq


def file_path(f):
    """The path of one entry of the manifest's files; raises OtaError(400)."""
    if not isinstance(f, dict):
        raise OtaError(400, "manifest: each file must be an object {path, size, sha256}")
    p = f.get("path")
    check_path(p)
    return p


def file_rest(f, p):
    """(size, digest bytes) of the entry of path `p`; raises OtaError(400)."""
    size, digest = f.get("size"), f.get("sha256")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise OtaError(400, "manifest: %s: size must be a whole number of bytes" % p)
    if not isinstance(digest, str) or len(digest) != 64:
        raise OtaError(400, "manifest: %s: sha256 must be 64 hex digits" % p)
    try:
        return size, binascii.unhexlify(digest)
    except Exception:
        raise OtaError(400, "manifest: %s: sha256 must be 64 hex digits" % p)


def folder_clash(q, p):
    return "manifest: %r is a file and the folder of %r" % (q, p)


def entry_bit(p):
    """The bit of the entry module (ENTRY) that path `p` is, as .mpy or .py; 0 for any other."""
    for k in range(len(ENTRY)):
        m = ENTRY[k]
        if p.startswith(m) and p[len(m) :] in (".mpy", ".py"):
            return 1 << k
    return 0


def missing_of(have):
    """The role's entry modules (ENTRY) whose bits `have` lacks."""
    return [ENTRY[k] for k in range(len(ENTRY)) if not (have >> k) & 1]


def path_hash(p, end=None):
    """A 24-bit hash of p[:end] (a small int on every port: a match is then compared exactly)."""
    h = 5381
    for k in range(len(p) if end is None else end):
        h = ((h * 33) ^ ord(p[k])) & 0xFFFFFF
    return h


_MAX_TOKEN = const(128)  # bytes of one string or number in a manifest (a path is 96 at most)
_MAX_NEST = const(8)
# what the reader expects next
_VALUE = const(0)
_VALUE_OR_END = const(1)  # after "["
_KEY_OR_END = const(2)  # after "{"
_KEY = const(3)  # after "," in an object
_COLON = const(4)
_NEXT = const(5)  # "," or the end of the open container
_DONE = const(6)
# inside a token
_OUT = const(0)
_STR = const(1)
_ESCAPE = const(2)
_UHEX = const(3)
_ATOM = const(4)  # a number or true/false/null
_ESCAPES = {0x22: 0x22, 0x5C: 0x5C, 0x2F: 0x2F, 0x62: 8, 0x66: 12, 0x6E: 10, 0x72: 13, 0x74: 9}
_ATOM_BYTES = b"0123456789+-.eEtrufalsn"


class ManifestReader:
    """A manifest's JSON read as its bytes arrive (`feed`, then `finish()` -> (doc, dups)),
    so no buffer of the manifest's size is ever needed: only its values, built from pieces
    of at most 128 bytes (a small heap has no large free block once it has run a while). The
    first error is kept (`error`) and ends the reading; the caller says it after the
    signature's check, which comes first. Strings, numbers, true/false/null, objects
    (duplicate keys listed, the last kept) and arrays, nested 8 deep at most, as RFC 8259.
    `entries`: each element of the top object's "files" list is not kept but handed out, one
    at a time: `feed` returns after the byte that ended it (the bytes it took), with `ready`
    set and the element in `entry`; the caller takes it, clears `ready` and feeds the rest."""

    def __init__(self, entries=False):
        self.entries = entries
        self.ready = False
        self.entry = None
        self.tok = bytearray(_MAX_TOKEN)
        self.n = 0
        self.mode = _OUT
        self.expect = _VALUE
        self.stack = []  # [container, its pending key], innermost last
        self.key = False  # the string being read is a key
        self.u = 0  # the \u escape's code point so far, and its digits
        self.ud = 0
        self.doc = None
        self.dups = []
        self.error = None
        self.at = 0  # bytes read

    def _fail(self, why):
        if self.error is None:
            self.error = "%s at byte %d" % (why, self.at)

    def feed(self, data):
        k = 0
        for c in data:
            k += 1
            if self.error is not None:
                return k
            if self.mode == _ATOM:
                if c in _ATOM_BYTES:
                    self._put(c)
                    self.at += 1
                    continue
                self._atom()
                if self.error is not None:
                    return k
            if self.mode == _OUT:
                self._structure(c)
            elif self.mode == _STR:
                if c == 0x22:
                    self._string()
                elif c == 0x5C:
                    self.mode = _ESCAPE
                elif c < 0x20:
                    self._fail("a control character in a string")
                else:
                    self._put(c)
            elif self.mode == _ESCAPE:
                if c == 0x75:
                    self.mode = _UHEX
                    self.u = self.ud = 0
                elif c in _ESCAPES:
                    self._put(_ESCAPES[c])
                    self.mode = _STR
                else:
                    self._fail("a bad escape")
            else:  # _UHEX
                d = _hexval(c)
                if d < 0:
                    self._fail("a bad \\u escape")
                else:
                    self.u = self.u * 16 + d
                    self.ud += 1
                    if self.ud == 4:
                        if 0xD800 <= self.u < 0xE000:
                            self._fail("a \\u escape of a surrogate")
                        else:
                            for b in chr(self.u).encode():
                                self._put(b)
                        self.mode = _STR
            self.at += 1
            if self.ready:
                return k
        return k

    def finish(self):
        """(doc, dups) once every byte came; raises ValueError with the first error."""
        if self.mode == _ATOM and self.error is None:
            self._atom()
        if self.error is None and (self.mode != _OUT or self.expect != _DONE):
            self._fail("the manifest ends inside its value")
        if self.error is not None:
            raise ValueError(self.error)
        return self.doc, self.dups

    def _put(self, b):
        if self.n >= _MAX_TOKEN:
            self._fail("a string or number longer than %d bytes" % _MAX_TOKEN)
            return
        self.tok[self.n] = b
        self.n += 1

    def _structure(self, c):
        e = self.expect
        if c in b" \t\n\r":
            return
        if e == _DONE:
            self._fail("data after the manifest's value")
        elif e == _VALUE or e == _VALUE_OR_END:
            if c == 0x7B or c == 0x5B:  # { [
                if len(self.stack) >= _MAX_NEST:
                    self._fail("nested deeper than %d" % _MAX_NEST)
                    return
                self.stack.append([{} if c == 0x7B else [], None])
                self.expect = _KEY_OR_END if c == 0x7B else _VALUE_OR_END
            elif c == 0x5D and e == _VALUE_OR_END:  # ]
                self._value(self.stack.pop()[0])
            elif c == 0x22:
                self.key = False
                self.mode = _STR
                self.n = 0
            elif c in _ATOM_BYTES:
                self.mode = _ATOM
                self.n = 0
                self._put(c)
            else:
                self._fail("%r where a value belongs" % chr(c))
        elif e == _KEY_OR_END or e == _KEY:
            if c == 0x22:
                self.key = True
                self.mode = _STR
                self.n = 0
            elif c == 0x7D and e == _KEY_OR_END:  # }
                self._value(self.stack.pop()[0])
            else:
                self._fail("%r where a key belongs" % chr(c))
        elif e == _COLON:
            if c == 0x3A:
                self.expect = _VALUE
            else:
                self._fail("%r where a colon belongs" % chr(c))
        else:  # _NEXT
            top = self.stack[-1][0]
            is_obj = isinstance(top, dict)
            if c == 0x2C:
                self.expect = _KEY if is_obj else _VALUE
            elif (c == 0x7D and is_obj) or (c == 0x5D and not is_obj):
                self._value(self.stack.pop()[0])
            else:
                self._fail("%r where a comma or the end belongs" % chr(c))

    def _string(self):
        self.mode = _OUT
        try:
            s = bytes(self.tok[: self.n]).decode()
        except UnicodeError:
            self._fail("a string that is not UTF-8")
            return
        if self.key:
            top = self.stack[-1]
            if s in top[0]:
                self.dups.append((len(self.stack), s))
            top[1] = s
            self.expect = _COLON
        else:
            self._value(s)

    def _atom(self):
        self.mode = _OUT
        t = bytes(self.tok[: self.n])
        if t == b"true":
            self._value(True)
        elif t == b"false":
            self._value(False)
        elif t == b"null":
            self._value(None)
        elif _is_int(t):
            self._value(int(t))
        else:
            self._fail("%r is not a number this manifest takes" % t.decode())

    def _value(self, v):
        if not self.stack:
            self.doc = v
            self.expect = _DONE
            return
        top = self.stack[-1]
        if isinstance(top[0], dict):
            top[0][top[1]] = v
        elif (
            self.entries
            and len(self.stack) == 2
            and self.stack[0][1] == "files"
            and isinstance(self.stack[0][0], dict)
        ):
            self.entry = v  # one of the files, handed out, never kept
            self.ready = True
        else:
            top[0].append(v)
        self.expect = _NEXT


def _hexval(c):
    if 0x30 <= c <= 0x39:
        return c - 0x30
    if 0x61 <= c <= 0x66:
        return c - 0x57
    if 0x41 <= c <= 0x46:
        return c - 0x37
    return -1


def _is_int(t):
    # JSON's integer: -?(0|[1-9][0-9]*); a manifest holds no other number
    d = t[1:] if t[:1] == b"-" else t
    if not d or (len(d) > 1 and d[0] == 0x30) or len(d) > 20:
        return False
    for c in d:
        if not 0x30 <= c <= 0x39:
            return False
    return True


class Entries:
    """The manifest's file entries read back from its scratch file `f` one at a time (`next()`:
    True with the entry in `entry`, False at the end; then `finish()` -> (doc, dups) of the
    rest, its files list empty). From the start, or from `at`, the byte after an entry
    (`offset()` gives it). A 64-byte buffer and one entry's values at a time: the heap does not
    grow with the number of files (docs/master.md)."""

    def __init__(self, f, at=None):
        self.f = f
        self.buf = bytearray(64)
        self.n = self.i = 0
        self.reader = r = ManifestReader(True)
        self.entry = None
        if at is not None:  # inside the top object's files list, after one of them
            f.seek(at)
            r.stack = [[{}, "files"], [[], None]]
            r.expect = _NEXT
            r.at = at

    def next(self):
        r = self.reader
        while not r.ready:
            if r.error is not None:
                return False
            if self.i == self.n:
                self.n = self.f.readinto(self.buf) or 0
                self.i = 0
                if not self.n:
                    return False
            self.i += r.feed(memoryview(self.buf)[self.i : self.n])
        r.ready = False
        self.entry = r.entry
        r.entry = None
        return True

    def offset(self):
        return self.reader.at

    def finish(self):
        while self.next():
            pass
        self.close()
        return self.reader.finish()

    def close(self):
        self.f.close()


# -- the flash --------------------------------------------------------------------------------


def _join(*parts):
    return "/".join([p for p in parts if p])


def _is_dir(path):
    try:
        return os.stat(path)[0] & 0x4000 != 0
    except OSError:
        return False


def rmtree(path):
    """Remove a folder and all it holds (no shutil on a board), a few names at a time: a
    listing of a whole folder (the stage's 36 pads: a list of 512 B) is a block a heap that
    has run a while may not have, and a refused upload's stage then stayed."""
    if not _is_dir(path):
        try:
            os.remove(path)
        except OSError:
            pass
        return
    while True:
        names = _names(path, 8)
        if not names:
            break
        for name in names:
            rmtree(path + "/" + name)
    os.rmdir(path)


def _names(path, most):
    # up to `most` names in folder `path`, its listing read to the end (the folder closed)
    if not hasattr(os, "ilistdir"):  # CPython
        return os.listdir(path)[:most]
    out = []
    for e in os.ilistdir(path):
        if len(out) < most:
            out.append(e[0])
    return out


def makedirs(path):
    """Every missing folder of `path` ("a/b/c")."""
    acc = ""
    for part in path.split("/"):
        if not part:
            acc = "/" if not acc else acc
            continue
        acc = part if not acc else (acc + part if acc.endswith("/") else acc + "/" + part)
        if not _is_dir(acc):
            os.mkdir(acc)


def free_bytes(root):
    """Free bytes on the file system holding `root`, or None where it cannot be told."""
    try:
        st = os.statvfs(root or ".")
        return st[0] * st[4]
    except (OSError, AttributeError):
        return None


def read_state(root):
    """The state in ota.json (a missing or unreadable file: the root slot running)."""
    try:
        with open(_join(root, STATE_FILE)) as f:
            st = json.loads(f.read())
        if isinstance(st, dict):
            return st
    except (OSError, ValueError):
        pass
    return {"slot": "", "version": None, "previous": None, "state": RUNNING, "result": None}


def _write_whole(path, text):
    # written whole, then renamed over the old one (a cut write leaves the old)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    try:
        os.remove(path)  # littlefs and posix rename over a file; FAT does not
    except OSError:
        pass
    os.rename(tmp, path)


def write_state(root, st):
    """ota.json written whole, then renamed over the old one."""
    _write_whole(_join(root, STATE_FILE), json.dumps(st))


def read_seq(root):
    """The highest sequence number this master accepted (ota.seq; none yet: 0). Its own file,
    which boot.py never rewrites: an older boot.py's rollback cannot lose it."""
    try:
        with open(_join(root, SEQ_FILE)) as f:
            n = int(f.read().strip())
        return n if n > 0 else 0
    except (OSError, ValueError):
        return 0


def write_seq(root, n):
    _write_whole(_join(root, SEQ_FILE), "%d\n" % n)


def _remove(path):
    try:
        os.remove(path)
    except OSError:
        pass


def inactive(slot):
    """The slot an update goes to while `slot` runs ("" the root: "a")."""
    return "b" if slot == "a" else "a"


class SlotWriter:
    """Writes one upload under `root`: the manifest's bytes to the scratch file (`scratch()`,
    read back by `manifest()`, gone with `drop_scratch()`), the files to the stage folder
    (begin() empties it, open(path) a file in it); install() makes the stage the slot `slot`,
    abort() removes what was written. Nothing else on the flash changes."""

    def __init__(self, root, slot):
        self.root = root
        self.slot = slot
        self.dir = _join(root, slot)
        self.stage = _join(root, STAGE)
        self.scratch_path = _join(root, SCRATCH)
        self.written = 0  # files opened

    def scratch(self):
        return open(self.scratch_path, "wb", 0)  # the pieces as they come, no buffer of its own

    def manifest(self):
        return open(self.scratch_path, "rb", 0)  # read into the caller's buffer, no other

    def drop_scratch(self):
        _remove(self.scratch_path)

    def begin(self):
        rmtree(self.stage)
        makedirs(self.stage)

    def open(self, path):
        d = path.rpartition("/")[0]
        if d:
            makedirs(_join(self.stage, d))
        self.written += 1
        return open(_join(self.stage, path), "wb")

    def install(self):
        self.drop_scratch()
        rmtree(self.dir)
        os.rename(self.stage, self.dir)

    def abort(self):
        self.drop_scratch()
        rmtree(self.stage)


class Receiver:
    """Takes a bundle's bytes in pieces (`feed`), checks and writes them through `writer`;
    `finish()` after the last. Every refusal raises OtaError; the caller aborts the writer.
    `floor`: the highest sequence number accepted so far (a bundle must carry a higher one)."""

    def __init__(self, writer, key, length=None, max_manifest=MAX_MANIFEST, free=None, floor=0):
        self.writer = writer
        self.key = key
        self.length = length  # the Content-Length, checked against the manifest
        self.max_manifest = max_manifest
        self.free = free  # free flash bytes, or None
        self.floor = floor
        self.head = bytearray(HEAD)
        self.scratch = None  # the scratch file while the manifest arrives
        self.manifest_len = 0
        self.mac = None  # (inner hash, outer pad) of the manifest's HMAC, taken as it arrives
        self.got = 0  # bytes of the current part
        self.total = 0  # bytes fed
        self.version = None
        self.seq = None
        self.files = None  # the number of files, once the manifest is checked
        self.at = None  # the manifest's byte after the entry of the file being written
        self.index = 0  # the file being written: its path, size and digest
        self.path = None
        self.size = 0
        self.digest = None
        self.file = None
        self.hash = None
        self.done = False

    def feed(self, data):
        mv = memoryview(data)
        n = len(mv)
        i = 0
        self.total += n
        while i < n:
            if self.files is None and self.scratch is None:
                take = min(HEAD - self.got, n - i)
                self.head[self.got : self.got + take] = mv[i : i + take]
                self.got += take
                i += take
                if self.got == HEAD:
                    self._start_manifest()
            elif self.files is None:
                take = min(self.manifest_len - self.got, n - i)
                part = mv[i : i + take]
                self.mac[0].update(part)
                self.scratch.write(part)
                self.got += take
                i += take
                if self.got == self.manifest_len:
                    self._check_manifest()
            elif self.index < self.files:
                take = min(self.size - self.got, n - i)
                if take:
                    part = mv[i : i + take]
                    self.file.write(part)
                    self.hash.update(part)
                    self.got += take
                    i += take
                if self.got == self.size:
                    self._end_file()
            else:
                raise OtaError(400, "bundle: %d bytes after the last file" % (n - i))

    def _start_manifest(self):
        if bytes(self.head[:6]) != MAGIC:
            raise OtaError(400, "bundle: not an update bundle (no OBOTA1 magic)")
        m = (self.head[6] << 8) | self.head[7]
        if m == 0 or m > self.max_manifest:
            raise OtaError(
                413, "bundle: manifest of %d bytes, the limit is %d" % (m, self.max_manifest)
            )
        self.manifest_len = m
        # signed as it arrives, kept on the flash: neither held whole nor parsed before the
        # signature matched (docs/master.md)
        self.mac = hmac_start(self.key)
        self.scratch = self.writer.scratch()
        self.got = 0

    def _check_manifest(self):
        self.scratch.close()
        self.scratch = None
        if not same(hmac_end(*self.mac), self.head[8:]):
            raise OtaError(403, "bundle: the manifest's signature does not match the update key")
        self.mac = None
        # read back from the flash entry by entry, twice (the check, then each file's entry as
        # its bytes come): never the list of files, only a 24-bit hash of each path
        count, size, have, hashes = self._check_entries()
        self._check_folders(hashes)
        hashes = None
        missing = missing_of(have)
        if missing:
            raise OtaError(
                400,
                "bundle: the master role's entry modules are missing (each as .mpy or .py): "
                + ", ".join(missing),
            )
        if self.seq <= self.floor:
            raise OtaError(
                409,
                "bundle: sequence number %d is not newer than %d, the highest this master "
                "accepted (a replayed or older bundle)" % (self.seq, self.floor),
            )
        size += HEAD + self.manifest_len
        if self.length is not None and size != self.length:
            raise OtaError(
                400, "bundle: the manifest makes %d bytes, the upload has %d" % (size, self.length)
            )
        if self.free is not None and size > self.free:
            raise OtaError(
                413, "bundle: %d bytes do not fit the %d free on flash" % (size, self.free)
            )
        self.files = count
        gc.collect()
        self.got = 0
        self.writer.begin()
        self._open()

    def _check_entries(self):
        # manifest_of's refusals but the folders', in its order: (count, the files' bytes, the
        # entry modules' bits, the paths' hashes)
        cur = Entries(self.writer.manifest())
        bad = None  # the first entry's refusal: said after the JSON's and the head's
        count = size = have = 0
        hashes = array("I")
        try:
            while cur.next():
                f = cur.entry
                cur.entry = None
                count += 1
                if bad is not None or count > MAX_FILES:
                    continue
                try:
                    p = file_path(f)
                    h = path_hash(p)
                    for j in range(len(hashes)):
                        if hashes[j] == h and self._path_at(j) == p:
                            raise OtaError(400, "manifest: %r is listed twice" % p)
                    n, _ = file_rest(f, p)
                except OtaError as e:
                    bad = e
                    continue
                hashes.append(h)
                size += n
                have |= entry_bit(p)
            doc, dups = cur.finish()
        except ValueError as e:
            raise OtaError(400, "manifest: not JSON: %s" % e)
        finally:
            cur.close()
        self.version, self.seq = manifest_head(doc, dups, count)
        if bad is not None:
            raise bad
        return count, size, have, hashes

    def _check_folders(self, hashes):
        # a path that is also another one's folder ("q" and "q/y.py"), in either order
        cur = Entries(self.writer.manifest())
        try:
            while cur.next():
                p = cur.entry["path"]
                cur.entry = None
                i = p.find("/")
                while i > 0:
                    h = path_hash(p, i)
                    for j in range(len(hashes)):
                        if hashes[j] == h and self._path_at(j) == p[:i]:
                            raise OtaError(400, folder_clash(p[:i], p))
                    i = p.find("/", i + 1)
        finally:
            cur.close()

    def _path_at(self, j):
        # the path of file j, read again from the flash (a hash matched: compared exactly)
        cur = Entries(self.writer.manifest())
        try:
            for _ in range(j + 1):
                cur.next()
            return cur.entry.get("path")
        finally:
            cur.close()

    def _open(self):
        if self.index < self.files:
            # the file's entry, read again from where the last one ended: nothing of the
            # manifest is held while the file's bytes come but that offset
            self.path = None
            cur = Entries(self.writer.manifest(), self.at)
            try:
                if not cur.next():
                    raise OtaError(500, "bundle: the manifest on the flash ends before its files")
                self.at = cur.offset()
                f = cur.entry
            finally:
                cur.close()
            cur = None
            self.path = f["path"]
            self.size, self.digest = file_rest(f, self.path)
            f = None
            self.file = self.writer.open(self.path)
            self.hash = hashlib.sha256()
            if self.size == 0:
                self._end_file()
        else:
            self.done = True

    def _end_file(self):
        self.file.close()
        self.file = None
        if not same(self.hash.digest(), self.digest):
            raise OtaError(422, "bundle: %s: SHA-256 does not match the manifest" % self.path)
        self.index += 1
        self.got = 0
        self._open()

    def where(self):
        """Where the bundle's bytes stopped: in its head, its manifest, or inside a file."""
        if self.files is None:
            return "in its manifest" if self.scratch is not None else "in its head"
        if self.path is None:
            return "reading the entry of file %d of %d" % (self.index + 1, self.files)
        if self.index < self.files:
            return "inside " + self.path
        return "after its last file"

    def close(self):
        """Close the files left open by a refusal or a cut upload."""
        for f in (self.file, self.scratch):
            if f is not None:
                f.close()
        self.file = self.scratch = None

    def finish(self):
        """Raises OtaError(400) unless every file arrived whole."""
        if self.done:
            return
        where = self.where()
        self.close()
        raise OtaError(400, "bundle: upload ended after %d bytes, %s" % (self.total, where))


class Service:
    """The master's update state over a flash `root`: the upload into the stage and then the
    inactive slot, the trial after it, commit and rollback, GET /ota's document. `reset()`
    restarts the board, `online()` the module_ids of the organs registered now, `emit` the event
    log; `upload_ms`: the whole upload's deadline (master/ota/routes.py keeps it)."""

    def __init__(
        self,
        root="",
        key=None,
        token=None,
        online=None,
        reset=None,
        emit=log.emit,
        upload_ms=120000,
    ):
        self.root = root
        self.key = key
        self.token = token
        self.online = online or (lambda: [])
        self.reset = reset
        self.emit = emit
        self.upload_ms = upload_ms
        self.busy = False
        self.last = None  # the last result not in the state file (a refused upload)
        self.st = read_state(root)
        # an upload cut by a reset or a power cut left its stage: nothing names it
        SlotWriter(root, "").abort()
        self.floor = max(read_seq(root), _num(self.st.get("seq")))

    def target(self):
        """The slot a rollback goes to ("" the USB install), or None: the previous slot when
        it is known good (it ran committed, or runs now under a trial) and its files are there."""
        st = self.st
        p = st.get("previous")
        if p is None or not (st.get("previous_ok") or st.get("state") == TRIAL):
            return None
        if p and not _is_dir(_join(self.root, p)):
            return None
        return p

    def document(self):
        st = self.st
        result = self.last or st.get("result")
        p = self.target()
        return {
            "version": st.get("version"),
            "seq": st.get("seq"),
            "highest_seq": self.floor,  # an update must carry a higher one
            "previous": st.get("previous_version") if p is not None else None,
            "previous_slot": p,  # where a rollback goes; None: nowhere
            "slot": st.get("slot", ""),
            "state": st.get("state", RUNNING),
            "uploading": self.busy,
            "result": result,
            "free_flash": free_bytes(self.root),
            "mpy": getattr(sys.implementation, "_mpy", None),  # .mpy version and arch to build for
        }

    def refuse(self, status, reason):
        self.last = {"ok": False, "status": status, "reason": reason}
        self.emit("ota", [("result", "refused"), ("status", status), ("reason", reason)])

    def receiver(self, length):
        """A Receiver into the stage; raises OtaError when no upload may start."""
        if not self.token:
            raise OtaError(401, "updates need a bearer token: set http.token in config.json")
        if self.key is None:
            raise OtaError(403, "this master has no update key (config.json ota.key)")
        if self.busy:
            raise OtaError(409, "an update is already uploading")
        if self.st.get("state") == TRIAL:
            raise OtaError(409, "the running code is on trial; wait for its commit or rollback")
        w = SlotWriter(self.root, inactive(self.st.get("slot", "")))
        self.busy = True
        return Receiver(w, self.key, length, MAX_MANIFEST, free_bytes(self.root), self.floor)

    def ended(self, rx, error=None):
        """After an upload: a refusal removes what it wrote and is recorded; a verified bundle
        becomes the inactive slot, on trial (the caller resets the board). Returns the result."""
        self.busy = False
        rx.close()
        if error is not None:
            rx.writer.abort()
            self.refuse(error.status, error.reason)
            return self.last
        old = self.st
        w = rx.writer
        write_seq(self.root, rx.seq)  # first: a replay is refused from now on, whatever follows
        self.floor = rx.seq
        if old.get("previous") == w.slot:
            # the rollback target's files go now: the state stops naming them first
            st = dict(old)
            st["previous"] = st["previous_version"] = st["previous_seq"] = None
            st["previous_ok"] = False
            write_state(self.root, st)
        w.install()
        st = {
            "slot": w.slot,
            "version": rx.version,
            "seq": rx.seq,
            "previous": old.get("slot", ""),  # running now: what a failed trial goes back to
            "previous_version": old.get("version"),
            "previous_seq": old.get("seq"),
            "previous_ok": True,
            "state": TRIAL,
            "boots": 0,
            "organs": sorted(self.online()),
            "result": {"ok": True, "reason": "uploaded and verified; on trial after the reset"},
        }
        write_state(self.root, st)
        self.st = st
        self.last = None
        self.emit(
            "ota",
            [("result", "trial"), ("version", rx.version), ("seq", rx.seq), ("slot", w.slot)],
        )
        return st["result"]

    def commit(self, why):
        st = dict(self.st)
        st["state"] = RUNNING
        st["previous_ok"] = True  # the trial's previous ran before it: known good
        st.pop("boots", None)
        st["result"] = {"ok": True, "reason": "committed: " + why}
        write_state(self.root, st)
        self.st = st
        self.emit("ota", [("result", "committed"), ("version", st.get("version")), ("why", why)])

    def rollback_refusal(self):
        """Why POST /ota/rollback cannot go back now ("" when it can)."""
        if self.busy:
            return "an update is uploading: a rollback waits until it has ended"
        st = self.st
        if self.target() is not None:
            return ""
        p = st.get("previous")
        if p is None:
            return (
                "no known-good code to go back to: the running code has no previous slot "
                "(none yet, or it was replaced by an update or failed its trial)"
            )
        if not st.get("previous_ok"):
            return "no known-good code to go back to: slot %r did not commit its trial" % p
        return "no known-good code to go back to: slot %r has no files" % p

    def roll_back(self, why):
        """To the rollback target on the next boot (the caller resets); False when there is none
        (rollback_refusal says why). During a trial: the trial fails now."""
        st = self.st
        if self.busy or self.target() is None:
            return False
        if st.get("state") == TRIAL:
            self.fail_trial(why)
            return True
        new = {
            "slot": st["previous"],
            "version": st.get("previous_version"),
            "seq": st.get("previous_seq"),
            "previous": st.get("slot", ""),  # it ran committed: known good, a rollback's target
            "previous_version": st.get("version"),
            "previous_seq": st.get("seq"),
            "previous_ok": True,
            "state": ROLLED_BACK,
            "result": {"ok": False, "reason": "rolled back: " + why},
        }
        self._rolled(new, why)
        return True

    def fail_trial(self, why):
        """The trial did not commit: back to the code that ran before it, which then has no
        rollback target (the failed slot never is one)."""
        st = self.st
        new = {
            "slot": st.get("previous") or "",
            "version": st.get("previous_version"),
            "seq": st.get("previous_seq"),
            "previous": None,
            "previous_version": None,
            "previous_seq": None,
            "previous_ok": False,
            "state": ROLLED_BACK,
            "result": {"ok": False, "reason": "rolled back: " + why},
        }
        self._rolled(new, why)

    def _rolled(self, new, why):
        write_state(self.root, new)
        self.st = new
        self.emit("ota", [("result", "rolled_back"), ("version", new["version"]), ("why", why)])

    def trial_check(self, http_ok):
        """During a trial: the reason it cannot commit yet ("" when it can)."""
        if not http_ok:
            return "the HTTP server has not answered"
        now = self.online()
        missing = [m for m in self.st.get("organs", ()) if m not in now]
        if missing:
            return "organs not registered again: " + ", ".join(missing)
        return ""


def _num(v):
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0
