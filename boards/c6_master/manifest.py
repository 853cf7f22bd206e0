# Frozen into the organbus master firmware: the port's defaults, aiorepl, the protocol core, master/.
include("$(PORT_DIR)/boards/manifest.py")
require("aiorepl")

# lib/*.py are top-level modules on a board (import frame, ...); paths are relative to this file.
module("command.py", base_path="../../lib")
module("crc16.py", base_path="../../lib")
module("descriptor.py", base_path="../../lib")
module("frame.py", base_path="../../lib")
module("menu.py", base_path="../../lib")
module("plan.py", base_path="../../lib")
module("utf8.py", base_path="../../lib")

package("master", base_path="../..")
