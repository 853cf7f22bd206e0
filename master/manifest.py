# The master's manifest: the bus, the edge and the wiring always, then each link named in options from its own manifest.
#
# micropython-lib's component style (aioble's options): a board freezes only the links it
# runs; boards/c6_master/manifest.py passes them, and tools/flash.py reads these same files to
# install what the config it writes names (tools/deploy/roles.py, docs/master.md).
options.defaults(console=True, nudge=True, xiaozhi=True, mqtt=True, ota=True)

package("master", files=["__init__.py", "app.py", "edge.py"], base_path="..")
package("master/bus", base_path="..")
include(
    "links/http.manifest.py"
)  # the HTTP API: /menu, /plan, /status, /events, MCP, Body Protocol
if options.console:
    include("links/console.manifest.py")
if options.nudge:
    include("links/nudge.manifest.py")
if options.xiaozhi:
    include("links/xiaozhi.manifest.py")
if options.mqtt:
    include("links/mqtt.manifest.py")
if options.ota:
    include("ota/manifest.py")
