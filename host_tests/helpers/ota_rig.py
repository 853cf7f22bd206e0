# The update's test rig: a board's flash folder in /tmp, signed bundles, an upload in pieces, the flash as a dict (both interpreters).
import hashlib
import json
import os
import sys

from master.ota import service as ota

MP = sys.implementation.name == "micropython"
KEY = b"0123456789abcdef0123456789abcdef"
_n = [0]
_seq = [0]


def tmp():
    _n[0] += 1
    d = "%s/ota-core-%d-%d-%s" % (
        "/tmp",
        os.getpid() if hasattr(os, "getpid") else 0,
        _n[0],
        rand(),
    )
    ota.rmtree(d)
    ota.makedirs(d + "/organbus")
    with open(d + "/main.py", "w") as f:
        f.write("print('root main')\n")
    with open(d + "/organbus/x.py", "w") as f:
        f.write("X = 1\n")
    return d


def rand():
    if hasattr(os, "urandom"):
        return "".join("%02x" % b for b in os.urandom(4))
    import time  # the RV32 image under QEMU has no urandom

    return "%x" % time.ticks_us()


def hexd(b):
    return "".join("%02x" % x for x in b)


def bundle(files, version="2.0", key=KEY, digests=None, seq=None):
    # each bundle built is newer than the one before (as the owner's tools/flash.py --ota
    # signs them), unless the test gives its seq
    if seq is None:
        _seq[0] += 1
        seq = _seq[0]
    man = {"version": version, "seq": seq, "files": []}
    for i, (p, data) in enumerate(files):
        d = digests[i] if digests else hexd(hashlib.sha256(data).digest())
        man["files"].append({"path": p, "size": len(data), "sha256": d})
    raw = json.dumps(man).encode()
    out = ota.bundle_head(key, raw) + raw
    for _, data in files:
        out += data
    return out


def tree(d):
    out = {}
    for name in sorted(os.listdir(d)):
        p = d + "/" + name
        if ota._is_dir(p):
            for k, v in tree(p).items():
                out[name + "/" + k] = v
        else:
            with open(p, "rb") as f:
                out[name] = f.read()
    return out


FILES = [
    ("master/app.py", b"print('new app')\n" * 40),
    ("organbus/x.py", b"X = 2\n"),
    ("e", b""),
    ("master/ota/service.mpy", b"M ota"),
    ("master/ota/routes.py", b"# otalink\n"),
    ("organbus/boardfile.py", b"# boardfile\n"),
    ("organbus/log.py", b"# log\n"),
]


def upload(svc, data, step, length=None):
    rx = svc.receiver(len(data) if length is None else length)
    try:
        for i in range(0, len(data), step):
            rx.feed(data[i : i + step])
        rx.finish()
    except ota.OtaError as e:
        return svc.ended(rx, e), rx
    return svc.ended(rx), rx


def svc(d, token="t", key=KEY):
    lines = []
    s = ota.Service(d, key, token, lambda: ["led"], None, lambda e, p: lines.append((e, p)))
    return s, lines


def boot_module():
    """boards/c6_master/boot.py as a module (its choose(root))."""
    here = "/".join(__file__.split("/")[:-3]) or "."  # host_tests/helpers/ -> the tree
    sys.path.insert(0, here + "/boards/c6_master")
    try:
        import boot
    finally:
        sys.path.pop(0)
    return boot


def booted(d):
    """The board resets into its trial and the trial passes: boot.py picks the slot, a fresh
    Service commits; returns that Service."""
    saved = list(sys.path)
    try:
        boot_module().choose(d)
    finally:
        sys.path[:] = saved
    s = svc(d)[0]
    s.commit("test")
    return s
