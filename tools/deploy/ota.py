# The master's update over the air from the host: the bundle (signed), the push with a progress bar, the wait for commit or rollback.
import hashlib
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse

import toolpath  # noqa: F401  (the tree, lib/ and tools/ on sys.path)
from deploy.base import ARCH_IDS, ARCH_NAMES, FlashError, ROOT, say
from deploy.install import compile_plan
from deploy.roles import role_files
from master.ota import service as _ota  # the one bundle format: the board's own module

KEY_ENV = "ORGANBUS_OTA_KEY"
KEY_FILE = os.path.join(os.path.expanduser("~"), ".config", "organbus", "ota.key")


def load_key(path=None):
    """The update key (bytes): --ota-key FILE, else $ORGANBUS_OTA_KEY, else ~/.config/organbus/ota.key
    (hex text, 32 bytes or more)."""
    text, where = None, None
    if path:
        text, where = _read(path), path
    elif os.environ.get(KEY_ENV):
        text, where = os.environ[KEY_ENV], "$" + KEY_ENV
    elif os.path.exists(KEY_FILE):
        text, where = _read(KEY_FILE), KEY_FILE
    if text is None:
        raise FlashError(
            "no update key: give --ota-key FILE, set %s or write %s (hex: python -c "
            "'import secrets; print(secrets.token_hex(32))'); the master has the same key in "
            'its /config.json as "ota": {"key": ...}' % (KEY_ENV, KEY_FILE)
        )
    try:
        return _ota.key_bytes(text.strip())
    except ValueError as e:
        raise FlashError("the update key in %s: %s" % (where, e))


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        raise FlashError("cannot read the update key %s: %s" % (path, e.strerror))


def default_version():
    try:
        h = subprocess.run(
            ["git", "-C", ROOT, "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except OSError:
        h = ""
    return ((h + "-") if h else "") + time.strftime("%Y%m%d-%H%M%S")


def bundle_files(arch, stage):
    """[(path in the slot, bytes)]: exactly the master role's modules, compiled for `arch`, and
    its data files; the root files (boot.py, main.py, board.json) stay as the USB install put them.
    """
    files = role_files("master")
    out = []
    for cmd, src, staged, dest in compile_plan(files, arch, stage):
        os.makedirs(os.path.dirname(staged), exist_ok=True)
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            raise FlashError("mpy-cross refused %s:\n%s" % (os.path.relpath(src, ROOT), p.stderr))
        with open(staged, "rb") as f:
            out.append((dest[len("/lib/") :], f.read()))
    for src, dest in files["data"]:
        with open(src, "rb") as f:
            out.append((dest, f.read()))
    return out


def bundle(key, files, version, seq=1):
    """The signed bundle (master/ota/service.py's format) of [(path, bytes)], with the sequence number
    `seq` (the master takes it only when it is above the highest it accepted)."""
    man = {
        "version": version,
        "seq": seq,
        "files": [
            {"path": p, "size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for p, d in files
        ],
    }
    raw = json.dumps(man, separators=(",", ":")).encode()
    if len(raw) > _ota.MAX_MANIFEST:
        raise FlashError(
            "the manifest is %d bytes, over the board's %d" % (len(raw), _ota.MAX_MANIFEST)
        )
    return _ota.bundle_head(key, raw) + raw + b"".join(d for _, d in files)


class Master:
    """The master's HTTP API at `url` (http://HOST[:PORT]) with the bearer `token`."""

    def __init__(self, url, token, timeout=30):
        u = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
        if u.scheme != "http" or not u.hostname:
            raise FlashError("--ota %r: expected http://HOST[:PORT]" % url)
        self.host, self.port = u.hostname, u.port or 80
        self.token = token
        self.timeout = timeout

    def _conn(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def _headers(self, extra=None):
        h = {"Authorization": "Bearer " + self.token} if self.token else {}
        h.update(extra or {})
        return h

    def _answer(self, c):
        r = c.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, {"error": raw.decode("utf-8", "replace")}

    def request(self, method, path):
        c = self._conn()
        try:
            c.request(method, path, headers=self._headers())
            return self._answer(c)
        finally:
            c.close()

    def push(self, data, progress=None, chunk=4096):
        """POST /ota with the bundle in pieces; (status, answer)."""
        c = self._conn()
        try:
            c.putrequest("POST", "/ota")
            for k, v in self._headers(
                {"Content-Length": str(len(data)), "Content-Type": "application/octet-stream"}
            ).items():
                c.putheader(k, v)
            c.endheaders()
            sent = 0
            try:
                while sent < len(data):
                    c.send(data[sent : sent + chunk])
                    sent += min(chunk, len(data) - sent)
                    if progress:
                        progress(sent, len(data))
            except (BrokenPipeError, ConnectionResetError):
                pass  # refused early: the answer says why
            return self._answer(c)
        finally:
            c.close()

    def wait_state(self, want, timeout):
        """GET /ota until its state is not "trial" (the board resets between): the document."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                status, doc = self.request("GET", "/ota")
                if status == 200 and doc.get("state") != "trial" and want(doc):
                    return doc
                last = doc
            except OSError:
                pass  # resetting
            time.sleep(0.5)
        raise FlashError("no commit nor rollback within %d s; last GET /ota: %s" % (timeout, last))


def bar(sent, total, width=30, out=sys.stderr):
    n = width * sent // total if total else width
    out.write(
        "\r   [%s%s] %3d%% %d/%d bytes"
        % ("#" * n, "." * (width - n), 100 * sent // max(total, 1), sent, total)
    )
    if sent >= total:
        out.write("\n")
    out.flush()


def update(url, token, key_path=None, arch=None, version=None, timeout=120, patch=None):
    """Build, sign, push, wait: 0 when committed, 1 when rolled back. `patch(files, arch)`
    may change the files before signing (the tests' new code)."""
    key = load_key(key_path)
    m = Master(url, token)
    try:
        status, doc = m.request("GET", "/ota")
    except OSError as e:
        raise FlashError("no master answers at %s:%d (%s)" % (m.host, m.port, e))
    if status != 200:
        raise FlashError("GET /ota answered %d: %s" % (status, doc.get("error")))
    if arch is None:
        mpy = doc.get("mpy")
        arch = ARCH_NAMES.get((mpy >> 10) & 15) if mpy else None
        arch = arch if arch and arch != "none" else "none"
    if arch not in ARCH_IDS:
        raise FlashError("unknown arch %r" % arch)
    version = version or default_version()
    seq = (doc.get("highest_seq") or 0) + 1  # signed: a replay of an older bundle is refused
    say(
        "organbus master update %s (sequence %d) -> %s:%d (running %s, .mpy arch %s)"
        % (version, seq, m.host, m.port, doc.get("version") or "the USB install", arch)
    )
    with tempfile.TemporaryDirectory(prefix="organbus-ota-") as stage:
        files = bundle_files(arch, stage)
        if patch is not None:
            files = patch(files, arch, stage)
    data = bundle(key, files, version, seq)
    say("   bundle: %d files, %d bytes, signed (HMAC-SHA256)" % (len(files), len(data)))
    status, answer = m.push(data, bar)
    if status != 200:
        raise FlashError("the master refused the update (%d): %s" % (status, answer.get("error")))
    say("   uploaded and verified; the master resets into its trial")
    doc = m.wait_state(lambda d: True, timeout)
    return _outcome(doc, version)


def _outcome(doc, version):
    res = doc.get("result") or {}
    if doc.get("state") == "running" and doc.get("version") == version:
        say("committed: %s runs (%s)" % (version, res.get("reason")))
        return 0
    say("rolled back to %s: %s" % (doc.get("version") or "the USB install", res.get("reason")))
    return 1


def rollback(url, token, timeout=60):
    """POST /ota/rollback, then wait for the previous version to run: 0 when it does."""
    m = Master(url, token)
    try:
        status, doc = m.request("POST", "/ota/rollback")
    except OSError as e:
        raise FlashError("no master answers at %s:%d (%s)" % (m.host, m.port, e))
    if status != 200:
        raise FlashError("the master refused the rollback (%d): %s" % (status, doc.get("error")))
    want = doc.get("version")
    doc = m.wait_state(lambda d: d.get("version") == want, timeout)
    say(
        "rolled back: %s runs (%s)"
        % (want or "the USB install", (doc.get("result") or {}).get("reason"))
    )
    return 0
