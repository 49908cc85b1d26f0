"""A stdio MCP server written by hand, so that it can answer what no SDK would send.

`python -m tests.mcp_server.garbled` lists three tools: ``answer`` answers as a server should,
``long_number`` answers with a number of more digits than Python reads as an int, and ``garbage``
answers with a line that is not JSON at all.
"""

from __future__ import annotations

import json
import sys

LONG = "7" * (sys.get_int_max_str_digits() + 1)
TOOLS = [
    {"name": name, "description": f"The {name} tool.", "inputSchema": {"type": "object", "properties": {}}}
    for name in ("answer", "long_number", "garbage")
]


def _result(call: str | int, tool: str) -> str:
    if tool == "long_number":
        head = json.dumps({"jsonrpc": "2.0", "id": call, "result": {"content": [], "structuredContent": {"n": 0}}})
        return head.replace('"n": 0', f'"n": {LONG}')
    if tool == "garbage":
        return "this is not JSON-RPC"
    content = [{"type": "text", "text": "answered"}]
    return json.dumps({"jsonrpc": "2.0", "id": call, "result": {"content": content, "isError": False}})


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        call, method = message.get("id"), message.get("method")
        if call is None:
            continue  # a notification
        if method == "initialize":
            info = {"name": "garbled", "version": "1"}
            result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}}}
            answer = json.dumps({"jsonrpc": "2.0", "id": call, "result": {**result, "serverInfo": info}})
        elif method == "tools/list":
            answer = json.dumps({"jsonrpc": "2.0", "id": call, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            answer = _result(call, message["params"]["name"])
        else:
            answer = json.dumps({"jsonrpc": "2.0", "id": call, "result": {}})
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
