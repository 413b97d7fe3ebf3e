"""Alerts from a Pub/Sub subscription (ALERT_PUBSUB_SUBSCRIPTION): for teams whose bot has no public URL.

Cloud Monitoring notifies a Pub/Sub topic; this loop pulls the bot's subscription and hands every alert to
the webhook's own enqueue (bot/alert_queue.py `AlertQueue.enqueue`): same fingerprint, same dedup, same
incident thread. A message is acknowledged only after its alerts are in the Redis queue; if the queue is
down the message is left unacknowledged and Pub/Sub delivers it again after the ack deadline. A message that
can never become an alert (not JSON, not an alert) is acknowledged and logged with its id and the reason, so
it neither blocks the subscription nor crashes the loop (configure a dead-letter topic on the subscription
to keep a copy).

Why unary Pull on the asyncio GAPIC client (google.pubsub_v1.SubscriberAsyncClient) rather than the
library's streaming `SubscriberClient.subscribe()`: the streaming client calls back on its own thread pool,
whereas our enqueue is a coroutine on the app's event loop and the ack must wait for it; alert traffic is a
few messages an hour, far below where StreamingPull's throughput matters. The client honours
PUBSUB_EMULATOR_HOST (an insecure channel to the emulator or bot/sandbox/pubsub_grpc.py).

The asyncio client opens a gRPC aio channel, which belongs to the running event loop; `serve` wires the app in
a worker thread (bot/serve_shell.py), so `pubsub_alerts_for` passes a factory and the client is made in
`start()`, on the loop. If it cannot be made the puller says so in one ERROR line and `status()` (shown by
/readyz) stays "off: why" -- never silently off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

from google.api_core import exceptions as gexc
from redis.exceptions import RedisError

from bot.settings import Settings
from handlers.alerts.pubsub import MalformedAlert, to_alerts
from skills.incidents.model import Alert
from skills.logs.redact import redact
from skills.retrying import RetryPolicy, Sleep, describe_error, retry_call

log = logging.getLogger(__name__)

Enqueue = Callable[[list[Alert]], Awaitable[tuple[int, int]]]
_RETRYABLE = (gexc.ServiceUnavailable, gexc.DeadlineExceeded, gexc.InternalServerError, gexc.Aborted)


class QueueDown(Exception):
    """The alert queue refused a message: back off; Pub/Sub redelivers what was not acknowledged."""


def _describe_pull_error(exc: BaseException) -> str:
    if isinstance(exc, QueueDown):
        return "alert queue unavailable; unacknowledged messages will be redelivered"
    if isinstance(exc, _RETRYABLE):
        return f"pull failed ({type(exc).__name__})"
    return f"unexpected {describe_error(exc)}"


def make_subscriber(settings: Settings) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.pubsub_v1 import SubscriberAsyncClient

    anonymous = settings.google_anonymous_credentials or bool(os.environ.get("PUBSUB_EMULATOR_HOST"))
    return SubscriberAsyncClient(credentials=AnonymousCredentials() if anonymous else None)  # type: ignore[no-untyped-call]


class PubSubAlerts:
    def __init__(
        self,
        subscription: str,
        enqueue: Enqueue,
        client: Any,
        *,
        make_client: Callable[[], Any] | None = None,
        max_messages: int = 20,
        pull_timeout_s: float = 60.0,
        max_backoff_s: float = 60.0,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.subscription = subscription
        self.enqueue = enqueue
        self.client = client
        self.make_client = make_client
        self.problem: str | None = "not started"
        self.max_messages = max_messages
        self.pull_timeout_s = pull_timeout_s
        self.max_backoff_s = max_backoff_s
        self._sleep = sleep
        self._task: asyncio.Task[None] | None = None

    def status(self) -> tuple[bool, str]:
        """(ready, what /readyz shows): "pulling", or why not."""
        return (True, "pulling") if self.problem is None else (False, f"off: {self.problem}")

    async def start(self) -> None:
        if self.client is None and self.make_client is not None:
            try:
                self.client = self.make_client()
            except Exception as exc:  # noqa: BLE001 - e.g. no ADC: one line, and /readyz says it
                self.problem = f"cannot create the Pub/Sub client ({type(exc).__name__}: {redact(str(exc))[:300]})"
                log.error("Pub/Sub alerts are off for %s: %s", self.subscription, self.problem)
                return
        self.problem = None
        self._task = asyncio.get_running_loop().create_task(self._run(), name="alert-pubsub")
        log.info("pulling alerts from Pub/Sub subscription %s", self.subscription)

    async def stop(self) -> None:
        """Stop pulling and close the client's gRPC channel: an aio channel left open until interpreter exit can
        take the process down with it."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.problem = "stopped"
        close = getattr(getattr(self.client, "transport", None), "close", None)
        if close is not None:
            await close()

    async def _run(self) -> None:
        # Never gives up (budget None); the wait restarts after a good pull. Each failure is one WARNING line.
        policy = RetryPolicy(
            what=f"Pub/Sub alerts ({self.subscription})",
            transient=lambda _exc: True,
            initial_s=0.5,
            max_s=self.max_backoff_s,
            jitter_s=0.25,
            sleep=self._sleep,
            log=log,
            describe=_describe_pull_error,
        )
        while True:
            await retry_call(policy, self._pull_once)

    async def _pull_once(self) -> None:
        try:
            resp = await self.client.pull(
                request={"subscription": self.subscription, "max_messages": self.max_messages},
                timeout=self.pull_timeout_s,
                retry=None,  # the shared retry policy in `_run` retries, with one log line per failure
            )
        except (gexc.NotFound, gexc.PermissionDenied, gexc.InvalidArgument, gexc.Unauthenticated) as exc:
            # A configuration error: say how to fix it, and look again only at the slowest pace.
            self.problem = f"cannot pull ({type(exc).__name__})"
            log.error(
                "Pub/Sub alerts: cannot pull %s (%s): %s; check ALERT_PUBSUB_SUBSCRIPTION and that the bot's "
                "service account has roles/pubsub.subscriber on it",
                self.subscription,
                type(exc).__name__,
                exc.message,
            )
            await self._sleep(self.max_backoff_s)
            return
        self.problem = None
        if not await self._handle(list(resp.received_messages)):
            raise QueueDown

    async def _handle(self, received: list[Any]) -> bool:
        """Enqueue then ack each message; False when the queue is down (back off; messages come again).

        Poison is isolated: a message that cannot be parsed, serialized or enqueued for any reason but the
        queue being down is acknowledged alone with one log line, and the rest of the batch goes on."""
        done: list[str] = []
        ok = True
        for rm in received:
            mid = rm.message.message_id
            try:
                alerts = to_alerts(bytes(rm.message.data))
                new, dup = await self.enqueue(alerts)
            except MalformedAlert as exc:
                log.error("Pub/Sub alert message %s dropped (acknowledged, it can never be handled): %s", mid, exc)
                done.append(rm.ack_id)
                continue
            except (RedisError, OSError) as exc:
                log.warning(
                    "alert queue unavailable (%s); Pub/Sub message %s not acknowledged, it will be redelivered",
                    type(exc).__name__,
                    mid,
                )
                ok = False
                break
            except Exception as exc:  # noqa: BLE001 - poison (e.g. unserializable): ack it alone, say so once
                log.error(
                    "Pub/Sub alert message %s dropped (acknowledged, it cannot be queued): %s",
                    mid,
                    redact(describe_error(exc))[:300],
                )
                done.append(rm.ack_id)
                continue
            log.info("Pub/Sub alert message %s: %d new, %d duplicate", mid, new, dup)
            done.append(rm.ack_id)
        if done:
            await self.client.acknowledge(request={"subscription": self.subscription, "ack_ids": done})
        return ok


def pubsub_alerts_for(settings: Settings, enqueue: Enqueue) -> PubSubAlerts | None:
    """The Pub/Sub alert puller when ALERT_PUBSUB_SUBSCRIPTION is set; None otherwise."""
    path = settings.pubsub_subscription_path
    if not path:
        return None
    return PubSubAlerts(path, enqueue, None, make_client=lambda: make_subscriber(settings))
