# The xiaozhi options of the tools: flash.py master --xiaozhi-ota-url, sim.py --xiaozhi, the master's role files.
import json
import os
import subprocess
import sys

import pytest

from support import ROOT

sys.path.insert(0, os.path.join(ROOT, "tools"))
from deploy import boards, cli, install, roles  # noqa: E402


def _flash(*args):
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "flash.py")] + list(args),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_flash_writes_the_ota_url_into_the_masters_config():
    url = "http://192.0.2.10:8002/xiaozhi/ota/"
    args = cli.parse_args(["master", "--port", "p", "--xiaozhi-ota-url", url])
    assert install.config_json(args) == {"xiaozhi": {"ota_url": url}}


def test_flash_refuses_a_bad_ota_url_and_an_organ():
    r = _flash("master", "--port", "/dev/ttyACM7", "--xiaozhi-ota-url", "ws://x/", "--dry-run")
    assert r.returncode != 0 and "must start with http://" in r.stderr, r.stderr
    r = _flash("led", "--port", "/dev/ttyACM7", "--xiaozhi-ota-url", "http://x/", "--dry-run")
    assert r.returncode != 0 and "are for the master" in r.stderr, r.stderr


def test_the_master_installs_the_link():
    board = json.load(open(os.path.join(ROOT, "boards", "c6_master", "board.json")))
    dests = [d for _, d in roles.role_files("master", board)["modules"]]
    for m in ("master/net/ws.py", "master/links/xiaozhi.py", "master/links/xiaozhi_link.py"):
        assert m in dests, "%s is not deployed: %s" % (m, dests)


@pytest.mark.parametrize(
    "url,words",
    [("https://127.0.0.1/x", "expected http://"), ("http://10.0.0.1:8002/x", "loopback")],
)
def test_sim_takes_only_a_loopback_http_ota_url(url, words):
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "sim.py"), "--xiaozhi", url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0 and words in r.stderr, r.stderr
    import inspect

    from vbody.body import VirtualBody

    # the virtual body the virtual-body tests drive takes the URL too
    assert "xiaozhi" in inspect.signature(VirtualBody).parameters
