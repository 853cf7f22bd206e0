# The update's flash: the slots, the stage and the scratch file of an upload, the state file (ota.json) and ota.seq.
#
# The flash (a board's "/", a host's board folder) holds: boot.py, main.py, board.json (the
# root, installed over USB, never updated here), ota.json (the state), ota.seq (the highest
# sequence number accepted), the slots "a" and "b" (a slot is a folder laid out as /lib) and,
# during an upload, the stage "new" and the scratch "ota.manifest". Slot "" is the root's /lib,
# the USB install.
import json
import os

STATE_FILE = "ota.json"
SEQ_FILE = "ota.seq"
SCRATCH = "ota.manifest"  # the manifest's bytes until their signature is checked
STAGE = "new"  # the files of the upload under way, a slot once every one is verified
SLOTS = ("a", "b")
ROOT_FILES = ("boot.py", "main.py", "board.json", "settings.json", "config.json", STATE_FILE)

RUNNING = "running"
TRIAL = "trial"
ROLLED_BACK = "rolled_back"


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
