# Home Assistant device-based discovery from the live menu: one retained config per device (the body, each organ).
#
# Keys are Home Assistant's abbreviations (homeassistant/components/mqtt/abbreviations.py), topics
# relative to the `~` base. An organ's entities come from what its capabilities are, never a list.

ORIGIN = {"name": "organbus", "url": "https://github.com/organbus"}


def _light(names, mid):
    c = {"p": "light", "uniq_id": mid + "_light", "name": None, "cmd_t": "~/" + mid + "/light/set"}
    c["stat_t"] = "~/" + mid + "/light/state"
    if "blink" in names:
        c["fx_cmd_t"] = "~/" + mid + "/light/effect"
        c["fx_list"] = ["blink"]
    return c


def _commanded(platform, mid, what, name, topic):
    # an entity whose one command topic runs one ability of organ `mid`
    return {
        "p": platform,
        "uniq_id": mid + "_" + what,
        "name": name,
        "cmd_t": "~/" + mid + "/" + topic,
    }


def organ_components(caps, mid):
    """{object_id: component} for one organ's menu capabilities."""
    names = [c["name"] for c in caps]
    out = {}
    if "led_on" in names and "led_off" in names:
        out[mid + "_light"] = _light(names, mid)
    if "speak" in names:
        out[mid + "_notify"] = _commanded("notify", mid, "notify", "Speak", "speak")
    if "chime" in names:
        out[mid + "_chime"] = _commanded("button", mid, "chime", "Chime", "chime")
    return out


def configs(prefix, node, base, menu, version):
    """[(topic, config)] for the body and each organ of `menu` (Body.menu()'s document)."""
    avty = [{"t": "~/availability"}]
    body = {
        "~": base,
        "dev": {
            "ids": [node],
            "name": node,
            "mf": "organbus",
            "mdl": "ESP32-C6 master",
            "sw": version,
        },
        "o": ORIGIN,
        "avty": avty,
        "cmps": {},
    }
    for key, label in (
        ("organs_online", "Organs online"),
        ("plans_run", "Plans run"),
        ("decoder_errors", "Decoder errors"),
    ):
        body["cmps"][node + "_" + key] = {
            "p": "sensor",
            "uniq_id": node + "_" + key,
            "name": label,
            "stat_t": "~/diagnostics",
            "val_tpl": "{{ value_json.%s }}" % key,
            "ent_cat": "diagnostic",
        }
    body["cmps"][node + "_firmware"] = {
        "p": "update",
        "uniq_id": node + "_firmware",
        "name": "Firmware",
        "stat_t": "~/update",
        "ent_cat": "config",
    }
    out = [(prefix + "/device/" + node + "/config", body)]
    by_organ = {}
    for c in menu["capabilities"]:
        by_organ.setdefault(c["module_id"], []).append(c)
    for mid in sorted(by_organ):
        cmps = organ_components(by_organ[mid], mid)
        if not cmps:
            continue
        dev = {"ids": [node + "_" + mid], "name": mid, "via_device": node}
        doc = {
            "~": base,
            "dev": dev,
            "o": ORIGIN,
            "avty": avty + [{"t": "~/" + mid + "/availability"}],
        }
        doc["avty_mode"] = "all"
        doc["cmps"] = cmps
        out.append((prefix + "/device/" + node + "_" + mid + "/config", doc))
    return out
