# master/links/mqtt/discovery.py: entities from the live menu, a third-party organ's led_on/led_off a light too.
UNIX_PORT = True  # also run by host_tests/ports/test_unix_port.py

from master.links.mqtt import discovery


def test_body_and_organ_configs():
    topic, body = discovery.body_config("homeassistant", "b1", "organbus/b1", "1.0")
    assert topic == "homeassistant/device/b1/config", topic
    kinds = sorted(c["p"] for c in body["cmps"].values())
    assert kinds == ["sensor", "sensor", "sensor", "update"], kinds
    assert body["o"]["name"] == "organbus" and body["dev"]["ids"] == ["b1"], body
    led = discovery.organ_components("organbus/b1", "led1", ["led_on", "led_off", "led_blink"])
    light = led["led1_light"]
    assert light["fx_list"] == ["blink"] and light["~"] == "organbus/b1", light
    spk = discovery.organ_components("organbus/b1", "spk1", ["speak", "chime"])
    assert sorted(c["p"] for c in spk.values()) == ["button", "notify"], spk
    topic, doc = discovery.organ_config("homeassistant", "b1", "organbus/b1", "led1", led)
    assert topic == "homeassistant/device/b1_led1/config", topic
    assert doc["dev"]["via_device"] == "b1" and doc["avty_mode"] == "all", doc
    assert doc["avty"][1] == {"t": "~/led1/availability"}, doc["avty"]
    ids = [c["uniq_id"] for d in (body["cmps"], led, spk) for c in d.values()]
    assert len(ids) == len(set(ids)) == 7, ids


def test_third_party_light_none_and_removal():
    acme = discovery.organ_components("ob/b2", "acme", ["led_on", "led_off"])
    assert acme["acme_light"]["p"] == "light" and "fx_list" not in acme["acme_light"], acme
    assert discovery.organ_components("ob/b2", "arm", ["wave"]) == {}, "no platform for wave"
    spk = discovery.organ_components("ob/b2", "spk", ["chime"])
    gone = {"spk_speak": "notify"}
    doc = discovery.organ_config("ha", "b2", "ob/b2", "spk", spk, gone)[1]
    assert doc["cmps"]["spk_speak"] == {"p": "notify"}, "a gone component: its platform alone"
