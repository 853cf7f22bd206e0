# The xiaozhi link (config "xiaozhi"): on the MCP link (http.manifest.py) and the network plumbing.
include("http.manifest.py")
include("../net/manifest.py")
package("master/links", files=["xiaozhi.py", "xiaozhi_link.py"], base_path="../..")
