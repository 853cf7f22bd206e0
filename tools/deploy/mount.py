# Mount: the role run from the working tree through `mpremote mount`.
import os
import shutil
import subprocess
import tempfile

from deploy.base import FlashError, mpremote_cmd, run, show
from deploy.boards import board_dir
from deploy.install import _write_config


def mount_stage(role, files, stage):
    """A folder shaped like the board, made of symlinks into the working tree. board.json stays
    on the board itself (copied first): reading it through the mount protocol byte by byte
    (json.load) would take seconds."""
    bdir = board_dir(role)
    os.makedirs(os.path.join(stage, "lib"), exist_ok=True)
    os.symlink(os.path.join(bdir, "main.py"), os.path.join(stage, "main.py"))
    with open(os.path.join(stage, "_organbus_run.py"), "w") as f:
        f.write(MOUNT_RUN)
    for src, dest in files["modules"] + [(s, d) for s, d in files["data"]]:
        target = os.path.join(stage, "lib", *dest.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            os.symlink(src, target)
    return stage


# The launcher in the mounted folder: working-tree modules first (before the firmware's frozen
# copies and the board's /lib), then the entry point run as the board would run /main.py.
MOUNT_RUN = (
    "# organbus --mount launcher (temporary)\n"
    "import sys\nsys.path[:0] = ['/remote/lib']\n"
    "exec(open('/remote/main.py').read(), {'__name__': '__main__', '__file__': '/remote/main.py'})\n"
)


def mount(args, role, files, dry, head, board, cfg):
    stage = tempfile.mkdtemp(prefix="organbus-mount-%s-" % role)
    cfg_path = None
    try:
        cp = mpremote_cmd(
            args.port,
            "resume",
            "fs",
            "cp",
            os.path.join(board_dir(role), "board.json"),
            ":/board.json",
        )
        if cfg is not None:
            cfg_path = _write_config(cfg) if not dry else os.path.join(stage, "config.json")
            cp += [
                "+",
                "fs",
                "cp",
                cfg_path,
                ":" + board.get("settings", {}).get("config", "/config.json"),
            ]
        head(
            "copy the pin map (and the master's config) to the board: "
            + show(cp).replace(cfg_path or "\0", "<config.json>")
        )
        if not dry:
            p = run(cp, "mpremote copy", capture=True, timeout=120)
            if p.returncode:
                raise FlashError("copying board.json failed:\n%s" % (p.stdout + p.stderr).strip())
            mount_stage(role, files, stage)
        cmd = mpremote_cmd(
            args.port, "resume", "mount", "-l", stage, "exec", "import _organbus_run"
        )
        head("run from the working tree (symlinks in %s; Ctrl-C stops): %s" % (stage, show(cmd)))
        if dry:
            return 0
        child = subprocess.Popen(cmd)
        try:
            return child.wait()
        except (KeyboardInterrupt, SystemExit):
            # Ctrl-C reaches mpremote too (same process group), which stops the board's program.
            try:
                child.wait(5)
            except subprocess.TimeoutExpired:
                child.terminate()
                child.wait(5)
            return 130
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if cfg_path and os.path.exists(cfg_path):
            os.remove(cfg_path)
