# Frozen into the RV32 test image: unittest (the port's own tests need it) and asyncio, as the C6 firmware has.
require("unittest")
include("$(MPY_DIR)/extmod/asyncio")
