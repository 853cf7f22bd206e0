# The JSON-lines console link (config "console": "link"); its status codes come from the HTTP link's routes.
include("http.manifest.py")
package("master/links", files=["jsonlines.py"], base_path="../..")
