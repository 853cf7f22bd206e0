# Home Assistant device-based discovery from the live menu: one retained config per device (the body, each organ).
#
# Keys are Home Assistant's abbreviations (homeassistant/components/mqtt/abbreviations.py).
# Home Assistant applies `~` per component (discovery.py `_replace_topic_base` runs on each
# component's payload, and `~` is not one of the shared options schemas.py SHARED_OPTIONS
# copies down from the device), so every component carries `"~": base`; the device-level
# `avty`/`avty_mode` are shared options and reach each component, where its `~` expands them.
# An organ's entities come from what its capabilities are, never a list of organs: a third-party
# organ that describes led_on and led_off is a light the same way (docs/links.md "MQTT").

ORIGIN = {"name": "organbus", "url": "https://github.com/organbus"}
BLINK = "blink"  # the light's one effect: led_blink with count and period_ms within their bounds
DIAGNOSTICS = (
    ("organs_online", "Organs online"),
    ("plans_run", "Plans run"),
    ("decoder_errors", "Decoder errors"),
)


def _light(base, mid, names):
    c = {"p": "light", "~": base, "uniq_id": mid + "_light", "name": None}
    c["cmd_t"] = "~/cmd/" + mid + "/light"
    c["stat_t"] = "~/" + mid + "/light"
    if "led_blink" in names:
        c["fx_cmd_t"] = "~/cmd/" + mid + "/effect"
        c["fx_list"] = [BLINK]
    return c


def _commanded(platform, base, mid, what, name):
    # an entity whose one command topic runs one ability of organ `mid`
    return {
        "p": platform,
        "~": base,
        "uniq_id": mid + "_" + what,
        "name": name,
        "cmd_t": "~/cmd/" + mid + "/" + what,
    }


def organ_components(base, mid, names):
    """{component id: component} for the ability `names` of organ `mid` (none: an organ Home
    Assistant has no platform for)."""
    out = {}
    if "led_on" in names and "led_off" in names:
        out[mid + "_light"] = _light(base, mid, names)
    if "speak" in names:
        out[mid + "_speak"] = _commanded("notify", base, mid, "speak", "Speak")
    if "chime" in names:
        out[mid + "_chime"] = _commanded("button", base, mid, "chime", "Chime")
    return out


def platforms(cmps):
    """{component id: platform}: what a later config must remove when an id is gone."""
    return {k: c["p"] for k, c in cmps.items()}


def body_config(prefix, node, base, version):
    """(topic, config) of the body itself: its diagnostics sensors and its update entity."""
    cmps = {}
    for key, label in DIAGNOSTICS:
        cmps[node + "_" + key] = {
            "p": "sensor",
            "~": base,
            "uniq_id": node + "_" + key,
            "name": label,
            "stat_t": "~/diagnostics",
            "val_tpl": "{{ value_json.%s }}" % key,
            "stat_cla": "measurement" if key == "organs_online" else "total_increasing",
            "ent_cat": "diagnostic",
        }
    cmps[node + "_firmware"] = {
        "p": "update",
        "~": base,
        "uniq_id": node + "_firmware",
        "name": "Firmware",
        "stat_t": "~/update",
        "ent_cat": "diagnostic",
    }
    doc = {
        "dev": {"ids": [node], "name": node, "mf": "organbus", "mdl": "master", "sw": version},
        "o": ORIGIN,
        "avty": [{"t": "~/availability"}],
        "cmps": cmps,
    }
    return prefix + "/device/" + node + "/config", doc


def organ_topic(prefix, node, mid):
    return prefix + "/device/" + node + "_" + mid + "/config"


def organ_config(prefix, node, base, mid, cmps, gone=None, organ=None):
    """(topic, config) of organ `mid` as a sub-device of the body (`via_device`), available
    while the body and the organ both are; `gone` ({id: platform}) are components it had and
    has no more (sent as the platform alone: Home Assistant removes them). `organ`: its
    descriptor (module_type, fw_version) when known."""
    dev = {"ids": [node + "_" + mid], "name": mid, "via_device": node}
    if organ:
        dev["mdl"] = organ.get("module_type", "")
        fw = organ.get("fw_version")
        if isinstance(fw, int):
            dev["sw"] = "%d.%d" % (fw >> 8, fw & 255)
    out = dict(cmps)
    for k in gone or ():
        if k not in out:
            out[k] = {"p": gone[k]}
    doc = {
        "dev": dev,
        "o": ORIGIN,
        "avty": [{"t": "~/availability"}, {"t": "~/" + mid + "/availability"}],
        "avty_mode": "all",
        "cmps": out,
    }
    return organ_topic(prefix, node, mid), doc
