# Replica of the xiaozhi MCP endpoint relay (xinnan-tech/mcp-endpoint-server) and a robot session through it, for tests and `tools/xiaozhi_server.py --relay`.
"""The relay side of the xiaozhi peers (tools/xiaozhi_server.py's docstring says what it
replicates): `EndpointRelay` (tool servers dial TOOL_PATH, robots ROBOT_PATH), `RelayRobot`
(one robot session as xiaozhi-server's mcp_endpoint_handler opens it) and the relay's console.

The relay replicates xinnan-tech/mcp-endpoint-server (src/server.py, src/core/
connection_manager.py, src/handlers/websocket_handler.py): the tool side dials
ws://HOST:PORT/mcp_endpoint/mcp/?token=T, the robot side (a xiaozhi server, one connection per
device session) /mcp_endpoint/call/?token=T; request ids rewritten to "<uuid>_n_<id>" /
"<uuid>_s_<id>" and restored on the way back, a message from the tool side whose id does not
parse (a notification) dropped, a bad token closed with 1008, a second tool connection of the
same token closing the first (and, as there, the first one's end unregistering the second).
The real relay's token is an AES-encrypted {"agentId"}; the replica maps tokens to agents.
The console's `tools` and `call` then go through one robot session as xiaozhi-server's
mcp_endpoint_handler makes them (initialize, initialized, tools/list back to back).
"""

import asyncio
import json
import sys
import uuid
from urllib.parse import parse_qs

import websockets
from websockets.asyncio.server import serve

from xiaozhi_server import CALL_TIMEOUT_S, LOOPBACK, _print, _request

# -- the MCP endpoint relay (xinnan-tech/mcp-endpoint-server) --------------------------------

TOOL_PATH = "/mcp_endpoint/mcp/"
ROBOT_PATH = "/mcp_endpoint/call/"


class EndpointRelay:
    """The relay: tool servers dial TOOL_PATH, xiaozhi servers (one connection per device
    session) ROBOT_PATH, both with ?token=T; `tokens` maps each token to its agent."""

    def __init__(self, host="127.0.0.1", port=0, tokens=None):
        if host not in LOOPBACK:
            raise ValueError("the relay replica listens on loopback only, not %r" % host)
        self.host, self.port = host, port
        self.tokens = dict(tokens) if tokens else {uuid.uuid4().hex: "single_module"}
        self.tool_connections = {}  # agent -> the tool side's WebSocket
        self.robot_connections = {}  # uuid -> (agent, WebSocket)
        self.tool_messages = []  # every text message from the tool side, parsed
        self.to_tool = []  # every message forwarded to the tool side (after the id rewrite)
        self.dropped = []  # tool-side messages with no target (notifications, unparsable ids)
        self.tool_connects = 0
        self.refused = 0  # connections closed 1008 (bad or missing token)
        self._srv = None
        self.changed = asyncio.Event()

    def url(self, side="tool", token=None):
        token = token or next(iter(self.tokens))
        path = TOOL_PATH if side == "tool" else ROBOT_PATH
        return "ws://%s:%d%s?token=%s" % (self.host, self.port, path, token)

    async def start(self):
        self._srv = await serve(self._conn, self.host, self.port, max_size=1 << 20)
        self.port = self._srv.sockets[0].getsockname()[1]
        return self

    async def stop(self):
        if self._srv is not None:
            self._srv.close()
            await self._srv.wait_closed()
            self._srv = None

    def _changed(self):
        self.changed.set()
        self.changed = asyncio.Event()

    async def _conn(self, ws):
        path, _, query = ws.request.path.partition("?")
        token = parse_qs(query).get("token", [None])[0]
        agent = self.tokens.get(token) if token else None
        if path not in (TOOL_PATH, ROBOT_PATH):
            await ws.close(4004, "no such path")
            return
        if agent is None:  # validate_token_and_get_agent_id: accepted, then closed
            self.refused += 1
            await ws.close(1008, "token解密失败" if token else "缺少token参数")
            return
        if path == TOOL_PATH:
            await self._tool(agent, ws)
        else:
            await self._robot(agent, ws)

    async def _tool(self, agent, ws):
        old = self.tool_connections.get(agent)
        if old is not None:  # register_tool_connection: the older one is closed
            try:
                await old.close(1000, "新连接替换")
            except Exception:
                pass
        self.tool_connections[agent] = ws
        self.tool_connects += 1
        self._changed()
        try:
            async for raw in ws:
                if isinstance(raw, bytes):
                    raw = raw.decode("utf-8", "replace")
                try:
                    msg = json.loads(raw)
                except ValueError:
                    continue  # 由于消息不是JSON格式，已忽略
                self.tool_messages.append(msg)
                target, restored = _restore(msg)
                if target is None or target not in self.robot_connections:
                    self.dropped.append(msg)  # 没有特定目标，无法转发消息
                else:
                    try:
                        await self.robot_connections[target][1].send(
                            json.dumps(restored, ensure_ascii=False)
                        )
                    except websockets.ConnectionClosed:
                        self.robot_connections.pop(target, None)
                self._changed()
        except websockets.ConnectionClosed:
            pass
        finally:
            # unregister_tool_connection(agent_id): by agent, whichever socket is registered
            self.tool_connections.pop(agent, None)
            self._changed()

    async def _robot(self, agent, ws):
        cid = str(uuid.uuid4())
        self.robot_connections[cid] = (agent, ws)
        try:
            async for raw in ws:
                try:
                    msg = json.loads(raw)
                except ValueError:
                    msg = None
                rid = msg.get("id") if isinstance(msg, dict) else None
                if isinstance(msg, dict):
                    msg = dict(msg)
                    if "id" in msg and msg["id"]:  # transform_jsonrpc_message: falsy ids pass
                        msg["id"] = _transform(msg["id"], cid)
                out = json.dumps(msg, ensure_ascii=False) if msg is not None else raw
                tool = self.tool_connections.get(agent)
                if tool is None:
                    err = {"code": -32001, "message": "工具端未连接",
                           "data": {"agent_id": agent, "details": "请求的工具端连接不存在或已断开"}}  # fmt: skip
                    await ws.send(json.dumps({"result": None, "error": err, "id": rid,
                                              "jsonrpc": "2.0"}, ensure_ascii=False))  # fmt: skip
                    continue
                try:
                    await tool.send(out)
                    self.to_tool.append(msg)
                except websockets.ConnectionClosed:
                    self.tool_connections.pop(agent, None)
                    err = {"code": -32002, "message": "转发消息失败"}
                    await ws.send(json.dumps({"jsonrpc": "2.0", "id": rid, "error": err}))
                self._changed()
        except websockets.ConnectionClosed:
            pass
        finally:
            self.robot_connections.pop(cid, None)
            self._changed()


def _transform(mid, cid):
    # ConnectionManager._transform_jsonrpc_id
    if isinstance(mid, int):
        return "%s_n_%s" % (cid, mid)
    return "%s_s_%s" % (cid, mid)


def _restore(msg):
    # ConnectionManager.restore_jsonrpc_message: (target uuid or None, the message)
    if not isinstance(msg, dict) or "id" not in msg:
        return None, msg
    tid = msg["id"]
    if not tid or not isinstance(tid, str) or "_" not in tid:
        return None, msg
    parts = tid.split("_", 2)
    if len(parts) < 3:
        return None, msg
    cid, kind, orig = parts
    if kind == "n":
        try:
            orig = int(orig)
        except ValueError:
            pass
    elif kind == "s" and orig == "null":
        orig = None
    out = dict(msg)
    out["id"] = orig
    return cid, out


class RelayRobot:
    """One device session's tool client through the relay, as xiaozhi-server's
    mcp_endpoint_handler makes it: initialize (id 1), notifications/initialized and tools/list
    (id 2) sent back to back, nextCursor followed with id 2; calls numbered from 1."""

    def __init__(self, url):
        self.url = url
        self.ws = None
        self.tools = []
        self.pages = []
        self.initialize = None
        self.errors = []  # error replies to initialize or tools/list
        self.ready = asyncio.Event()
        self.pending = {}
        self.next_id = 1
        self._reader = None

    async def connect(self):
        self.ws = await websockets.connect(self.url)
        self._reader = asyncio.create_task(self._listen())
        caps = {"roots": {"listChanged": True}, "sampling": {}}
        await self._send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                          "params": {"protocolVersion": "2024-11-05", "capabilities": caps,
                                     "clientInfo": {"name": "XiaozhiClient", "version": "1.0.0"}}})  # fmt: skip
        await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await self._send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        return self

    async def close(self):
        if self._reader is not None:
            self._reader.cancel()
        if self.ws is not None:
            await self.ws.close()

    async def _send(self, obj):
        await self.ws.send(json.dumps(obj, ensure_ascii=False))

    async def _listen(self):
        try:
            async for raw in self.ws:
                try:
                    p = json.loads(raw)
                except ValueError:
                    continue
                await self._on(p)
        except websockets.ConnectionClosed:
            pass
        finally:
            self.ready.clear()

    async def _on(self, p):
        raw = p.get("id")
        mid = int(raw) if raw is not None else 0
        fut = self.pending.pop(mid, None)
        if fut is not None:
            if not fut.done():
                fut.set_result(p)
            return
        if "error" in p:
            self.errors.append(p["error"])
            return
        r = p.get("result")
        if mid == 1:
            self.initialize = r
        elif mid == 2 and isinstance(r, dict):
            self.pages.append(
                {"bytes": len(json.dumps(p)), "tools": [t["name"] for t in r["tools"]]}
            )
            self.tools.extend(r["tools"])
            cursor = r.get("nextCursor")
            if cursor:
                await self._send({"jsonrpc": "2.0", "id": 2, "method": "tools/list",
                                  "params": {"cursor": cursor}})  # fmt: skip
            else:
                self.ready.set()

    async def request(self, method, params=None, timeout=CALL_TIMEOUT_S):
        return await _request(self, self._send, method, params, timeout)


async def _relay_console(relay):
    loop = asyncio.get_running_loop()
    print("MCP endpoint relay replica: tool side %s" % relay.url("tool"), flush=True)
    print("  (tools/sim.py --xiaozhi-endpoint URL); console: tools, call NAME {...}, quit")
    robot = None
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        word, _, rest = line.strip().partition(" ")
        if not word:
            continue
        if word == "quit":
            break
        try:
            if robot is None or not robot.ready.is_set():
                if robot is not None:
                    await robot.close()
                robot = await RelayRobot(relay.url("robot")).connect()
                await asyncio.wait_for(robot.ready.wait(), 10)
            if word == "tools":
                for t in robot.tools:
                    print("  %s  %s" % (t["name"], t.get("description", "")))
            elif word == "call":
                name, _, a = rest.partition(" ")
                args = json.loads(a) if a.strip() else {}
                _print(await robot.request("tools/call", {"name": name, "arguments": args}))
            else:
                print("unknown command %r (tools, call, quit)" % word)
        except Exception as e:
            print("error: %r (errors from the relay: %s)" % (e, robot.errors if robot else None))
            robot = None
    if robot is not None:
        await robot.close()
