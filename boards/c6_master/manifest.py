# Frozen into the organbus master firmware: the port's defaults, aiorepl, the protocol core, the master and its links.
include("$(PORT_DIR)/boards/manifest.py")
require("aiorepl")

include("../../lib/organbus/manifest.py")

# every link; a board without some names them off, e.g. include(..., xiaozhi=False, ota=False)
include("../../master/manifest.py")
