"""An in-process gRPC stand-in of Pub/Sub's Subscriber service: Pull, Acknowledge and ModifyAckDeadline.

google-cloud-pubsub's GAPIC clients reach it the way they reach the Pub/Sub emulator: with
PUBSUB_EMULATOR_HOST=127.0.0.1:PORT they open an insecure channel to it (google/pubsub_v1/services/subscriber/
client.py). The bot uses unary Pull (bot/alert_pubsub.py says why), so StreamingPull is not served: a client
that tries it gets UNIMPLEMENTED, as from any server without the method. Messages use the library's own
proto-plus types (google.pubsub_v1.types).

Semantics kept from the real service (https://cloud.google.com/pubsub/docs/reference/rpc/google.pubsub.v1):
- names are `projects/P/subscriptions/S`; a malformed one is INVALID_ARGUMENT, an unknown one NOT_FOUND;
- Pull needs max_messages > 0 and returns at most that many; it waits a little for messages and may return
  none; each delivery gets a fresh ack_id and a delivery deadline (the subscription's ack deadline);
- an unacknowledged message is delivered again once its deadline passes; ModifyAckDeadline with 0 makes it
  available at once; its deadline must be 0..600 s;
- Acknowledge needs at least one ack_id; ack ids that are unknown or expired are ignored.
The clock is injectable (`now`), so tests move time instead of sleeping.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import grpc
from google.protobuf import empty_pb2, timestamp_pb2
from google.pubsub_v1 import types

from bot.sandbox.grpc_server import serve_grpc

_NAME = re.compile(r"^projects/[^/]+/subscriptions/[^/]+$")


@dataclass
class _Message:
    message_id: str
    data: bytes
    attributes: dict[str, str]
    published: float
    attempts: int = 0
    acked: bool = False


@dataclass
class _Subscription:
    ack_deadline_s: int = 10
    queue: list[_Message] = field(default_factory=list)  # waiting for (re)delivery
    outstanding: dict[str, tuple[_Message, float]] = field(default_factory=dict)  # ack_id -> (message, deadline)


class PubSubStandIn:
    def __init__(self, now: Callable[[], float] = time.monotonic, pull_wait_s: float = 0.5) -> None:
        self.now = now
        self.pull_wait_s = pull_wait_s
        self.subscriptions: dict[str, _Subscription] = {}
        self.acked: list[str] = []  # message ids, in ack order
        self.calls: list[str] = []  # method names, in call order
        self._ids = itertools.count(1)
        self._cond = threading.Condition()

    # --- test helpers ---------------------------------------------------------------------------------
    def create_subscription(self, name: str, ack_deadline_s: int = 10) -> None:
        self.subscriptions[name] = _Subscription(ack_deadline_s)

    def publish(self, subscription: str, data: bytes, attributes: dict[str, str] | None = None) -> str:
        """What Cloud Monitoring's publish to the topic amounts to for this subscription."""
        mid = str(next(self._ids))
        with self._cond:
            self.subscriptions[subscription].queue.append(_Message(mid, data, attributes or {}, time.time()))
            self._cond.notify_all()
        return mid

    def unacked(self, subscription: str) -> int:
        with self._cond:
            sub = self.subscriptions[subscription]
            return len(sub.queue) + len(sub.outstanding)

    def expire(self) -> None:
        """Wake waiting pulls after the test moved its clock (redeliveries become due)."""
        with self._cond:
            self._cond.notify_all()

    # --- wire ---------------------------------------------------------------------------------------------
    def _sub(self, name: str, context: grpc.ServicerContext) -> _Subscription:
        if not _NAME.match(name):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"Invalid [subscriptions] name: ({name})")
        sub = self.subscriptions.get(name)
        if sub is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"Subscription does not exist (resource={name.split('/')[-1]})")
        assert sub is not None
        return sub

    def _due(self, sub: _Subscription) -> None:
        """Move messages whose delivery deadline passed back to the queue (redelivery)."""
        now = self.now()
        for ack_id, (msg, deadline) in list(sub.outstanding.items()):
            if deadline <= now:
                del sub.outstanding[ack_id]
                sub.queue.append(msg)

    def _pull(self, request: types.PullRequest, context: grpc.ServicerContext) -> types.PullResponse:
        self.calls.append("Pull")
        sub = self._sub(request.subscription, context)
        if request.max_messages <= 0:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "max_messages must be positive")
        deadline = time.monotonic() + self.pull_wait_s
        with self._cond:
            while True:
                self._due(sub)
                if sub.queue or time.monotonic() >= deadline or not context.is_active():
                    break
                self._cond.wait(timeout=min(0.05, max(0.0, deadline - time.monotonic())))
            if not context.is_active():  # the caller gave up: hand nothing to a dead call
                return types.PullResponse()
            batch, sub.queue = sub.queue[: request.max_messages], sub.queue[request.max_messages :]
            out = []
            for msg in batch:
                msg.attempts += 1
                ack_id = f"ack-{msg.message_id}-{msg.attempts}"
                sub.outstanding[ack_id] = (msg, self.now() + sub.ack_deadline_s)
                ts = timestamp_pb2.Timestamp()
                ts.FromSeconds(int(msg.published))
                out.append(
                    types.ReceivedMessage(
                        ack_id=ack_id,
                        message=types.PubsubMessage(
                            data=msg.data, attributes=msg.attributes, message_id=msg.message_id, publish_time=ts
                        ),
                        delivery_attempt=msg.attempts,
                    )
                )
        return types.PullResponse(received_messages=out)

    def _ack(self, request: types.AcknowledgeRequest, context: grpc.ServicerContext) -> empty_pb2.Empty:
        self.calls.append("Acknowledge")
        sub = self._sub(request.subscription, context)
        if not request.ack_ids:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "No ack ids specified.")
        with self._cond:
            for ack_id in request.ack_ids:
                found = sub.outstanding.pop(ack_id, None)
                if found is not None and not found[0].acked:
                    found[0].acked = True
                    self.acked.append(found[0].message_id)
        return empty_pb2.Empty()

    def _modack(self, request: types.ModifyAckDeadlineRequest, context: grpc.ServicerContext) -> empty_pb2.Empty:
        self.calls.append("ModifyAckDeadline")
        sub = self._sub(request.subscription, context)
        if not 0 <= request.ack_deadline_seconds <= 600:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "ack_deadline_seconds must be between 0 and 600")
        if not request.ack_ids:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "No ack ids specified.")
        with self._cond:
            for ack_id in request.ack_ids:
                if ack_id in sub.outstanding:
                    msg, _ = sub.outstanding[ack_id]
                    sub.outstanding[ack_id] = (msg, self.now() + request.ack_deadline_seconds)
            self._cond.notify_all()
        return empty_pb2.Empty()


@contextmanager
def serve_pubsub(standin: PubSubStandIn) -> Iterator[str]:
    """Yield '127.0.0.1:PORT' (a PUBSUB_EMULATOR_HOST value) while the Subscriber service answers."""
    empty = empty_pb2.Empty.SerializeToString
    methods = {
        "Pull": grpc.unary_unary_rpc_method_handler(
            standin._pull,
            request_deserializer=types.PullRequest.deserialize,
            response_serializer=types.PullResponse.serialize,
        ),
        "Acknowledge": grpc.unary_unary_rpc_method_handler(
            standin._ack, request_deserializer=types.AcknowledgeRequest.deserialize, response_serializer=empty
        ),
        "ModifyAckDeadline": grpc.unary_unary_rpc_method_handler(
            standin._modack,
            request_deserializer=types.ModifyAckDeadlineRequest.deserialize,
            response_serializer=empty,
        ),
    }
    with serve_grpc("google.pubsub.v1.Subscriber", methods, workers=8) as target:
        yield target
