# master/links/mqtt/link.py over a stand-in Body and client: availability, removed components, an empty config, commands, the settings' refusals.
import json

import pytest

from master.links import jsonout
from master.links.mqtt import link as L


def _cap(name, mid, params=()):
    c = {"name": name, "module_id": mid, "params": list(params), "description": name}
    c.update({"exec_type": "immediate", "resource_group": mid, "max_duration_ms": 0})
    return c


class Body:
    def __init__(self):
        self.caps = []
        self.organs = []
        self.ports = []
        self.submitted = []
        self.refused = 0
        self.max_steps = 16
        self.accepted = 0

    def capabilities(self):
        return self.caps

    def online_organs(self):
        return self.organs

    def subscribe(self, fn, events=None):
        self.fn = fn

    def stamp(self):
        return 1

    def submit(self, raw, on_accept=None, on_done=None, dups=()):
        self.submitted.append(raw)
        return "problems", {"problems": ["x"], "notes": []}


class Sent:
    def __init__(self):
        self.out = []
        self.connected = True
        self.retained = 0

    def publish(self, topic, payload, qos=0, retain=False):
        if callable(payload):
            payload = payload()
        if isinstance(payload, dict):  # as the client writes a document: piece by piece
            payload = b"".join(jsonout.json_pieces(payload))
        if isinstance(payload, bytes):
            payload = payload.decode()
        self.out.append((topic, payload, retain))

    def last(self, topic):
        for t, p, r in reversed(self.out):
            if t == topic:
                return p
        return None


def _link():
    b = Body()
    cfg = L.settings({"host": "127.0.0.1", "client_id": "n1"})
    lk = L.Link(b, cfg, "n1", "0.1.0")
    lk.client = Sent()
    return b, lk


def test_availability_removal_and_empty_config():
    b, lk = _link()
    b.organs = [{"module_id": "A"}, {"module_id": "B"}]
    b.caps = [_cap("speak", "A"), _cap("chime", "A"), _cap("led_on", "B"), _cap("led_off", "B")]
    lk.sync()
    c = lk.client
    cfg_a = json.loads(c.last("homeassistant/device/n1_A/config"))
    assert sorted(cfg_a["cmps"]) == ["A_chime", "A_speak"], cfg_a
    assert c.last("organbus/n1/B/availability") == "online"
    assert c.last("organbus/n1/B/light") == "OFF"
    # B goes offline: unavailable, its config stays
    n = len(c.out)
    b.organs = [{"module_id": "A"}]
    b.caps = [_cap("speak", "A"), _cap("chime", "A")]
    lk.sync()
    new = c.out[n:]
    assert ("organbus/n1/B/availability", "offline", True) in new, new
    assert not [t for t, p, r in new if t.endswith("n1_B/config")], new
    # A registers again without speak: the notify removed (its platform alone)
    b.caps = [_cap("chime", "A")]
    lk.sync()
    cfg_a = json.loads(c.last("homeassistant/device/n1_A/config"))
    assert cfg_a["cmps"]["A_speak"] == {"p": "notify"} and cfg_a["cmps"]["A_chime"]["p"] == "button"
    # and with none of its components left: an empty retained config removes the device
    b.caps = [_cap("wave", "A")]
    lk.sync()
    assert c.last("homeassistant/device/n1_A/config") == "", c.out[-3:]
    # Home Assistant's online: every retained document again, the offline organ's config too
    n = len(c.out)
    lk.on_message("homeassistant/status", b"online")
    topics = [t for t, p, r in c.out[n:]]
    for t in ("organbus/n1/availability", "homeassistant/device/n1/config", "organbus/n1/menu",
              "homeassistant/device/n1_B/config", "organbus/n1/B/availability"):  # fmt: skip
        assert t in topics, (t, topics)


def test_commands_are_one_step_plans_of_that_organ():
    b, lk = _link()
    b.organs = [{"module_id": "B"}]
    blink = _cap("led_blink", "B", [
        {"name": "count", "type": "int", "min": 1, "max": 2, "unit": ""},
        {"name": "period_ms", "type": "int", "min": 600, "max": 900, "unit": "ms"},
    ])  # fmt: skip
    b.caps = [_cap("led_on", "B"), _cap("led_off", "B"), blink]
    lk.on_message("organbus/n1/cmd/B/light", b"ON")
    lk.on_message("organbus/n1/cmd/B/effect", b"blink")
    lk.on_message("organbus/n1/cmd/Z/light", b"ON")  # no such organ: ignored
    lk.on_message("organbus/n1/cmd/B/light", b"DIM")  # no such payload: ignored
    steps = [p["steps"][0] for p in b.submitted]
    assert [s["action"] for s in steps] == ["led_on", "led_blink"], steps
    assert steps[1]["params"] == {"count": 2, "period_ms": 600}, "clamped into the bounds"
    rep = json.loads(lk.client.last("organbus/n1/report/ha"))
    assert rep["status"] == 422 and lk.commands == 2, rep
    lk.on_message("organbus/n1/plan/r7", b"{}")
    assert b.submitted[-1] == b"{}", "a plan goes to the Body as its raw bytes"
    assert json.loads(lk.client.last("organbus/n1/report/r7"))["status"] == 422
    n = len(b.submitted)
    lk.client.retained = 1  # a retained plan or command (it would run at every connect)
    lk.on_message("organbus/n1/plan/r8", b"{}")
    lk.on_message("organbus/n1/cmd/B/light", b"ON")
    assert len(b.submitted) == n and lk.client.last("organbus/n1/report/r8") is None
    lk.on_message("homeassistant/status", b"online")  # a retained birth still counts
    assert lk.client.last("organbus/n1/menu") is not None


def test_settings_refusals():
    with pytest.raises(ValueError, match="mqtt.host"):
        L.settings({"port": 1883})
    with pytest.raises(ValueError, match="mqtt.port"):
        L.settings({"host": "h", "port": "1883"})
    with pytest.raises(ValueError, match="keepalive_s"):
        L.settings({"host": "h", "keepalive_s": 1})
    assert L._node("my body/1") == "my_body_1"


def test_version_is_the_installed_update_when_there_is_one(monkeypatch):
    import sys
    import types

    from master.links.mcp import SERVER_INFO

    assert L._version({"board": {"flash": ""}}) == SERVER_INFO["version"] or (
        "master.ota.service" in sys.modules
    )
    fake = types.ModuleType("master.ota.service")
    fake.read_state = lambda root: {"version": "2.5" if root == "/f" else None}
    monkeypatch.setitem(sys.modules, "master.ota.service", fake)
    assert L._version({"board": {"flash": "/f"}}) == "2.5"
    assert L._version({"board": {"flash": "/g"}}) == SERVER_INFO["version"]
