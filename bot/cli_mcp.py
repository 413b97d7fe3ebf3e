"""`gemma-sre mcp`: the MCP server (bot/mcp_server.py) over stdio, or streamable HTTP with `--http`.

On the sandbox (the default without Google credentials, or `--sandbox`) it runs the simulated project in the same
process; when Slack is configured there (SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET), it also serves the bot's Slack
endpoints on 127.0.0.1 (`--slack-port`), so a deployer's click on a posted plan has a bot to reach -- outside the
sandbox, that bot is the deployed `gemma-sre serve` sharing REDIS_URL.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from typing import Any

from bot.settings import Settings, SettingsError, load_settings

DEFAULT_HTTP_PORT = 8765


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mcp", help="the skills as an MCP server for coding agents (stdio; --http for streamable HTTP)")
    p.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp (bearer tokens: MCP_TOKENS)")
    p.add_argument("--host", default="127.0.0.1", help="--http: the address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT, help="--http: the port (default %(default)s)")
    p.add_argument(
        "--sandbox",
        action="store_true",
        help="run on a simulated project on this machine (the default without Google credentials)",
    )
    p.add_argument(
        "--slack-port",
        type=int,
        default=None,
        help="sandbox with Slack configured: the bot's Slack endpoints' port on 127.0.0.1 (default $PORT or 8080; "
        "0: any free port, named on stderr)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"gemma-sre mcp: {exc}", file=sys.stderr)
        return 2
    if args.http and not settings.mcp_tokens:
        print(
            "gemma-sre mcp: --http needs MCP_TOKENS (JSON: Slack user id -> bearer token); every caller is named.",
            file=sys.stderr,
        )
        return 2
    from bot.log_format import setup_logging
    from bot.sandbox.attach import no_google_credentials

    setup_logging(settings.log_level)  # to stderr: stdout is the stdio transport
    sandbox = args.sandbox or no_google_credentials(settings)
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    return asyncio.run(_serve(settings, args, sandbox))


def _bind(host: str, port: int, what: str) -> socket.socket | str:
    """A listening socket, bound before anything starts: a port that is taken is one clear line at once, not
    uvicorn's exit inside the task group (a traceback) or a server that dies beside a running stdio session."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        return f"cannot serve {what} on {host}:{port}: {exc.strerror or exc}"
    sock.listen(128)
    return sock


async def _serve(settings: Settings, args: argparse.Namespace, sandbox: bool) -> int:
    import anyio
    import uvicorn

    from bot.mcp_plans import PlanPoster
    from bot.mcp_server import McpApp
    from bot.slack_app import make_web_client
    from bot.wiring import build_deps, close_deps

    http_sock: socket.socket | None = None
    if args.http:
        bound_http = _bind(args.host, args.port, "MCP over HTTP")
        if isinstance(bound_http, str):
            print(f"gemma-sre mcp: {bound_http}", file=sys.stderr)
            return 2
        http_sock = bound_http
    slack_sock: socket.socket | None = None
    if sandbox and settings.slack_bot_token and settings.slack_signing_secret:
        bound = _bind("127.0.0.1", settings.port if args.slack_port is None else args.slack_port, "the Slack endpoints")
        if isinstance(bound, str):
            print(f"gemma-sre mcp: {bound}", file=sys.stderr)
            if http_sock is not None:
                http_sock.close()
            return 2
        slack_sock = bound
        print(
            f"gemma-sre mcp: Slack endpoints on http://127.0.0.1:{bound.getsockname()[1]}", file=sys.stderr, flush=True
        )
    sim: Any = None
    if sandbox:
        from bot.sandbox.attach import build_sandbox_deps
        from bot.sandbox.cloud import BANNER, Sandbox

        print(BANNER, file=sys.stderr, flush=True)
        sim = await asyncio.to_thread(Sandbox(settings.sandbox_speed, image=settings.vllm_image).start)
        deps = build_sandbox_deps(sim.configure(settings, console=True), sim, settings.vllm_base_url)
    else:
        deps = build_deps(settings)
    st = deps.settings
    chat = make_web_client(st) if st.slack_bot_token else None
    if slack_sock is not None and chat is None:
        slack_sock.close()
        slack_sock = None
    deps.chat = chat
    elicit = st.mcp_elicit_confirm if st.mcp_elicit_confirm is not None else sandbox
    poster = PlanPoster(deps, chat, st.mcp_plan_channel or st.slack_alerts_channel, elicit)
    app = McpApp(deps, poster, st.mcp_stdio_user or ("console" if sandbox else "mcp-stdio"))
    server = app.server()
    servers: list[tuple[uvicorn.Server, list[socket.socket] | None]] = []
    if slack_sock is not None and chat is not None:
        from bot.sandbox.attach import attach_app
        from bot.web import create_app

        bot_app = create_app(deps)
        attach_app(bot_app, sim)
        config = uvicorn.Config(bot_app, host="127.0.0.1", port=slack_sock.getsockname()[1], log_config=None)
        servers.append((uvicorn.Server(config), [slack_sock]))
    if args.http:
        from bot.mcp_http import BearerCallers

        http_app = BearerCallers(server.streamable_http_app(host=args.host), st.mcp_tokens)
        config = uvicorn.Config(http_app, host=args.host, port=args.port, log_config=None, access_log=False)
        servers.append((uvicorn.Server(config), [http_sock] if http_sock is not None else None))
    try:
        async with anyio.create_task_group() as tg:
            for s, socks in servers:
                tg.start_soon(s.serve, socks)
            if not args.http:
                from mcp.server.stdio import stdio_server

                async with stdio_server() as (read, write):
                    await server.run(read, write, server.create_initialization_options())
                for s, _ in servers:  # the client closed stdin: the process is done
                    s.should_exit = True
    finally:
        await deps.drain()
        if sim is not None:
            await sim.aclose()
        await close_deps(deps)
    return 0
