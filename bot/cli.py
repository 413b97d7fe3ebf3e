"""The `gemma-sre` command: serve (production ASGI app), console (try it in a terminal), and the offline tools
that modules named bot/cli_<name>.py register (fit, diagnose, ...)."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import pkgutil
import signal
import sys
from typing import Any

import bot
from bot.settings import Settings, SettingsError, load_settings

_SANDBOX_HELP = "run on a simulated project on this machine (SANDBOX_SPEED: its clock's speed, default 30)"
BUILT_IN = ("serve", "console")
REQUIRED_FOR_SERVE = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "REDIS_URL")


def _serve(args: argparse.Namespace) -> int:
    problems: list[str] = []
    settings = None
    try:
        settings = load_settings()
    except SettingsError as exc:
        problems.extend(line.strip() for line in str(exc).splitlines()[1:])
    if settings is not None:
        problems.extend(settings.serve_problems())
    else:
        socket_mode = bool(os.environ.get("SLACK_APP_TOKEN", "").strip())
        problems.extend(
            f"{name} is required"
            for name in REQUIRED_FOR_SERVE
            if not os.environ.get(name, "").strip() and not (socket_mode and name == "SLACK_SIGNING_SECRET")
        )
    if args.sandbox:  # the in-process store is enough for one process on a simulated project
        problems = [p for p in problems if not p.startswith("REDIS_URL")]
    if problems or settings is None:
        print("gemma-sre serve: cannot start:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2

    import uvicorn

    from bot.log_format import setup_logging
    from bot.serve_shell import ServeShell

    setup_logging(settings.log_level)
    if args.sandbox:
        from bot.sandbox.cloud import BANNER

        print(BANNER, flush=True)
    # Bind and answer /healthz first; the real app is imported and wired behind it (bot/serve_shell.py).
    failed: list[BaseException] = []

    def stop(exc: BaseException) -> None:
        failed.append(exc)
        server.should_exit = True

    shell = ServeShell(lambda: _build_app(settings, args.sandbox), stop)
    config = uvicorn.Config(
        shell,
        host=args.host,
        port=args.port or settings.port,
        log_config=None,
        access_log=False,
        proxy_headers=True,
        forwarded_allow_ips="*",
    )
    server = uvicorn.Server(config)
    server.run()
    if not server.started:
        return 3  # as uvicorn.run: the socket could not be bound (uvicorn logged why)
    if failed:
        return 1
    return 0


def _build_app(settings: Settings, sandbox: bool) -> Any:
    """The real serving app (run in a worker thread by the shell: imports and wiring only)."""
    from bot.web import create_app
    from bot.wiring import build_deps

    if not sandbox:
        return create_app(build_deps(settings))
    from bot.sandbox.attach import attach_app, build_sandbox_deps
    from bot.sandbox.cloud import Sandbox

    sim = Sandbox(settings.sandbox_speed, image=settings.vllm_image).start()
    deps = build_sandbox_deps(sim.configure(settings), sim, settings.vllm_base_url)
    app = create_app(deps)
    attach_app(app, sim)
    return app


def _console(args: argparse.Namespace) -> int:
    from bot.console import run_console
    from bot.wiring import build_deps, close_deps

    try:
        settings = load_settings()
    except SettingsError as exc:
        print(exc, file=sys.stderr)
        return 2

    if args.sandbox or _no_credentials(settings):
        return asyncio.run(_console_sandbox(settings))

    async def main() -> int:
        deps = build_deps(settings)
        try:
            return await run_console(deps)
        finally:
            await close_deps(deps)

    return asyncio.run(main())


def _no_credentials(settings: object) -> bool:
    from bot.sandbox.attach import no_google_credentials

    return no_google_credentials(settings)  # type: ignore[arg-type]


async def _console_sandbox(settings: Settings) -> int:
    """The console on the simulated project (bot/sandbox): its banner is the first line."""
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # the simulators' gRPC shutdown is not news
    from bot.console import run_console
    from bot.sandbox.attach import attach_console, build_sandbox_deps
    from bot.sandbox.cloud import BANNER, Sandbox
    from bot.wiring import close_deps

    print(BANNER, flush=True)
    sandbox = await asyncio.to_thread(Sandbox(settings.sandbox_speed, image=settings.vllm_image).start)
    deps = build_sandbox_deps(sandbox.configure(settings, console=True), sandbox, settings.vllm_base_url)
    try:
        return await run_console(deps, on_start=lambda responder: attach_console(deps, responder))
    finally:
        # Clients first, then the simulated servers: a gRPC channel still open when its server stops is sent a
        # GOAWAY, which grpc's C core prints to the terminal whatever GRPC_VERBOSITY says (absl logging).
        await close_deps(deps)
        await sandbox.aclose()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `command` "serve" or "console", only that one: the offline tools' parsers
    import their skills (~0.3 s), which serve has no use for before it answers /healthz."""
    parser = argparse.ArgumentParser(prog="gemma-sre", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("serve", help="run the Slack app and webhooks (ASGI, uvicorn)")
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=0, help="default: $PORT or 8080")
    p.add_argument("--sandbox", action="store_true", help=_SANDBOX_HELP)
    p.set_defaults(func=_serve)
    p = sub.add_parser("console", help="use the bot's commands in a terminal, no Slack needed")
    p.add_argument("--sandbox", action="store_true", help=_SANDBOX_HELP + " (the default without credentials)")
    p.set_defaults(func=_console)
    if command in BUILT_IN:
        return parser
    for mod in pkgutil.iter_modules(bot.__path__):
        if mod.name.startswith("cli_"):
            importlib.import_module(f"bot.{mod.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        try:
            words = sys.argv[1:] if argv is None else argv
            args = build_parser(words[0] if words else None).parse_args(argv)
            code = int(args.func(args))
        finally:
            sys.stdout.flush()  # inside the try: a reader that left is seen here, not at interpreter exit
    except BrokenPipeError:
        # `gemma-sre ... | head`: the reader left. Point stdout at devnull so the interpreter's final flush
        # does not fail again, and exit quietly (https://docs.python.org/3/library/signal.html#note-on-sigpipe).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        # Ctrl-C: the servers have shut down (uvicorn re-raises the signal it handled, so that it is not lost);
        # the exit status says a SIGINT ended it, without a traceback.
        return 128 + signal.SIGINT
    return code


if __name__ == "__main__":
    sys.exit(main())
