"""The `gemma-sre` command: serve (production ASGI app), console (try it in a terminal), and the offline tools
that modules named bot/cli_<name>.py register (fit, diagnose, ...)."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import pkgutil
import sys

import bot
from bot.settings import SettingsError, load_settings

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
    if problems or settings is None:
        print("gemma-sre serve: cannot start:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2

    import uvicorn

    from bot.log_format import setup_logging
    from bot.web import create_app
    from bot.wiring import build_deps

    setup_logging(settings.log_level)
    app = create_app(build_deps(settings))
    uvicorn.run(
        app,
        host=args.host,
        port=args.port or settings.port,
        log_config=None,
        access_log=False,
        proxy_headers=True,
        forwarded_allow_ips="*",
    )
    return 0


def _console(args: argparse.Namespace) -> int:
    from bot.console import run_console
    from bot.wiring import build_deps, close_deps

    try:
        settings = load_settings()
    except SettingsError as exc:
        print(exc, file=sys.stderr)
        return 2

    async def main() -> int:
        deps = build_deps(settings)
        try:
            return await run_console(deps)
        finally:
            await close_deps(deps)

    return asyncio.run(main())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gemma-sre", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("serve", help="run the Slack app and webhooks (ASGI, uvicorn)")
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=0, help="default: $PORT or 8080")
    p.set_defaults(func=_serve)
    p = sub.add_parser("console", help="use the bot's commands in a terminal, no Slack needed")
    p.set_defaults(func=_console)
    for mod in pkgutil.iter_modules(bot.__path__):
        if mod.name.startswith("cli_"):
            importlib.import_module(f"bot.{mod.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        try:
            args = build_parser().parse_args(argv)
            code = int(args.func(args))
        finally:
            sys.stdout.flush()  # inside the try: a reader that left is seen here, not at interpreter exit
    except BrokenPipeError:
        # `gemma-sre ... | head`: the reader left. Point stdout at devnull so the interpreter's final flush
        # does not fail again, and exit quietly (https://docs.python.org/3/library/signal.html#note-on-sigpipe).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
