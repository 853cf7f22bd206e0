# Firmware for the button organ (the template; optional: stock ESP32_GENERIC_C6 works too).
# Build from ports/esp32: make BOARD=ESP32_GENERIC_C6 FROZEN_MANIFEST=/path/to/boards/template_organ/manifest.py
include("$(PORT_DIR)/boards/manifest.py")

include("../../lib/organbus/manifest.py")

package("organs", files=["__init__.py", "board.py", "runtime.py", "template.py"], base_path="../..")
