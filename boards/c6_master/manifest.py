# Frozen into the organbus master firmware: the port's defaults, aiorepl, the protocol core, master/.
include("$(PORT_DIR)/boards/manifest.py")
require("aiorepl")

include("../../lib/organbus/manifest.py")

package("master", base_path="../..")
