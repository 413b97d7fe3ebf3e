"""The alert webhooks: authenticate, bound the body, validate, fingerprint, enqueue, answer 202.

Nothing slow happens here (no Slack, no model): the sender must never time out. Everything after the 202 is
the queue workers' job. If the queue cannot take the alert (Redis down) the answer is 503, so the sender
retries instead of the alert being dropped.
"""

from __future__ import annotations

import base64
import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from handlers.alerts import alertmanager, azure_monitor, gcp
from handlers.alerts.decode import Undecodable, load_alert_json
from handlers.http_body import HttpProblem, read_body
from skills.incidents.model import Alert, is_known_service

if TYPE_CHECKING:
    from handlers.deps import HandlerDeps

log = logging.getLogger(__name__)

# (alerts) -> (new, duplicates). bot/alert_queue.py `AlertQueue.enqueue` is the real one.
Enqueue = Callable[[list[Alert]], Awaitable[tuple[int, int]]]


def known_services(deps: HandlerDeps) -> frozenset[str]:
    """Services this bot manages (diagnosis, actions): the default target's and those the settings put on another
    target (ACA, TPU); alerts for others are posted with a note."""
    return frozenset({deps.settings.vllm_service_name, *deps.targets.services})


def _eq(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def check_auth(request: Request, deps: HandlerDeps, *, query_token: bool, bearer: bool) -> None:
    """Basic (user + password) or the token (GCP: `auth_token` query; Alertmanager: Bearer), constant time."""
    s = deps.settings
    password = s.alert_webhook_password.get_secret_value() if s.alert_webhook_password else ""
    token = s.alert_webhook_token.get_secret_value() if s.alert_webhook_token else ""
    if not password and not token:
        log.warning("alert webhook called but neither ALERT_WEBHOOK_PASSWORD nor ALERT_WEBHOOK_TOKEN is set")
        raise HttpProblem(401, "alert webhooks are not configured on this bot (no credentials set)")
    header = request.headers.get("authorization", "")
    scheme, _, cred = header.partition(" ")
    scheme = scheme.lower()
    presented = False
    if scheme == "basic":
        presented = True
        try:
            user, sep, given = base64.b64decode(cred.strip(), validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            raise HttpProblem(401, "malformed Basic credentials", _challenge()) from None
        # Both comparisons always run: timing says nothing about which part was wrong.
        if password and (_eq(user, s.alert_webhook_user) & _eq(given, password)) and sep:
            return
    elif scheme == "bearer" and bearer:
        presented = True
        if token and _eq(cred.strip(), token):
            return
    if query_token and "auth_token" in request.query_params:
        presented = True
        if token and _eq(request.query_params["auth_token"], token):
            return
    if not presented:
        raise HttpProblem(401, "authentication required", _challenge())
    raise HttpProblem(401, "invalid credentials", _challenge())


def _challenge() -> dict[str, str]:
    return {"WWW-Authenticate": 'Basic realm="gemma-sre alerts"'}


def _problem_from(exc: ValidationError) -> HttpProblem:
    errs = exc.errors(include_url=False)
    if errs and errs[0]["type"] == "json_invalid":
        return HttpProblem(400, f"malformed JSON: {errs[0].get('ctx', {}).get('error', errs[0]['msg'])}")
    parts = []
    for e in errs[:5]:
        loc = ".".join(str(p) for p in e["loc"]) or "body"
        parts.append(f"{loc}: {e['msg']}")
    more = f" (+{len(errs) - 5} more)" if len(errs) > 5 else ""
    return HttpProblem(400, "invalid payload: " + "; ".join(parts) + more)


def _load(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, strings cleaned (handlers/alerts/decode.py), or a 400 saying why not."""
    if not body.strip():
        raise HttpProblem(400, "empty body: expected a JSON alert notification")
    try:
        doc = load_alert_json(body)
    except Undecodable as exc:
        msg = str(exc)
        raise HttpProblem(400, msg if msg.startswith("malformed JSON") else f"unreadable body: {msg}") from None
    if not isinstance(doc, dict):
        raise HttpProblem(400, "invalid payload: body: Input should be an object")
    return doc


def _parse(model: type[BaseModel], body: bytes) -> Any:
    try:
        return model.model_validate(_load(body))
    except ValidationError as exc:
        raise _problem_from(exc) from None


def _parse_alertmanager(body: bytes) -> tuple[alertmanager.Webhook, list[str]]:
    try:
        webhook, rejected = alertmanager.validate_isolating(_load(body))
    except ValidationError as exc:
        raise _problem_from(exc) from None
    for reason in rejected:  # one line per alert left out; the rest of the group goes on
        log.warning("Alertmanager webhook: alert left out: %s", reason)
    return webhook, rejected


async def _accept(
    alerts: list[Alert], enqueue: Enqueue, known: frozenset[str], rejected: list[str] | None = None
) -> JSONResponse:
    try:
        new, dup = await enqueue(alerts)
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        log.error("alert queue unavailable, answering 503 so the sender retries: %s", type(exc).__name__)
        return JSONResponse({"error": "alert queue unavailable, retry later"}, 503, headers={"Retry-After": "5"})
    except RedisError as exc:  # e.g. LOADING after a restart, READONLY replica
        log.error("alert queue refused the alert, answering 503: %s", exc)
        return JSONResponse({"error": "alert queue unavailable, retry later"}, 503, headers={"Retry-After": "5"})
    body: dict[str, Any] = {"status": "accepted", "alerts": len(alerts), "new": new, "duplicates": dup}
    if rejected:
        body["rejected"] = rejected
    unknown = sorted({a.service or "(none)" for a in alerts if not is_known_service(a.service, known)})
    if unknown:
        body["note"] = f"not a service this bot manages: {', '.join(unknown)}; posted to the alerts channel"
    return JSONResponse(body, 202)


def alert_routes(deps: HandlerDeps, enqueue: Enqueue) -> list[Route]:
    """`POST /alerts/gcp`, `POST /alerts/alertmanager` and `POST /alerts/azure` (Azure Monitor's common alert schema,
    handlers/alerts/azure_monitor.py; authenticated as /alerts/gcp: Basic, or the `auth_token` query parameter an
    action group's webhook URL carries) for the app in bot/web.py."""
    limit = deps.settings.alert_max_body_bytes
    known = known_services(deps)

    async def gcp_hook(request: Request) -> JSONResponse:
        try:
            check_auth(request, deps, query_token=True, bearer=False)
            body = await read_body(request, limit)
            alerts = gcp.to_alerts(_parse(gcp.Notification, body))
        except HttpProblem as p:
            return JSONResponse({"error": p.message}, p.status, headers=p.headers)
        return await _accept(alerts, enqueue, known)

    async def alertmanager_hook(request: Request) -> JSONResponse:
        try:
            check_auth(request, deps, query_token=False, bearer=True)
            body = await read_body(request, limit)
            webhook, rejected = _parse_alertmanager(body)
            alerts = alertmanager.to_alerts(webhook)
        except HttpProblem as p:
            return JSONResponse({"error": p.message}, p.status, headers=p.headers)
        return await _accept(alerts, enqueue, known, rejected)

    async def azure_hook(request: Request) -> JSONResponse:
        try:
            check_auth(request, deps, query_token=True, bearer=False)
            body = await read_body(request, limit)
            alerts = azure_monitor.to_alerts(_parse(azure_monitor.Notification, body))
        except HttpProblem as p:
            return JSONResponse({"error": p.message}, p.status, headers=p.headers)
        return await _accept(alerts, enqueue, known)

    return [
        Route("/alerts/gcp", gcp_hook, methods=["POST"]),
        Route("/alerts/alertmanager", alertmanager_hook, methods=["POST"]),
        Route("/alerts/azure", azure_hook, methods=["POST"]),
    ]
