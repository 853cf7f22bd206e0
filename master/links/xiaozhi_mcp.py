# MCP over the xiaozhi channel (section 6): JSON-RPC requests answered, tools/list in pages, tools/call.
#
# McpOverWs is the MCP half of master/links/xiaozhi.py's Device (and so of the relay's Endpoint):
# its methods use the Device's state (facade, mcp, counts, menu_gen/listed_gen, the outbox through
# `_mcp_out`, tasks through `_run`). A tools/call answers within CALL_DEADLINE_MS, a tools/list
# page is one WebSocket message of PAGE_BYTES at most; no request content raises.
import json
import sys

import asyncio

from micropython import const

from organbus import log
from master.links import jsonrpc
from master.links.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND
from master.links.mcptools import cursor_index, tools as mcp_tools

_MP = sys.implementation.name == "micropython"

MCP_VERSION = "2024-11-05"  # the MCP revision of the xiaozhi device contract (section 6)
PAGE_BYTES = const(8000)  # a tools/list answer, whole WebSocket message, at most (78's firmware)
CALL_DEADLINE_MS = const(25000)  # a tools/call answers by then (xinnan's server waits 30 s)


class McpOverWs:
    """The MCP requests of a xiaozhi session, for the Device that holds its state."""

    call_deadline_ms = CALL_DEADLINE_MS  # a class attribute: tests may set it on an instance

    def on_mcp(self, p):
        if not isinstance(p, dict) or p.get("jsonrpc") != "2.0":
            self.counts["malformed"] += 1
            mid = p.get("id") if isinstance(p, dict) and id_ok(p) else None
            return self._mcp_out(
                jsonrpc.error(mid, INVALID_REQUEST, "payload must be a JSON-RPC 2.0 object")
            )
        method = p.get("method")
        if "id" not in p:
            self.counts["notifications"] += 1  # notifications/* and anything else: dropped
            return
        if not id_ok(p):
            self.counts["malformed"] += 1
            return self._mcp_out(
                jsonrpc.error(None, INVALID_REQUEST, "id must be a string, a number or null")
            )
        mid = p["id"]
        if method is None and ("result" in p or "error" in p):
            return  # a response to a request this device never sends
        if not isinstance(method, str):
            self.counts["malformed"] += 1
            return self._mcp_out(jsonrpc.error(mid, INVALID_REQUEST, "method must be a string"))
        params = p.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return self._mcp_out(jsonrpc.error(mid, INVALID_PARAMS, "params must be an object"))
        if method == "initialize":
            self.initialized = True
            return self._mcp_out(jsonrpc.result(mid, self.initialize_result()))
        if method == "ping":
            return self._mcp_out(jsonrpc.result(mid, {}))
        if method == "tools/list":
            return self._mcp_out(self.tools_page(mid, params.get("cursor")))  # never an error
        if method == "tools/call":
            self.counts["tool_calls"] += 1
            self._run(self._call(mid, params))
            return
        return self._mcp_out(
            jsonrpc.error(
                mid,
                METHOD_NOT_FOUND,
                "method not found: %s (this device offers initialize, ping, tools/list, tools/call)"
                % method[:60],
            )
        )

    def initialize_result(self):
        return {
            "protocolVersion": MCP_VERSION,
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "organbus", "version": self.version},
        }

    def tools_page(self, mid, cursor):
        """The tools/list answer from `cursor` (a nextCursor this device gave) on, whole message
        at most PAGE_BYTES. A cursor it did not give (or a stale one) starts again at the first
        page: an error to any page leaves xinnan's server without tools for the session."""
        tools = mcp_tools(self.facade.menu())
        try:
            start = cursor_index(cursor, len(tools))
        except ValueError as e:
            log.emit("xiaozhi", [("what", "bad_cursor"), ("error", str(e)), ("answered", "page 1")])
            start = 0
        if start == 0:
            self._listing = self.menu_gen
        # the envelope with an empty page and the longest cursor, then each tool and its comma
        used = json_bytes(
            self._wrapped(jsonrpc.result(mid, {"tools": [], "nextCursor": str(len(tools))}))
        )
        page = []
        i = start
        while i < len(tools):
            n = json_bytes(tools[i]) + (2 if page else 0)
            if page and used + n > PAGE_BYTES:
                break
            used += n
            page.append(tools[i])
            i += 1
        r = {"tools": page}
        if i < len(tools):
            r["nextCursor"] = str(i)
        else:  # the whole list went out: the server knows the menu of when it began
            self.counts["lists"] += 1
            self.listed_gen = self._listing
            if self.listed_gen == self.menu_gen:
                self.changed_at = None
        return jsonrpc.result(mid, r)

    async def _call(self, mid, params):
        # The answer by CALL_DEADLINE_MS: a step still running then is said so, and goes on
        # (its own answer is dropped). A refusal carries its text as "error" too: xinnan's
        # server reads a failed call's reason there, not in content.
        self.calls += 1  # until its answer is queued: no re-open drops it
        try:
            box = []
            done = asyncio.Event()
            self._run(self._step_call(mid, params, box, done))
            try:
                await asyncio.wait_for(done.wait(), self.call_deadline_ms / 1000)
            except asyncio.TimeoutError:
                self.counts["calls_late"] += 1
                name = params.get("name")
                text = "%s: started, still running after %d s; it goes on" % (
                    name if isinstance(name, str) else "tool",
                    self.call_deadline_ms // 1000,
                )
                return self._mcp_out(
                    jsonrpc.result(mid, {"content": [{"type": "text", "text": text}]})
                )
            out = box[0]
            r = out.get("result")
            if isinstance(r, dict) and r.get("isError") is True:
                c = r.get("content")
                if c and isinstance(c[0], dict):
                    r["error"] = c[0].get("text")
            self._mcp_out(out)
        finally:
            self.calls -= 1

    async def _step_call(self, mid, params, box, done):
        try:
            out = await self.mcp.call_tool(mid, params, MCP_VERSION)
        except MemoryError:
            self._short("tools/call")
            out = jsonrpc.error(mid, INTERNAL_ERROR, "short of memory in tools/call: try again")
        except Exception as e:
            out = jsonrpc.error(mid, INTERNAL_ERROR, "internal error in tools/call: %r" % e)
        box.append(out)
        done.set()


def json_bytes(obj):
    # UTF-8 length of the JSON text: MicroPython does not escape non-ASCII as CPython does
    s = json.dumps(obj)
    return len(s.encode()) if _MP else len(s)


def id_ok(p):
    # a JSON-RPC id: a string, a number or null (JSON-RPC 2.0 section 4)
    mid = p.get("id")
    return mid is None or (isinstance(mid, (str, int, float)) and not isinstance(mid, bool))
