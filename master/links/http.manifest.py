# The HTTP link and the links it serves: the server, the master's routes, /events, MCP, Body Protocol.
package(
    "master/links",
    files=["__init__.py", "httpd.py", "httpmsg.py", "httplimits.py", "jsonout.py", "routes.py", "sse.py",
           "jsonrpc.py", "mcp.py", "mcptools.py", "mcpresources.py", "mcpstream.py", "bodyproto.py",
           "bodyclamp.py"],
    base_path="../..",
)  # fmt: skip
