# The command line of tools/flash.py: the deploy steps in order.
import argparse
import os
import shutil
import signal
import sys
import tempfile

from deploy.base import (
    ARCH_IDS,
    FlashError,
    ROLES,
    ROOT,
    mpremote_cmd,
    mpy_cross_version,
    require_port,
    run,
    say,
    show,
)
from deploy.boards import load_board
from deploy.firmware import check_firmware_file, esptool_cmds, wait_for_repl
from deploy.install import _write_config, compile_plan, config_json, copy_commands, frozen_in
from deploy.mount import mount
from deploy.probe import check_externals, check_probe, probe
from deploy.roles import master_links, role_files
from deploy.verify import verify

USAGE = """Put a role on a board.

    python tools/flash.py ROLE --port PORT [--firmware FILE.bin] [--dry-run] [--mount] ...

ROLE is master, led or speaker; boards/<board>/board.json says which chip, arch and flash offset.
Steps: (1) with --firmware, erase and write MicroPython with esptool (v5 spelling) and wait for
the REPL; (2) check the board: chip family, MicroPython >= board.json's min_micropython (1.28,
PROTOCOL.md section 1), the .mpy version and native arch; (3) compile exactly the files the role
imports with mpy-cross for the arch and copy them with mpremote, plus board.json and the entry
point as /main.py (and /config.json for the master when Wi-Fi or a token is given); (4) verify:
the organ's descriptor as the deployed code builds it on the board (or, with --uart-port, as it
comes out of the organ's UART), or the master's boot line and status, after a soft reset.
--dry-run prints every step and touches no port; --mount runs the role from the working tree
through `mpremote mount` instead of copying.
"""


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="flash.py",
        description=USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Wi-Fi and token for the master may come from ORGANBUS_WIFI_SSID, "
        "ORGANBUS_WIFI_PASSWORD and ORGANBUS_HTTP_TOKEN; they are written to the board only.",
    )
    ap.add_argument("role", choices=sorted(ROLES), help="which board to deploy")
    ap.add_argument("--port", help="the board's serial port (e.g. /dev/ttyACM0)")
    ap.add_argument("--firmware", help="erase the flash and write this MicroPython image first")
    ap.add_argument("--baud", type=int, default=460800, help="esptool baud rate (460800)")
    ap.add_argument("--arch", help="mpy-cross -march (default: board.json's arch)")
    ap.add_argument("--dry-run", action="store_true", help="print every step, touch nothing")
    ap.add_argument(
        "--mount", action="store_true", help="run from the working tree via mpremote mount"
    )
    ap.add_argument("--force", action="store_true", help="copy files even when the board has them")
    ap.add_argument("--no-verify", action="store_true", help="skip the soft reset and read-back")
    ap.add_argument(
        "--uart-port",
        help="where the organ's UART TX can be read (a USB-UART adapter, or socket://HOST:PORT "
        "for a virtual board): the descriptor is then read off the wire",
    )
    ap.add_argument("--verify-seconds", type=float, default=6.0, help="how long to watch the run")
    ap.add_argument("--wifi-ssid", help="master: Wi-Fi network (or ORGANBUS_WIFI_SSID)")
    ap.add_argument("--wifi-password", help="master: Wi-Fi password (or ORGANBUS_WIFI_PASSWORD)")
    ap.add_argument("--token", help="master: HTTP bearer token (or ORGANBUS_HTTP_TOKEN)")
    ap.add_argument("--console", choices=("repl", "link"), help="master: USB console use")
    ap.add_argument(
        "--xiaozhi-ota-url",
        metavar="URL",
        help="master: a xiaozhi server's OTA/discovery URL (http:// or https://, docs/links.md)",
    )
    ap.add_argument(
        "--ota",
        metavar="URL",
        help="master: update it over the air at http://HOST[:PORT] (with --token), no --port",
    )
    ap.add_argument(
        "--ota-rollback",
        metavar="URL",
        nargs="?",
        const=True,
        help="master: ask it to go back to its previous slot (URL here or in --ota)",
    )
    ap.add_argument("--ota-key", metavar="FILE", help="the update key (hex; or ORGANBUS_OTA_KEY)")
    ap.add_argument("--ota-version", help="the update's version (default: git describe + time)")
    ap.add_argument(
        "--ota-timeout", type=float, default=120.0, help="seconds to wait for commit or rollback"
    )
    args = ap.parse_args(argv)
    if args.ota or args.ota_rollback:
        if args.role != "master":
            ap.error("--ota and --ota-rollback are for the master")
        if args.ota_rollback is True and not args.ota:
            ap.error("--ota-rollback needs the master's URL: --ota-rollback URL or --ota URL")
    elif not args.port:
        ap.error("the following arguments are required: --port")
    return args


def over_the_air(args):
    """--ota / --ota-rollback: no serial port, the master's HTTP API (tools/deploy/ota.py)."""
    from deploy import ota

    token = args.token or os.environ.get("ORGANBUS_HTTP_TOKEN")
    if args.ota_rollback:
        url = args.ota if args.ota_rollback is True else args.ota_rollback
        return ota.rollback(url, token, args.ota_timeout)
    return ota.update(args.ota, token, args.ota_key, args.arch, args.ota_version, args.ota_timeout)


def deploy(args):
    role = args.role
    board = load_board(role)
    arch = args.arch or board["arch"]
    if arch not in ARCH_IDS:
        raise FlashError("unknown --arch %r: one of %s" % (arch, ", ".join(sorted(ARCH_IDS))))
    if role != "master" and (
        args.wifi_ssid or args.wifi_password or args.token or args.console or args.xiaozhi_ota_url
    ):
        raise FlashError(
            "--wifi-ssid, --wifi-password, --token, --console and --xiaozhi-ota-url are for the "
            "master"
        )
    ota = args.xiaozhi_ota_url
    if ota is not None and not (ota.startswith("http://") or ota.startswith("https://")):
        raise FlashError("--xiaozhi-ota-url %r must start with http:// or https://" % ota)
    cfg = config_json(args) if role == "master" else None
    # the master's links: those the config written names (no config written: every link)
    links = master_links(cfg) if cfg is not None else None
    if links is not None:
        links["nudge"] = True  # no option names nudge_url: /config.json gets it by hand
    files = role_files(role, board, links)
    dry = args.dry_run
    step = [0]

    def head(text):
        step[0] += 1
        say("%s%d. %s" % ("[dry-run] " if dry else "", step[0], text))

    say(
        "organbus %s -> %s (%s, %s): %d modules, %d data files, entry point boards/%s/main.py"
        % (
            role,
            args.port,
            board["board"],
            arch,
            len(files["modules"]),
            len(files["data"]),
            board["name"],
        )
    )
    if args.firmware:
        if not dry:
            require_port(args.port)
            check_firmware_file(args.firmware, board["chip"])
        for cmd in esptool_cmds(board, args.port, args.firmware, args.baud):
            head(show(cmd))
            if not dry:
                p = run(cmd, "esptool")
                if p.returncode:
                    raise FlashError(
                        "esptool failed (exit %d, its message is above): check the port, or hold "
                        "BOOT while pressing RESET to enter download mode and run again"
                        % p.returncode
                    )
        head("wait for the MicroPython REPL on %s" % args.port)
        if not dry:
            wait_for_repl(args.port)

    mpy_version = mpy_cross_version() if not dry else None
    head(
        "check the board: %s (chip %s, MicroPython >= %s, .mpy arch %s; firmware modules %s)"
        % (
            show(mpremote_cmd(args.port, "exec", "<probe>")),
            board["chip"],
            ".".join(map(str, board["min_micropython"])),
            arch,
            ", ".join(sorted(files["externals"])) or "none",
        )
    )
    runnable = True
    frozen = []
    if not dry:
        require_port(args.port)
        info = probe(args.port, files["externals"])
        notes, runnable = check_probe(info, board, arch, role, mpy_version, not args.mount)
        notes += check_externals(info, files["externals"])
        frozen = frozen_in(info, files)
        if frozen and not args.mount:
            notes.append(
                "frozen in the firmware, so not copied (the frozen copies run, not files in /lib; "
                "rebuild the firmware to change them, or use --mount): " + ", ".join(frozen)
            )
        say(
            "   board: MicroPython %s on %s (build %s), %d bytes free"
            % (
                ".".join(map(str, info["version"])),
                info["machine"],
                info["build"] or "-",
                info["mem_free"],
            )
        )
        for n in notes:
            say("   note: " + n)

    if args.mount:
        return mount(args, role, files, dry, head, board, cfg)

    stage = tempfile.mkdtemp(prefix="organbus-%s-" % role)
    cfg_path = None
    try:
        plan = compile_plan(files, arch, stage, frozen)
        head("compile %d modules with mpy-cross -march=%s" % (len(plan), arch))
        for cmd, src, staged, dest in plan:
            say("   " + show(cmd))
            if not dry:
                os.makedirs(os.path.dirname(staged), exist_ok=True)
                p = run(cmd, "mpy-cross", capture=True)
                if p.returncode:
                    raise FlashError(
                        "mpy-cross refused %s:\n%s" % (os.path.relpath(src, ROOT), p.stderr.strip())
                    )
        if cfg is not None:
            cfg_path = _write_config(cfg) if not dry else os.path.join(stage, "config.json")
        cmd = copy_commands(args.port, plan, files, stage, role, board, cfg_path, args.force)
        head(
            "copy to the board with mpremote (one session; prepares folders, removes stale sources)"
        )
        shown = [c if not c.startswith("import os\n") else "<prepare>" for c in cmd]
        if cfg_path:
            shown = [
                c.replace(cfg_path, "<config.json: %s>" % ", ".join(sorted(cfg))) for c in shown
            ]
        say("   " + show(shown))
        if not dry:
            p = run(cmd, "mpremote copy", capture=True, timeout=600)
            if p.returncode or "prepared" not in p.stdout:
                raise FlashError(
                    "copying to the board failed:\n%s"
                    % ((p.stdout or "") + (p.stderr or "")).strip()
                )
            say("   copied: %d files" % (p.stdout.count("\ncp ") + p.stdout.startswith("cp ")))
    finally:
        if cfg_path and os.path.exists(cfg_path):
            os.remove(cfg_path)
        if not dry:
            args._stage = stage  # kept for the caller's inspection, removed by main()
        else:
            shutil.rmtree(stage, ignore_errors=True)

    if args.no_verify:
        return 0
    return verify(args, role, board, dry, head, runnable, cfg)


def _terminated(signum, frame):
    raise SystemExit(128 + signum)  # run the finally blocks: temporary files, child processes


def main(argv=None):
    args = parse_args(argv)
    args._stage = None
    signal.signal(signal.SIGTERM, _terminated)
    try:
        if args.ota or args.ota_rollback:
            return over_the_air(args)
        return deploy(args)
    except FlashError as e:
        print("flash.py: error: %s" % e, file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        print("flash.py: interrupted", file=sys.stderr)
        return 130
    finally:
        if args._stage and not os.environ.get("ORGANBUS_KEEP_STAGE"):
            shutil.rmtree(args._stage, ignore_errors=True)
