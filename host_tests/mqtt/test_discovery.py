# master/links/mqtt/discovery.py: entities from the live menu, a third-party organ's led_on/led_off a light too.
UNIX_PORT = True  # also run by host_tests/ports/test_unix_port.py

from master.links.mqtt import discovery


def _cap(name, mid):
    return {"name": name, "module_id": mid, "params": []}


def test_entities_from_menu():
    menu = {"capabilities": [_cap(n, "led1") for n in ("led_on", "led_off", "blink")]}
    menu["capabilities"] += [_cap("speak", "spk1"), _cap("chime", "spk1")]
    out = dict(discovery.configs("homeassistant", "b1", "organbus/b1", menu, "1.0"))
    body = out["homeassistant/device/b1/config"]
    kinds = sorted(c["p"] for c in body["cmps"].values())
    assert kinds == ["sensor", "sensor", "sensor", "update"]
    led = out["homeassistant/device/b1_led1/config"]
    assert led["dev"]["via_device"] == "b1" and led["cmps"]["led1_light"]["fx_list"] == ["blink"]
    spk = out["homeassistant/device/b1_spk1/config"]["cmps"]
    assert sorted(c["p"] for c in spk.values()) == ["button", "notify"]
    ids = [c["uniq_id"] for d in out.values() for c in d["cmps"].values()]
    assert len(ids) == len(set(ids)) == 7


def test_third_party_light_and_none():
    menu = {"capabilities": [_cap("led_on", "acme"), _cap("led_off", "acme"), _cap("wave", "arm")]}
    out = dict(discovery.configs("ha", "b2", "ob/b2", menu, "1.0"))
    assert out["ha/device/b2_acme/config"]["cmps"]["acme_light"]["p"] == "light"
    assert "ha/device/b2_arm/config" not in out  # nothing Home Assistant has a platform for
