# A master imports only the links its config names: no xiaozhi, update or nudges when unconfigured.
import json

from support import ROOT, free_port, run_micropython

OPTIONAL = ("master.links.xiaozhi", "master.links.xiaozhi_link", "master.ota", "master.net",
            "master.links.nudge", "master.links.jsonlines", "master.links.mqtt")  # fmt: skip


def _imported(config, board=None):
    args = [ROOT + "/host_tests/master/lazy_links_mp.py", json.dumps(config), str(free_port())]
    r = run_micropython(args + ([json.dumps(board)] if board else []), input="")
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _optional(mods):
    return sorted(m for m in mods if m.startswith(OPTIONAL))


def test_a_master_without_xiaozhi_or_an_update_never_imports_them():
    mods = _imported({})
    assert "master.links.httpd" in mods and "master.links.mcp" in mods, mods
    assert _optional(mods) == [], mods


def test_each_configured_link_is_imported():
    # the control: the same run with every optional section configured imports each of them
    config = {
        "ota": {"key": "00" * 32},
        "nudge_url": "http://127.0.0.1:9/nudge",
        "xiaozhi": {"ota_url": "http://127.0.0.1:9/xiaozhi/ota/"},
    }
    mods = _optional(_imported(config))
    for m in ("master.ota.routes", "master.links.nudge", "master.links.xiaozhi_link"):
        assert m in mods, mods


def test_the_console_link_alone_loads_no_http_code():
    # the JSON-lines link answers with outcome.CODE: a master without HTTP never imports httpd
    mods = _imported({}, {"http": None, "console": "link"})
    assert "master.links.jsonlines" in mods, mods
    assert not [
        m for m in mods if m.startswith(("master.links.httpd", "master.links.routes"))
    ], mods
