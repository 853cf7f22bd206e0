# The rooms of the tree: device code knows no simulator, tools/ imports no test helper, one core list.
import json
import os
import re
import subprocess
import sys

from support import ROOT, launch

from deploy import base, roles  # noqa: E402

DEVICE_DIRS = ("boards", "organs", "master", "lib")


def _files(top, ends=(".py",)):
    for d, _, names in os.walk(os.path.join(ROOT, top)):
        if "__pycache__" in d:
            continue
        for n in names:
            if n.endswith(ends):
                yield os.path.join(d, n)


def test_device_code_knows_no_simulator():
    bad = []
    for top in DEVICE_DIRS:
        for path in _files(top, (".py", ".json")):
            text = open(path, encoding="utf-8").read()
            for word in ("machine.SIM", "ORGANBUS_SIM", '"SIM"'):
                if word in text:
                    bad.append("%s: %s" % (os.path.relpath(path, ROOT), word))
    assert not bad, "device code must not ask whether it is simulated: %s" % bad


KNOWN = {}  # no exceptions: every tool stands without host_tests/


def test_no_tool_imports_a_test_helper():
    bad = []
    for path in _files("tools"):
        rel = os.path.relpath(path, ROOT)
        if rel in KNOWN:
            text = open(path, encoding="utf-8").read()
            found = set(re.findall(r"^\s*import (\w+)", text, re.M)) & {
                "support",
                "e2e_support",
                "board_rig",
                "fake_body",
                "plan_corpus",
                "mprun",
            }
            assert found <= KNOWN[rel], "%s now imports %s" % (rel, found - KNOWN[rel])
            continue
        text = open(path, encoding="utf-8").read()
        # a test runner may name host_tests/ (tools/rv32/run.py runs its modules on RV32);
        # what is ruled out is a tool importing a test helper
        helpers = r"support|e2e_support|board_rig|fake_body|plan_corpus|mprun|conftest"
        imports = r"^\s*(from (%s)\b|import (%s)\b)" % (helpers, helpers)
        if re.search(imports, text, re.M) or re.search(
            r"sys\.path\.(insert|append)\([^)\n]*host_tests", text
        ):
            bad.append(os.path.relpath(path, ROOT))
    assert not bad, "tools/ must not reach into host_tests/: %s" % bad


def test_the_launch_contract_is_spelled_once():
    # Only the launcher writes the simulated hardware's environment (tools/simhw reads it, and
    # its own test holds it to that contract).
    bad = []
    allowed = {launch.__file__, os.path.join(ROOT, "host_tests", "tools", "test_simhw.py")}
    for top in ("tools", "host_tests"):
        for path in _files(top):
            if path in allowed or os.sep + "simhw" + os.sep in path:
                continue
            text = open(path, encoding="utf-8").read()
            if re.search(r"ORGANBUS_SIM_(UART|PINLOG|WAV|HTTP|CONSOLE|ROLE|HEAP_MS)\b", text):
                bad.append(os.path.relpath(path, ROOT))
            if re.search(r"^def micropython_exe\(", text, re.M):
                bad.append(os.path.relpath(path, ROOT) + " (micropython_exe)")
    assert not bad, "spell the board launch through tools/vbody/launch.py: %s" % bad


def test_package_json_is_the_core_list():
    with open(os.path.join(ROOT, "package.json")) as f:
        got = json.load(f)
    want = roles.package_json()
    assert got == want, "package.json is made by (cd tools && python -m deploy.roles)"
    listed = {dest for dest, _ in got["urls"]}
    folder = {
        "organbus/" + n
        for n in os.listdir(os.path.join(ROOT, "lib", "organbus"))
        if n.endswith(".py") and n != "manifest.py"
    }
    assert listed == folder, "package.json must list every lib/organbus/*.py: %s" % (
        listed ^ folder
    )


def test_every_board_manifest_includes_the_core_manifest():
    for role, d in launch.BOARDS.items():
        lines = open(os.path.join(ROOT, "boards", d, "manifest.py")).read().splitlines()
        text = "\n".join(ln for ln in lines if not ln.lstrip().startswith("#"))
        assert 'include("../../lib/organbus/manifest.py")' in text, role
        assert "organbus" not in text.replace("lib/organbus/manifest.py", ""), (
            "%s lists core files itself" % role
        )


def test_a_role_takes_its_core_modules_from_the_core_list():
    core = {dest for _, dest in roles.core_files()}
    for role in base.ROLES:
        mods = {dest for _, dest in roles.role_files(role)["modules"]}
        from_core = {m for m in mods if m.startswith("organbus/")}
        assert from_core and from_core <= core, (role, from_core - core)


def test_the_master_manifests_name_every_module_once():
    # master/manifest.py and the links' own manifests are the one source for a frozen build and
    # for tools/flash.py: every module of master/ is in them, and nothing else
    tree = set()
    for path in _files("master"):
        rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
        if not rel.endswith("manifest.py"):
            tree.add(rel)
    named = [dest for _, dest in roles.manifest_files(roles.MASTER_MANIFEST)]
    assert len(named) == len(set(named))
    assert set(named) == tree, (sorted(tree - set(named)), sorted(set(named) - tree))
    with open(os.path.join(ROOT, "boards", "c6_master", "manifest.py")) as f:
        assert 'include("../../master/manifest.py")' in f.read()


def test_a_usb_install_takes_only_the_links_its_config_names():
    full = [d for _, d in roles.role_files("master")["modules"]]
    bare = [d for _, d in roles.role_files("master", links=roles.master_links({}))["modules"]]
    gone = sorted(set(full) - set(bare))
    assert gone == [d for d in full if d.startswith(("master/links/xiaozhi", "master/links/nudge",
                    "master/links/jsonlines", "master/links/mqtt/", "master/net/",
                    "master/ota/"))], gone  # fmt: skip
    assert "master/links/httpd.py" in bare and "master/bus/body.py" in bare, bare
    cfg = {"xiaozhi": {"ota_url": "http://x/"}, "http": {"token": "t"}}
    some = [d for _, d in roles.role_files("master", links=roles.master_links(cfg))["modules"]]
    assert "master/links/xiaozhi_link.py" in some and "master/ota/service.py" in some, some
    assert "master/links/jsonlines.py" not in some, some
    mq = [d for _, d in roles.role_files("master", links=roles.master_links({"mqtt": {"host": "h"}}))["modules"]]  # fmt: skip
    assert "master/links/mqtt/link.py" in mq and "master/links/xiaozhi.py" not in mq, mq


LINK_MANIFESTS = ("master/links/http.manifest.py", "master/links/console.manifest.py",
                  "master/links/nudge.manifest.py", "master/links/xiaozhi.manifest.py",
                  "master/links/mqtt.manifest.py", "master/net/manifest.py",
                  "master/ota/manifest.py")  # fmt: skip
BUS_INSIDES = ("registry", "scheduler", "owners", "port", "status", "recent")


def _master_imports(path):
    text = open(path, encoding="utf-8").read()
    found = re.findall(r"^\s*from (master(?:\.\w+)*) import ([\w, ]+)", text, re.M)
    out = set()
    for base, names in found:
        for n in names.split(","):
            n = n.strip().split(" ")[0]
            out.add(base + "." + n)
    return out, text


def test_links_reach_the_bus_only_through_the_body_and_other_links_only_as_declared():
    # a link's declared dependencies are the manifests its own manifest includes
    owner = {}
    for m in LINK_MANIFESTS:
        files = roles.manifest_files(os.path.join(ROOT, m))
        for src, dest in files:
            if dest not in owner or len(files) < len(owner[dest]):
                owner[dest] = files
    bad = []
    for dest, files in sorted(owner.items()):
        mods = set(d[:-3].replace("/", ".").replace(".__init__", "") for _, d in files)
        imports, text = _master_imports(os.path.join(ROOT, dest))
        for name in sorted(imports):
            if name.startswith("master.bus."):
                if name.split(".")[2] in BUS_INSIDES:
                    bad.append("%s imports %s" % (dest, name))
            elif name not in mods and name.rpartition(".")[0] not in mods:
                bad.append("%s imports %s, not in its manifest's dependencies" % (dest, name))
        for inside in ("registry", "scheduler", "owners", "sheet", "hub"):
            if re.search(r"\bbody\.%s\b" % inside, text):
                bad.append("%s reads body.%s" % (dest, inside))
    assert len(owner) > 15, sorted(owner)
    assert not bad, bad


# The board side sets its own path (a board's boot as the firmware would): not a tool bootstrap.
BOARD_SIDE = {"tools/toolpath.py", "tools/vboard_device.py", "tools/simhw/simboot.py"}


def test_one_sys_path_bootstrap():
    # A tool's own `sys.path.insert(...)` / `sys.path[:0] = ...` lines: tools/toolpath.py does it.
    bad = []
    for path in _files("tools"):
        rel = os.path.relpath(path, ROOT)
        if rel in BOARD_SIDE:
            continue
        text = open(path, encoding="utf-8").read()
        if re.search(r"^\s*sys\.path(\.insert|\.append|\.extend|\[[^\]]*\]\s*=)", text, re.M):
            bad.append(rel)
    assert not bad, "put tools/ on the path and `import toolpath`: %s" % bad


def test_toolpath_puts_the_tree_on_the_path_from_any_cwd():
    # From / (tools/ on PYTHONPATH) and from tools/ itself ("." on the path, relative names).
    code = "import toolpath, sys; print(toolpath.ROOT); print(toolpath.TOOLS); print(sys.path)"
    for cwd, path in (("/", os.path.join(ROOT, "tools")), (os.path.join(ROOT, "tools"), ".")):
        out = subprocess.run(
            [sys.executable, "-c", code],
            cwd=cwd,
            env=dict(os.environ, PYTHONPATH=path),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        assert out[0] == ROOT and out[1] == os.path.join(ROOT, "tools"), (cwd, out)
        got = eval(out[2])
        for want in (ROOT, os.path.join(ROOT, "lib"), os.path.join(ROOT, "tools", "shim")):
            assert want in got, (cwd, want, got)


def test_one_cable_spec_parser_and_pacer():
    # tools/cablespec.py parses a SPEC and paces a write for the virtual body and the kit alike.
    import cablespec
    from conform import cable
    from vbody import bus

    assert bus.parse_spec is cablespec.parse_spec and bus.BYTE_S == cablespec.BYTE_S
    assert isinstance(cable.Cable("connect:127.0.0.1:9").pacer, cablespec.Pacer)
    bad = []
    for top in ("tools/vbody", "tools/conform"):
        for path in _files(top):
            text = open(path, encoding="utf-8").read()
            parses = "expected listen:HOST:PORT" in text
            paces = re.search(r"BYTE_S\s*=|(?<!pacer)\.t_free\s*=", text)
            if parses or paces:
                bad.append(os.path.relpath(path, ROOT))
    assert not bad, "parse and pace through tools/cablespec.py: %s" % bad


def test_the_pacer_keeps_writes_behind_the_wire():
    from cablespec import BYTE_S, Pacer

    p = Pacer()
    assert p.start(5.0) == 5.0, "an idle wire takes a write at once"
    p.sent(5.0, 100)
    assert p.start(5.0) == 5.0 + 100 * BYTE_S, "the next write waits for the last byte"
    assert p.start(9.0) == 9.0 and p.wire_s(10) == 10 * BYTE_S


def test_tools_master_fakes_holds_only_what_a_tool_uses():
    # The rig's pieces only tests use live in host_tests/helpers/master_rig.py.
    path = os.path.join(ROOT, "tools", "master_fakes.py")
    text = open(path, encoding="utf-8").read()
    tools_text = "".join(open(p, encoding="utf-8").read() for p in _files("tools") if p != path)
    unused = []
    for name in re.findall(r"^(?:def|class) ([A-Za-z]\w*)", text, re.M):
        used_here = len(re.findall(r"\b%s\b" % name, text)) > 1
        if not used_here and "mf.%s" % name not in tools_text:
            unused.append(name)
    assert not unused, "only tests use %s: move them to host_tests/helpers/master_rig.py" % unused
