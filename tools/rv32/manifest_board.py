# The RV32 image as a board runs the code (build_image.sh --board): the test image's freezes plus the core and the master frozen.
include("manifest.py")
include("../../lib/organbus/manifest.py")
include("../../master/manifest.py")
