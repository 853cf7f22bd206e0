# Firmware for the LED organ board (optional: stock ESP32_GENERIC_C6 + tools/flash.py works too).
# Build from ports/esp32: make BOARD=ESP32_GENERIC_C6 FROZEN_MANIFEST=/path/to/boards/led_organ/manifest.py
include("$(PORT_DIR)/boards/manifest.py")

include("../../lib/organbus/manifest.py")

package("organs", files=["__init__.py", "board.py", "runtime.py", "led.py"], base_path="../..")
