# The update's bundle: its format (HEAD, the signed manifest, the files), HMAC-SHA256, the manifest's checks, and Receiver, its streamed check into the stage.
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
import binascii
from array import array
import gc
import hashlib

from micropython import const

from organbus import jsonread
from master.links.httpmsg import same
from master.ota.reader import Entries
from master.ota.service import OtaError
from master.ota.slots import ROOT_FILES

MAGIC = b"OBOTA1"
HEAD = const(40)  # magic (6) + manifest length (2) + HMAC-SHA256 (32)
MAX_MANIFEST = const(
    16384
)  # bytes: MAX_FILES of long paths; the manifest waits in a file, not the heap
MAX_FILES = const(96)
MAX_VERSION = const(40)
MAX_SEQ = 0x7FFFFFFF
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
_BLOCK = const(64)  # SHA-256 block size, for HMAC
_PATH_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./"


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
