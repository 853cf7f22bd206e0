# Flash and deploy one organbus board: firmware (esptool), board checks, mpy-cross, mpremote, verify.
"""Put a role on a board.

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

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from deploy.cli import main  # noqa: E402  (the code is the package tools/deploy/)

if __name__ == "__main__":
    sys.exit(main())
