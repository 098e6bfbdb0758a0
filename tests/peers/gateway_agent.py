#!/usr/bin/env python3
"""An agent that is not ours, calling one tool through the Countersign gateway.

`fastmcp` mode: the fastmcp 4.1.4 client (MCP 2026-07-28, the tasks extension declared on every
request, `call_tool` polls a task to its end), made to send `Mcp-Name` on `tasks/*` as the
specification asks. `fastmcp-released` mode: the same client exactly as released, which sends no
`Mcp-Name` on `tasks/*` (its task requests declare no `name_param`). `session` mode: the `mcp` package's 2025-11-25
session client (`initialize`, `Mcp-Session-Id`, no tasks). `stdio` mode: the `mcp` package's
stdio client starting `countersign connect SERVER` (URL is then the countersign binary, and
--server, --data-dir say which server and ledger), as a stdio-only host would.

    gateway_agent.py MODE URL TOKEN TOOL ARGS_JSON [--timeout SECONDS] [--server NAME --data-dir DIR]

Prints one JSON line: {"isError", "text", "meta"} for a result, or {"error"} (exit 2) when the
call raised (refused token, transport failure).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys


def text_of(content) -> str:
    return " ".join(getattr(block, "text", "") for block in content or [])


async def via_fastmcp(url: str, token: str, tool: str, args: dict, timeout: float, released: bool) -> dict:
    from fastmcp import Client
    from fastmcp_tasks import client_models

    # fastmcp 4.1.4 sends no Mcp-Name on tasks/*; unless the client is to run as released, this
    # makes its own SDK add it (spec digest, section 5). The gateway accepts either; strict
    # upstreams require it, and the gateway writes the upstream's copy from the body.
    for request in (
        client_models.GetTaskRequest,
        client_models.UpdateTaskRequest,
        client_models.CancelTaskRequest,
    ):
        if released:
            assert request.name_param is None, "fastmcp's client now names its tasks/* requests"
        else:
            request.name_param = "taskId"

    async with Client(url, auth=token, timeout=timeout) as client:
        # As agents do: list first, which is how the client learns the arguments it must mirror
        # into Mcp-Param-* headers (SEP-2243); the gateway, like any server, refuses a call
        # whose headers do not match its body.
        await client.list_tools()
        result = await client.call_tool(tool, args, raise_on_error=False, timeout=timeout)
        return {"isError": bool(result.is_error), "text": text_of(result.content), "meta": result.meta or {}}


async def via_session(url: str, token: str, tool: str, args: dict, timeout: float) -> dict:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    http = create_mcp_http_client(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(timeout, read=timeout),
    )
    async with http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write, read_timeout_seconds=timeout) as session:
                init = await session.initialize()
                result = await session.call_tool(tool, args)
                return {
                    "isError": bool(result.is_error),
                    "text": text_of(result.content),
                    "meta": result.meta or {},
                    "protocolVersion": init.protocol_version,
                }


async def via_stdio(binary: str, token: str, tool: str, args: dict, timeout: float, server: str, data_dir: str) -> dict:
    import os

    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=binary,
        args=["--data-dir", data_dir, "connect", server],
        env={**os.environ, "COUNTERSIGN_AGENT_TOKEN": token},
    )
    async with stdio_client(params) as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write, read_timeout_seconds=timeout) as session:
            init = await session.initialize()
            result = await session.call_tool(tool, args)
            return {
                "isError": bool(result.is_error),
                "text": text_of(result.content),
                "meta": result.meta or {},
                "protocolVersion": init.protocol_version,
            }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["fastmcp", "fastmcp-released", "session", "stdio"])
    parser.add_argument("url")
    parser.add_argument("token")
    parser.add_argument("tool")
    parser.add_argument("args")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--server", default="demo")
    parser.add_argument("--data-dir", default="")
    a = parser.parse_args()
    try:
        if a.mode == "stdio":
            call = via_stdio(a.url, a.token, a.tool, json.loads(a.args), a.timeout, a.server, a.data_dir)
        elif a.mode.startswith("fastmcp"):
            released = a.mode == "fastmcp-released"
            call = via_fastmcp(a.url, a.token, a.tool, json.loads(a.args), a.timeout, released)
        else:
            call = via_session(a.url, a.token, a.tool, json.loads(a.args), a.timeout)
        out = asyncio.run(call)
    except BaseException as e:  # noqa: BLE001 - every failure is reported to the test
        # anyio wraps what went wrong inside a client's task group: report the first cause.
        while isinstance(e, BaseExceptionGroup) and e.exceptions:
            e = e.exceptions[0]
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
        return 2
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
