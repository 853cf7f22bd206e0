# The MQTT link (config "mqtt"): its packets, client, discovery and link, on the HTTP link's routes and /events feed.
include("http.manifest.py")
package(
    "master/links/mqtt",
    files=["__init__.py", "packet.py", "client.py", "discovery.py", "link.py"],
    base_path="../..",
)
