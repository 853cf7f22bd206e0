# The update over the air (config "ota" key, or an HTTP token): its service, slots, bundle and reader, and its routes on the HTTP link.
include("../links/http.manifest.py")
include("../net/manifest.py")
package(
    "master/ota",
    files=["__init__.py", "service.py", "slots.py", "bundle.py", "reader.py", "routes.py"],
    base_path="../..",
)
