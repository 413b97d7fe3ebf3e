"""The ASGI app: Slack events, health, readiness and Prometheus metrics (plus alert webhooks when wired)."""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from slack_bolt.adapter.starlette.async_handler import to_async_bolt_request, to_starlette_response
from slack_sdk.signature import SignatureVerifier
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.alert_pubsub import pubsub_alerts_for
from bot.alert_queue import build_alert_queue
from bot.deps import Deps
from bot.slack_app import build_bolt
from bot.slack_check import check_slack_token, quiet_bolt
from bot.socket_mode import socket_mode_for
from bot.wiring import close_deps, reconcile_writes, resume_canary_watches
from handlers.alerts.web import alert_routes
from handlers.http_body import HttpProblem, read_body
from handlers.registry import load_all
from handlers.render_slack import escape
from handlers.slack_request import parse as parse_slack
from handlers.slack_request import verify as verify_slack

SLACK_MAX_BODY = 1024 * 1024  # Slack payloads are a few KB; anything near this is not Slack
log = logging.getLogger(__name__)


async def reconcile_and_resume(deps: Deps) -> None:
    """Audit records a stopped process left pending get their outcome; then its canary watches are resumed,
    posting into their threads through the Web API (bot/slack_app.py ChannelResponder)."""
    from bot.slack_app import ChannelResponder, make_web_client
    from handlers.button_payloads import ButtonPayloads

    await reconcile_writes(deps)
    client = deps.chat if deps.chat is not None else make_web_client(deps.settings)
    payloads = ButtonPayloads(deps.redis, deps.settings.key)  # Promote / Roll back buttons carry an id
    await resume_canary_watches(deps, lambda channel: ChannelResponder(client, channel, payloads=payloads))


class MetricsMiddleware:
    """Count and time every request by route template (known paths only, to bound label cardinality)."""

    def __init__(self, app: ASGIApp, deps: Deps, known: set[str]) -> None:
        self.app, self.deps, self.known = app, deps, known

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        route = path if path in self.known else "other"
        status = 500
        t0 = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            tel = self.deps.telemetry
            tel.http_requests.labels(route, scope["method"], str(status)).inc()
            tel.http_latency.labels(route).observe(time.perf_counter() - t0)


async def _announce_unready(deps: Deps, parts: list[Any]) -> None:
    """One start-up message in the alerts channel for each configured inbound path that did not start (the
    log line and /readyz say it too): a team whose alerts or commands silently stopped would never know."""
    names = {"SocketMode": "Slack Socket Mode", "PubSubAlerts": "Pub/Sub alerts"}
    problems = [f"{names.get(type(p).__name__, type(p).__name__)}: {p.status()[1]}" for p in parts if not p.status()[0]]
    if not problems or deps.chat is None:
        return
    text = ":warning: gemma-sre started, but " + "; ".join(problems)
    try:
        await deps.chat.chat_postMessage(channel=deps.settings.slack_alerts_channel, text=escape(text)[:3000])
    except Exception as exc:  # noqa: BLE001 - the log line and /readyz already say it
        log.warning("could not post the start-up problem to %s: %s", deps.settings.slack_alerts_channel, exc)


def create_app(deps: Deps, extra_routes: list[BaseRoute] | None = None) -> Starlette:
    load_all()
    quiet_bolt()
    bolt = build_bolt(deps)
    secret = deps.settings.slack_signing_secret
    verifier = SignatureVerifier(secret.get_secret_value()) if secret and secret.get_secret_value().strip() else None

    async def slack_events(request: Request) -> Response:
        # Signature on the raw bytes first (401), then the payload's shape (400); only then does Bolt parse.
        try:
            body = await read_body(request, SLACK_MAX_BODY)
            if verifier is None:
                raise HttpProblem(401, "SLACK_SIGNING_SECRET is not set: no request can be verified")
            verify_slack(verifier, body, request.headers)
            parse_slack(body, request.headers.get("content-type", ""))
            bolt_request = to_async_bolt_request(request, body)
        except HttpProblem as p:
            return PlainTextResponse(p.message, status_code=p.status)
        except Exception as exc:  # noqa: BLE001 - a shape Bolt cannot read: the sender's fault; logged
            log.warning("signed Slack request Bolt could not read (%s: %s)", type(exc).__name__, str(exc)[:200])
            return PlainTextResponse("malformed Slack payload", status_code=400)
        try:
            response = await bolt.async_dispatch(bolt_request)
        except Exception as exc:  # noqa: BLE001 - Bolt's dispatch on a malformed payload; logged
            log.warning("signed Slack request failed in dispatch (%s: %s)", type(exc).__name__, str(exc)[:200])
            return PlainTextResponse("malformed Slack payload", status_code=400)
        if response.status >= 500:
            # Our listeners only ack and spawn: Bolt answering 500 means a payload shape it could not read.
            log.warning("Bolt could not handle a signed Slack request (answered %s); answering 400", response.status)
            return PlainTextResponse("malformed Slack payload", status_code=400)
        return to_starlette_response(response)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def readyz(request: Request) -> Response:
        body: dict[str, Any] = {"ok": True, "redis": "ok"}
        try:
            await deps.redis.ping()
        except Exception as exc:  # noqa: BLE001 - any Redis failure means not ready
            log.warning("readyz: redis unreachable: %s: %s", type(exc).__name__, str(exc)[:200])
            body |= {"ok": False, "redis": f"unreachable: {type(exc).__name__}"}
        # An inbound path that is configured but not running is not ready (never silently off).
        for name, part in (("socket_mode", socket_mode), ("pubsub", pubsub)):
            if part is not None:
                ready, said = part.status()
                body[name] = said
                body["ok"] = body["ok"] and ready
        return JSONResponse(body, status_code=200 if body["ok"] else 503)

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(deps.telemetry.registry), media_type=CONTENT_TYPE_LATEST)

    alerts = build_alert_queue(deps)  # alert webhooks enqueue; its workers run in this process
    # Inbound without a public URL, when configured: Slack over Socket Mode, alerts from a Pub/Sub subscription.
    socket_mode = socket_mode_for(deps.settings, bolt)
    pubsub = pubsub_alerts_for(deps.settings, alerts.enqueue)
    routes: list[BaseRoute] = [
        Route("/slack/events", slack_events, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        *alert_routes(deps, alerts.enqueue),
        *(extra_routes or []),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        # One pooled HTTP session for every Slack call (Web API and response URLs) instead of a new
        # connection, and in production a new TLS handshake, per call.
        session = aiohttp.ClientSession()
        if deps.chat is not None:
            deps.chat.session = session
        if deps.chat is not None and deps.settings.slack_bot_token:
            deps.spawn(check_slack_token(deps.chat))  # one clear line if the token is wrong; start regardless
        await alerts.start()
        deps.spawn(reconcile_and_resume(deps))  # writes and canary watches a stopped process left
        if socket_mode is not None:
            await socket_mode.start()
        if pubsub is not None:
            await pubsub.start()
        if deps.chat is not None and deps.settings.slack_bot_token:
            deps.spawn(_announce_unready(deps, [p for p in (socket_mode, pubsub) if p is not None]))
        # Everything loaded so far lives for the whole process: keep it out of the cyclic GC, whose full
        # collections otherwise walk ~190k startup objects (~90 ms stalls: the alert webhook's p99).
        gc.freeze()
        try:
            yield {}
        finally:
            if pubsub is not None:
                await pubsub.stop()
            if socket_mode is not None:
                await socket_mode.stop()
            await alerts.stop()
            await deps.stop_background()
            await close_deps(deps)
            await session.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.alert_queue = alerts
    app.state.socket_mode = socket_mode
    app.state.pubsub_alerts = pubsub
    known = {r.path for r in routes if isinstance(r, Route)}
    app.add_middleware(MetricsMiddleware, deps=deps, known=known)
    return app
