#!/usr/bin/env python3
"""Independent Python peer for Countersign's interop tests.

A small MCP server (revision 2026-07-28, stateless, Tasks extension) built on
fastmcp 4.1.4 + fastmcp-tasks 4.1.4 (see tests/peers/requirements.txt). Its tools
mirror the ones recorded in shared/wire/fastmcp/*.txt:

  quick_echo       {text}              synchronous (never a task)
  optional_job     {seconds?}          task mode OPTIONAL (sync without the capability)
  long_job         {steps?, seconds?}  task; statusMessage "step i/n", then completes
  approve_deploy   {service}           task; asks a form elicitation {approve, reason}
  flaky_job        {}                  task; fails with a JSON-RPC error (-32603)
  tool_error_job   {}                  task; completes with isError: true
  slow_cancellable {seconds?}          task; "sleeping i/n", cancellable

Usage:
  python tests/peers/fastmcp_server.py --port 0

Binds 127.0.0.1 (port 0 = a free port), and once the endpoint answers a
`server/discover` prints exactly one line, `http://127.0.0.1:PORT/mcp`, on
stdout. Everything else goes to stderr. SIGTERM / SIGINT exit with status 0.

Environment (all optional):
  PEER_STEP_SECONDS       length of one progress step / sleep slice (default 0.2)
  PEER_POLL_INTERVAL_MS   pollIntervalMs advertised for every task (default 200)
  PEER_TTL_MS             task ttlMs, rounded to whole seconds (>= 1000); a finished
                          or input_required task is forgotten (-32602) about that
                          long after its last run (default: fastmcp-tasks', 900000)
  PEER_LONG_JOB_STEPS     default step count of long_job (default 5)
  PEER_SLOW_SECONDS       default `seconds` of slow_cancellable (default 10)
  PEER_OAUTH              "1": the server is OAuth-protected by fastmcp's own
                          InMemoryOAuthProvider (its authorization server on the same
                          origin: RFC 9728/8414 metadata, dynamic registration, an
                          authorize endpoint that approves at once, token, refresh,
                          revocation); /mcp answers 401 without a token
  PEER_TOKEN_SECONDS      access token lifetime in OAuth mode (default: fastmcp's, 3600)
  PEER_OAUTH_CLIENT       OAuth mode: a pre-registered client, JSON {"client_id",
                          "client_secret", "redirect_uri"}; fastmcp accepts exactly
                          that redirect URI for it (port included)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import socket
import sys
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any


def _exit_on_signal(signum: int, _frame: Any) -> None:
    # Installed before the heavy imports, so a SIGTERM at any point of startup exits
    # with status 0. While uvicorn serves, its own handlers take over (graceful
    # shutdown) and then re-raise the signal here, which again means: exit 0.
    raise SystemExit(0)


signal.signal(signal.SIGTERM, _exit_on_signal)
signal.signal(signal.SIGINT, _exit_on_signal)

# Keep stdout for the single URL line: anything a library prints goes to stderr.
_REAL_STDOUT = sys.stdout
sys.stdout = sys.stderr

import fastmcp  # noqa: E402
import mcp_types  # noqa: E402
from fastmcp import Context, FastMCP  # noqa: E402
from fastmcp.exceptions import ToolError  # noqa: E402
from fastmcp.utilities.tasks import TaskConfig  # noqa: E402
from fastmcp_tasks import TasksExtension  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw not in (None, "") else default


def _env_int(name: str, default: int | None) -> int | None:
    raw = os.environ.get(name)
    return int(raw) if raw not in (None, "") else default


STEP_SECONDS = _env_float("PEER_STEP_SECONDS", 0.2)
POLL_INTERVAL_MS = _env_int("PEER_POLL_INTERVAL_MS", 200)
TTL_MS = _env_int("PEER_TTL_MS", None)
LONG_JOB_STEPS = _env_int("PEER_LONG_JOB_STEPS", 5) or 5
SLOW_SECONDS = _env_float("PEER_SLOW_SECONDS", 10.0)
OAUTH = os.environ.get("PEER_OAUTH") == "1"
TOKEN_SECONDS = _env_int("PEER_TOKEN_SECONDS", None)

PROTOCOL_VERSION = "2026-07-28"
SERVER_NAME = "peer-fastmcp-tasks"


def _task(mode: str) -> TaskConfig:
    return TaskConfig(mode=mode, poll_interval=timedelta(milliseconds=POLL_INTERVAL_MS))


class PeerTasksExtension(TasksExtension):
    """fastmcp-tasks' extension, with the task TTL optionally overridden and a
    prompt shutdown.

    fastmcp-tasks derives ttlMs from Docket's `execution_ttl` (15 min) and offers no
    setting for it; PEER_TTL_MS sets it once the Docket exists, before any task.
    """

    @asynccontextmanager
    async def lifespan(self):  # type: ignore[override]
        async with super().lifespan():
            docket = getattr(self.server, "_docket", None)
            if TTL_MS is not None and docket is not None:
                # Docket applies its TTLs in whole seconds (and 0 s would drop a
                # finished task at once), so round to >= 1 s; ttlMs reports that.
                docket.execution_ttl = timedelta(seconds=max(1, round(TTL_MS / 1000)))
            try:
                yield
            finally:
                # Docket's worker drains running tasks on shutdown (a 30 s
                # slow_cancellable would hold SIGTERM up for 30 s): cancel them.
                worker = getattr(self.server, "_worker", None)
                for running in list(getattr(worker, "_tasks_by_key", {}).values()):
                    running.cancel()


mcp = FastMCP(
    name=SERVER_NAME,
    version=fastmcp.__version__,
    instructions="Countersign interop peer (fastmcp + fastmcp-tasks).",
)
mcp.add_extension(PeerTasksExtension())


@mcp.tool(task=False)
async def quick_echo(text: str) -> str:
    """Not a task: returns the text immediately."""
    return f"echo: {text}"


@mcp.tool(task=_task("optional"))
async def optional_job(ctx: Context, seconds: float = 0.4) -> str:
    """Task mode OPTIONAL: tasked only when the client declares the extension.

    Reports progress (two steps); run synchronously with a _meta.progressToken the
    SDK answers with text/event-stream (notifications/progress, then the result).
    """
    await ctx.report_progress(0, 2, "started")
    await asyncio.sleep(seconds / 2)
    await ctx.report_progress(1, 2, "halfway")
    await asyncio.sleep(seconds / 2)
    return f"optional_job done after {seconds} s"


@mcp.tool(task=_task("required"))
async def long_job(ctx: Context, steps: int = LONG_JOB_STEPS, seconds: float = 0.0) -> str:
    """Task: runs `steps` steps of PEER_STEP_SECONDS each, reporting "step i/n" as the
    task's statusMessage, then completes with text. `seconds` > 0 (the captures' form)
    overrides `steps` with ceil(seconds / PEER_STEP_SECONDS).
    """
    if seconds and seconds > 0:
        steps = math.ceil(seconds / STEP_SECONDS)
    steps = max(1, steps)
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}/{steps}")
        await asyncio.sleep(STEP_SECONDS)
    return f"long_job finished after {steps} steps"


APPROVAL_KEY = "approval"


@mcp.tool(task=_task("required"))
async def approve_deploy(service: str, ctx: Context):
    """Task: asks a human (form elicitation {approve, reason}) whether to deploy
    `service`, then completes with text saying approved or declined.

    Guard pattern (fastmcp-tasks has no imperative ctx.elicit() in a task): the first
    leg returns an InputRequiredResult; after tasks/update the tool re-runs from the
    top with ctx.input_responses set.
    """
    responses = ctx.input_responses or {}
    answer = responses.get(APPROVAL_KEY)
    if answer is None:
        return mcp_types.InputRequiredResult(
            input_requests={
                APPROVAL_KEY: mcp_types.ElicitRequest(
                    params=mcp_types.ElicitRequestFormParams(
                        message=f"Approve deployment of {service!r}?",
                        requested_schema={
                            "type": "object",
                            "properties": {
                                "approve": {
                                    "type": "boolean",
                                    "title": "Approve",
                                    "description": "Allow the deployment to proceed",
                                },
                                "reason": {
                                    "type": "string",
                                    "title": "Reason",
                                    "description": "Why (free text)",
                                },
                            },
                            "required": ["approve"],
                        },
                    )
                )
            }
        )
    action = getattr(answer, "action", None)
    if action != "accept":
        return f"approve_deploy({service}): declined (user action={action}); not deployed"
    content = getattr(answer, "content", None) or {}
    approve = content.get("approve")
    if isinstance(approve, str):
        approve = approve.strip().lower() in ("true", "yes", "1", "on")
    reason = content.get("reason") or ""
    if approve:
        return f"approve_deploy({service}): approved, DEPLOYED (reason={reason!r})"
    return f"approve_deploy({service}): declined by reviewer (reason={reason!r}); not deployed"


@mcp.tool(task=_task("required"))
async def flaky_job() -> str:
    """Task: after one step, fails with a JSON-RPC (protocol) error -> status "failed"."""
    await asyncio.sleep(STEP_SECONDS)
    raise MCPError(code=-32603, message="flaky_job exploded (deliberate)", data={"attempt": 1})


@mcp.tool(task=_task("required"))
async def tool_error_job() -> str:
    """Task: after one step, raises a ToolError -> "completed" with result.isError true."""
    await asyncio.sleep(STEP_SECONDS)
    raise ToolError("tool_error_job failed (deliberate tool-level error)")


@mcp.tool(task=_task("required"))
async def slow_cancellable(ctx: Context, seconds: float = SLOW_SECONDS) -> str:
    """Task: sleeps `seconds` in PEER_STEP_SECONDS slices, reporting "sleeping i/n" as
    the statusMessage; cancel it with tasks/cancel (cooperative)."""
    n = max(1, math.ceil(seconds / STEP_SECONDS))
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"sleeping {i}/{n}")
        await asyncio.sleep(STEP_SECONDS)
    return f"slow_cancellable slept {seconds} s"


# --------------------------------------------------------------------------- runner


def _log(msg: str) -> None:
    print(f"[fastmcp_server] {msg}", file=sys.stderr, flush=True)


async def _probe(port: int) -> bool:
    """POST a server/discover; True once the endpoint answers it with 200."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "server/discover",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {
                        "name": "peer-readiness-probe",
                        "version": "0",
                    },
                }
            },
        }
    ).encode()
    head = (
        "POST /mcp HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\n"
        "Content-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
        f"MCP-Protocol-Version: {PROTOCOL_VERSION}\r\n"
        "Mcp-Method: server/discover\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port), timeout=2
        )
    except (OSError, asyncio.TimeoutError):
        return False
    try:
        writer.write(head + body)
        await writer.drain()
        status = await asyncio.wait_for(reader.readline(), timeout=5)
        await asyncio.wait_for(reader.read(), timeout=5)
        # OAuth mode: a 401 without a token is the server being up and protected.
        return status.split(b" ")[1:2] == ([b"401"] if OAUTH else [b"200"])
    except (OSError, asyncio.TimeoutError, IndexError):
        return False
    finally:
        writer.close()


async def _announce_when_ready(port: int) -> None:
    for _ in range(600):
        if await _probe(port):
            print(f"http://127.0.0.1:{port}/mcp", file=_REAL_STDOUT, flush=True)
            _log(f"ready on port {port}")
            return
        await asyncio.sleep(0.05)
    _log("server never answered the readiness probe")
    os.kill(os.getpid(), signal.SIGTERM)


def _protect(port: int) -> None:
    """Puts fastmcp's in-memory OAuth provider in front of /mcp, issuer on our origin."""
    from fastmcp.server.auth.auth import ClientRegistrationOptions, RevocationOptions
    from fastmcp.server.auth.providers import in_memory

    if TOKEN_SECONDS is not None:
        # fastmcp reads this module constant at each token issue; there is no setting.
        in_memory.DEFAULT_ACCESS_TOKEN_EXPIRY_SECONDS = TOKEN_SECONDS
    provider = in_memory.InMemoryOAuthProvider(
        base_url=f"http://127.0.0.1:{port}",
        client_registration_options=ClientRegistrationOptions(enabled=True),
        revocation_options=RevocationOptions(enabled=True),
    )
    pre = os.environ.get("PEER_OAUTH_CLIENT")
    if pre:
        from mcp.shared.auth import OAuthClientInformationFull

        given = json.loads(pre)
        # What an administrator registers by hand: one exact redirect URI, a secret.
        provider.clients[given["client_id"]] = OAuthClientInformationFull(
            client_id=given["client_id"],
            client_secret=given["client_secret"],
            redirect_uris=[given["redirect_uri"]],
            token_endpoint_auth_method="client_secret_post",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        )
    mcp.auth = provider


async def _main(port: int, log_level: str) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.set_inheritable(True)
    bound = sock.getsockname()[1]
    _log(f"bound 127.0.0.1:{bound}; step={STEP_SECONDS}s poll={POLL_INTERVAL_MS}ms ttl={TTL_MS}")

    if OAUTH:
        _protect(bound)
    announcer = asyncio.create_task(_announce_when_ready(bound))
    try:
        await mcp.run_http_async(
            show_banner=False,
            transport="http",
            host="127.0.0.1",
            port=bound,
            path="/mcp",
            log_level=log_level,
            sockets=[sock],
        )
    finally:
        announcer.cancel()
        sock.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    parser.add_argument("--log-level", default=os.environ.get("PEER_LOG_LEVEL", "warning"))
    args = parser.parse_args()

    try:
        asyncio.run(_main(args.port, args.log_level))
    except SystemExit as exc:
        return int(exc.code or 0)
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
