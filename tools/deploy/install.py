# Compile and copy: mpy-cross for the board's arch, one mpremote session that lands the files.
import json
import os
import tempfile

from deploy.base import ARCH_NAMES, _exe, mpremote_cmd
from deploy.boards import board_dir


def frozen_in(info, files):
    """The role's modules that the firmware already has frozen (they win over /lib on sys.path)."""
    have = set(info.get("modules", ()))
    return [dest for _, dest in files["modules"] if dest[:-3] in have]


def compile_plan(files, arch, stage, skip=()):
    """[(cmd, src, staged .mpy, dest on the board)] for every module not frozen in the firmware."""
    out = []
    for src, dest in files["modules"]:
        if dest in skip:
            continue
        mdest = dest[:-3] + ".mpy"
        staged = os.path.join(stage, "lib", *mdest.split("/"))
        cmd = [_exe("mpy-cross"), "-march=" + arch, "-s", dest, "-o", staged, src]
        out.append((cmd, src, staged, "/lib/" + mdest))
    return out


def mpy_header(path):
    """(version, sub-version, arch name or None, small-int bits) of an .mpy file."""
    with open(path, "rb") as f:
        h = f.read(4)
    if len(h) < 4 or h[0] != ord("M"):
        raise ValueError("%s is not an .mpy file" % path)
    arch = h[2] >> 2
    return h[1], h[2] & 3, ARCH_NAMES.get(arch) if arch else None, h[3]


def config_json(args):
    """The master's /config.json from options/environment, or None when nothing was given."""
    ssid = args.wifi_ssid or os.environ.get("ORGANBUS_WIFI_SSID")
    password = args.wifi_password or os.environ.get("ORGANBUS_WIFI_PASSWORD")
    token = args.token or os.environ.get("ORGANBUS_HTTP_TOKEN")
    ota = getattr(args, "xiaozhi_ota_url", None)
    if not (ssid or token or args.console or ota):
        return None
    cfg = {}
    if ssid:
        cfg["wifi"] = {"ssid": ssid, "password": password or ""}
    if token:
        cfg["http"] = {"token": token}
    if args.console:
        cfg["console"] = args.console
    if ota:
        cfg["xiaozhi"] = {"ota_url": ota}
    return cfg


def _write_config(cfg):
    """The secrets go to a private temporary file (outside the repo) only long enough to copy."""
    fd, path = tempfile.mkstemp(prefix="organbus-config-", suffix=".json")
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(cfg, f)
    return path


def prepare_code(dirs, stale):
    """Board-side: make the folders, remove stale sources that would shadow the new .mpy files
    (a .py wins over an .mpy of the same name) and files of our packages that are gone."""
    return (
        "import os\n"
        "def _mk(d):\n"
        " try:\n  os.mkdir(d)\n except OSError:\n  pass\n"
        "def _rm(f):\n"
        " try:\n  os.remove(f)\n except OSError:\n  pass\n"
        "for d in %r:\n _mk(d)\n"
        "for f in %r:\n _rm(f)\n"
        "for d, keep in %r:\n"
        " try:\n  names = os.listdir(d)\n except OSError:\n  names = []\n"
        " for n in names:\n"
        "  if n.endswith(('.py', '.mpy')) and n not in keep:\n   _rm(d + '/' + n)\n"
        "print('prepared')\n" % (dirs, stale[0], stale[1])
    )


def copy_commands(port, plan, files, stage, role, board, cfg_path, force):
    """One mpremote invocation: prepare the folders, then copy everything, chained with '+'."""
    dests = [d for _, _, _, d in plan] + ["/lib/" + d for _, d in files["data"]]
    dirs = sorted({d.rsplit("/", 1)[0] for d in dests if d.count("/") > 1})
    full_dirs = []
    for d in dirs:
        parts = d.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            p = "/" + "/".join(parts[:i])
            if p not in full_dirs:
                full_dirs.append(p)
    twins = [d[:-4] + ".py" for d in dests if d.endswith(".mpy")]
    keep = {}
    for d in dests:
        folder, _, name = d.rpartition("/")
        if folder.startswith(("/lib/organbus", "/lib/master", "/lib/organs")):
            keep.setdefault(folder, []).append(name)
    args = ["resume", "exec", prepare_code(full_dirs, (twins, sorted(keep.items())))]
    by_dir = {}
    for _, _, staged, dest in plan:
        by_dir.setdefault(dest.rsplit("/", 1)[0], []).append(staged)
    for src, dest in files["data"]:
        by_dir.setdefault(("/lib/" + dest).rsplit("/", 1)[0], []).append(src)
    cp = ["fs", "cp"] + (["-f"] if force else [])
    for d in sorted(by_dir):
        args += ["+"] + cp + sorted(by_dir[d]) + [":" + d + "/"]
    args += ["+"] + cp + [os.path.join(board_dir(role), "main.py"), ":/main.py"]
    args += ["+"] + cp + [os.path.join(board_dir(role), "board.json"), ":/board.json"]
    if cfg_path:
        args += (
            ["+"] + cp + [cfg_path, ":" + board.get("settings", {}).get("config", "/config.json")]
        )
    return mpremote_cmd(port, *args)
