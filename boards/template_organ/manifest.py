# Firmware for the button organ (the template; optional: stock ESP32_GENERIC_C6 works too).
# Build from ports/esp32: make BOARD=ESP32_GENERIC_C6 FROZEN_MANIFEST=/path/to/boards/template_organ/manifest.py
# First, once per MicroPython tree: python3 /path/to/organbus/tools/mpy_tool_align.py /path/to/micropython
# (frozen native code must stay 2-aligned on the C6: boards/c6_master/README.md)
include("$(PORT_DIR)/boards/manifest.py")

include("../../lib/organbus/manifest.py")

package("organs", files=["__init__.py", "board.py", "runtime.py", "template.py"], base_path="../..")
