# The network plumbing the client links share: URLs, the HTTP/1.1 client, bounded JSON, the WebSocket.
package(
    "master/net",
    files=["__init__.py", "url.py", "http.py", "jsonin.py", "jsonout.py", "wsframe.py", "ws.py"],
    base_path="../..",
)
