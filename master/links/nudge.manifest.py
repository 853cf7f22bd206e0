# Nudges (config "nudge_url"): an organ's event POSTed through the network plumbing.
include("../net/manifest.py")
package("master/links", files=["nudge.py"], base_path="../..")
