# Boot step of the master before main.py: picks the code slot (ota.json), rolls back a trial that did not commit.
#
# Never updated over the air and importing nothing from a slot, so a bad update cannot reach
# it. The slot's folder goes first on sys.path (before .frozen and /lib): main.py's imports
# then load the slot's code. A trial gets one boot; booting again while it is still on trial
# (a crash, a reset, a power cut before its commit) rolls back to the previous slot, which then
# has no rollback target: the failed slot never is one (master/ota/service.py, Service.fail_trial).
# A slot whose folder is gone is never run: the USB install's /lib runs, and the state says so.
import json
import os
import sys

STATE = "ota.json"


def _write(path, st):
    with open(path + ".tmp", "w") as f:
        f.write(json.dumps(st))
    try:
        os.remove(path)
    except OSError:
        pass
    os.rename(path + ".tmp", path)


def _is_dir(path):
    try:
        return os.stat(path)[0] & 0x4000 != 0
    except OSError:
        return False


def _back(slot, version, seq, why):
    return {
        "slot": slot,
        "version": version,
        "seq": seq,
        "previous": None,
        "previous_version": None,
        "previous_seq": None,
        "previous_ok": False,
        "state": "rolled_back",
        "result": {"ok": False, "reason": "rolled back: " + why},
    }


def choose(root=""):
    """The slot to run ("" the root's /lib), after rolling back an unfinished trial; puts it
    on sys.path and returns (slot, note)."""
    at = root + "/" if root else ""
    path = at + STATE
    try:
        with open(path) as f:
            st = json.loads(f.read())
    except (OSError, ValueError):
        return "", None
    note = None
    if st.get("state") == "trial":
        if st.get("boots", 0) >= 1:
            note = "the trial of %s did not commit before the board booted again" % st.get(
                "version"
            )
            prev = st.get("previous") or ""
            st = _back(prev, st.get("previous_version"), st.get("previous_seq"), note)
        else:
            st["boots"] = 1
        _write(path, st)
    slot = st.get("slot") or ""
    if slot and not _is_dir(at + slot):
        note = "slot %s (%s) has no files: the USB install runs" % (slot, st.get("version"))
        _write(path, _back("", None, None, note))
        slot = ""
    if slot:
        d = at + slot
        base = os.getcwd() if not d.startswith("/") else ""
        sys.path.insert(0, (base.rstrip("/") + "/" + d) if base else d)
    return slot, note


if __name__ == "__main__":
    _slot, _note = choose()
    if _note:
        print('{"event": "ota", "result": "rolled_back", "why": %s}' % json.dumps(_note))
