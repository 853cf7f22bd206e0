# The master's update over the air, sans-IO: its state machine (upload, trial, commit, rollback) and GET /ota's document.
#
# The upload's parts load only while an upload runs (Service.receiver): the bundle's format
# and its streamed check (master/ota/bundle.py, its manifest read as it streams in by
# master/ota/reader.py); the flash's files and the state (master/ota/slots.py) are here for
# good, as every boot reads the state. An idle master carries this file and slots.py alone.
# Their names stay reachable here (`service.X`, as before the split: tools/deploy, the
# tests) through the module's __getattr__, which imports the part that holds the name.
#
# The bundle's format is in bundle.py; the flash's layout in slots.py. The state goes from
# running to trial once an upload was verified and installed (`ended`), from trial to running
# (`commit`, once trial_check says it may) or back (`fail_trial`, `roll_back`: rolled_back).
import binascii
import sys

from organbus import log
from master.ota import slots


class OtaError(Exception):
    """A refused update: the HTTP status and the reason."""

    def __init__(self, status, reason):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def key_bytes(text):
    """The update key from its hex text (config.json "ota": {"key": ...}); ValueError if not hex."""
    try:
        k = binascii.unhexlify(text)
    except Exception:
        raise ValueError("the update key must be hex digits")
    if len(k) < 16:
        raise ValueError("the update key must be at least 16 bytes (32 hex digits)")
    return k


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
        self.st = slots.read_state(root)
        # an upload cut by a reset or a power cut left its stage: nothing names it
        slots.SlotWriter(root, "").abort()
        self.floor = max(slots.read_seq(root), _num(self.st.get("seq")))

    def target(self):
        """The slot a rollback goes to ("" the USB install), or None: the previous slot when
        it is known good (it ran committed, or runs now under a trial) and its files are there."""
        st = self.st
        p = st.get("previous")
        if p is None or not (st.get("previous_ok") or st.get("state") == slots.TRIAL):
            return None
        if p and not slots._is_dir(slots._join(self.root, p)):
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
            "state": st.get("state", slots.RUNNING),
            "uploading": self.busy,
            "result": result,
            "free_flash": slots.free_bytes(self.root),
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
        if self.st.get("state") == slots.TRIAL:
            raise OtaError(409, "the running code is on trial; wait for its commit or rollback")
        from master.ota.bundle import MAX_MANIFEST, Receiver  # an upload's own code, from now

        w = slots.SlotWriter(self.root, slots.inactive(self.st.get("slot", "")))
        self.busy = True
        return Receiver(w, self.key, length, MAX_MANIFEST, slots.free_bytes(self.root), self.floor)

    def ended(self, rx, error=None):
        """After an upload: a refusal removes what it wrote and is recorded; a verified bundle
        becomes the inactive slot, on trial (the caller resets the board). Returns the result.
        """
        self.busy = False
        rx.close()
        if error is not None:
            rx.writer.abort()
            self.refuse(error.status, error.reason)
            return self.last
        old = self.st
        w = rx.writer
        # first: a replay is refused from now on, whatever follows
        slots.write_seq(self.root, rx.seq)
        self.floor = rx.seq
        if old.get("previous") == w.slot:
            # the rollback target's files go now: the state stops naming them first
            st = dict(old)
            st["previous"] = st["previous_version"] = st["previous_seq"] = None
            st["previous_ok"] = False
            slots.write_state(self.root, st)
        w.install()
        st = {
            "slot": w.slot,
            "version": rx.version,
            "seq": rx.seq,
            "previous": old.get("slot", ""),  # running now: what a failed trial goes back to
            "previous_version": old.get("version"),
            "previous_seq": old.get("seq"),
            "previous_ok": True,
            "state": slots.TRIAL,
            "boots": 0,
            "organs": sorted(self.online()),
            "result": {"ok": True, "reason": "uploaded and verified; on trial after the reset"},
        }
        slots.write_state(self.root, st)
        self.st = st
        self.last = None
        self.emit(
            "ota",
            [("result", "trial"), ("version", rx.version), ("seq", rx.seq), ("slot", w.slot)],
        )
        return st["result"]

    def commit(self, why):
        st = dict(self.st)
        st["state"] = slots.RUNNING
        st["previous_ok"] = True  # the trial's previous ran before it: known good
        st.pop("boots", None)
        st["result"] = {"ok": True, "reason": "committed: " + why}
        slots.write_state(self.root, st)
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
        if st.get("state") == slots.TRIAL:
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
            "state": slots.ROLLED_BACK,
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
            "state": slots.ROLLED_BACK,
            "result": {"ok": False, "reason": "rolled back: " + why},
        }
        self._rolled(new, why)

    def _rolled(self, new, why):
        slots.write_state(self.root, new)
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


def __getattr__(name):
    # service.X for the upload's parts and the flash's (the bundle's names, ManifestReader,
    # rmtree, ...): the part that holds X is imported when X is first asked for
    if hasattr(slots, name):
        return getattr(slots, name)
    from master.ota import bundle

    if hasattr(bundle, name):
        return getattr(bundle, name)
    from master.ota import reader

    if hasattr(reader, name):
        return getattr(reader, name)
    raise AttributeError(name)
