# The xiaozhi link (config "xiaozhi"): on the MCP link (http.manifest.py) and the network plumbing.
include("http.manifest.py")
include("../net/manifest.py")
package("master/links", files=["xiaozhi_discovery.py", "xiaozhi_mcp.py", "xiaozhi.py", "xiaozhi_link.py",
        "xiaozhi_endpoint.py"], base_path="../..")  # fmt: skip
