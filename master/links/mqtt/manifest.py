# The MQTT link (config "mqtt"): its packets, client, discovery and link, on the HTTP link's routes and /events feed.
include("../http.manifest.py")
package("master/links/mqtt", base_path="../../..")
