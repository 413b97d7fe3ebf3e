"""Poison isolation in every alert queue: a message that cannot be parsed, serialized or enqueued is acknowledged
(or dead-lettered) alone with one log line, and the good messages around it go on -- in a Pub/Sub pull batch,
in one webhook body, and in the alert stream's workers. Property tests push hostile values (deep nesting, lone
surrogates, NUL, invalid UTF-8, huge strings) through each path: the answer is an alert or a clear refusal,
never an exception."""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterator

import pytest
import redis.asyncio as redis
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from bot.alert_pubsub import PubSubAlerts, make_subscriber
from bot.alert_queue import AlertQueue
from bot.sandbox.pubsub_grpc import PubSubStandIn, serve_pubsub
from bot.settings import Settings
from handlers.alerts.pubsub import MalformedAlert, to_alerts
from handlers.incident_render import header_reply
from skills.incidents.model import Alert, Incident, new_incident, utcnow
from tests.alerts_fixtures import am_alert, basic, bearer, gcp_alert, make_deps, queued, tuned
from tests.eventually import eventually

SUB = "projects/test-proj/subscriptions/gemma-alerts"
DEEP = b"[" * 100_000 + b"]" * 100_000
_ids = itertools.count(1)


def gcp_bytes(incident_id: str, summary_json: bytes | None = None) -> bytes:
    """A Cloud Monitoring notification; `summary_json` is spliced in raw (so it may be any bytes)."""
    body = json.dumps(gcp_alert(incident_id, summary="@@SUMMARY@@")).encode()
    return body.replace(b'"@@SUMMARY@@"', summary_json if summary_json is not None else b'"fine"')


@pytest.fixture
def pubsub(monkeypatch: pytest.MonkeyPatch) -> Iterator[PubSubStandIn]:
    standin = PubSubStandIn(pull_wait_s=0.2)
    standin.create_subscription(SUB, ack_deadline_s=10)
    with serve_pubsub(standin) as host:
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", host)
        yield standin


@pytest.mark.parametrize(
    "poison",
    [
        DEEP,
        gcp_bytes("inc-deep", DEEP),
        gcp_bytes("inc-surrogate", b'"disk \\udfff full"'),
        gcp_bytes("inc-nul", b'"a\\u0000b"'),
        gcp_bytes("inc-utf8", b'"bad \xff\xfe utf-8"'),
    ],
    ids=["deep-array", "deep-in-summary", "lone-surrogate", "nul", "invalid-utf8"],
)
async def test_one_poison_message_does_not_lose_the_good_alerts_of_its_batch(
    settings: Settings,
    queue: AlertQueue,
    pubsub: PubSubStandIn,
    poison: bytes,
    caplog: pytest.LogCaptureFixture,
) -> None:
    n = next(_ids)
    before = pubsub.publish(SUB, gcp_bytes(f"inc-good-a-{n}"))
    bad = pubsub.publish(SUB, poison)
    after = pubsub.publish(SUB, gcp_bytes(f"inc-good-b-{n}"))
    puller = PubSubAlerts(SUB, queue.enqueue, make_subscriber(settings))
    with caplog.at_level(logging.INFO, logger="bot.alert_pubsub"):
        await puller.start()
        try:
            assert await eventually(lambda: {before, bad, after} <= set(pubsub.acked))
        finally:
            await puller.stop()
    fingerprints = {a.fingerprint for a in await queued(queue)}
    assert {f"inc-good-a-{n}", f"inc-good-b-{n}"} <= fingerprints
    assert pubsub.unacked(SUB) == 0
    about = [r for r in caplog.records if f"message {bad}" in r.getMessage()]
    assert len(about) == 1 and about[0].exc_info is None


async def test_text_with_a_lone_surrogate_or_nul_still_becomes_an_alert(queue: AlertQueue) -> None:
    """The notification is fine apart from one character: the alert goes through, the character replaced."""
    for i, raw in enumerate((b'"disk \\udfff full"', b'"a\\u0000b"', b'"\\ud800\\ud800x"')):
        [alert] = to_alerts(gcp_bytes(f"inc-text-{i}", raw))
        alert.model_dump_json()  # serializable
        assert "\x00" not in alert.summary
    assert (await queue.enqueue(to_alerts(gcp_bytes("inc-text-q", b'"disk \\udfff full"')))) == (1, 0)
    [queued_alert] = await queued(queue)
    assert queued_alert.summary == "disk \ufffd full"


async def test_webhook_takes_an_alert_whose_summary_holds_a_lone_surrogate(hook) -> None:
    client, queue = hook
    body = gcp_bytes("inc-wh-surrogate", b'"disk \\udfff full"')
    resp = await client.post("/alerts/gcp", content=body, headers=basic() | {"Content-Type": "application/json"})
    assert resp.status_code == 202, resp.text
    [alert] = await queued(queue)
    assert alert.summary == "disk \ufffd full"


async def test_webhook_refuses_deep_nesting_with_a_clear_400(hook) -> None:
    client, queue = hook
    for body in (DEEP, gcp_bytes("inc-wh-deep", DEEP)):
        resp = await client.post("/alerts/gcp", content=body, headers=basic() | {"Content-Type": "application/json"})
        assert resp.status_code == 400 and "nested" in resp.json()["error"], resp.text
    assert await queued(queue) == []


async def test_alertmanager_body_with_one_bad_alert_keeps_the_good_ones(hook, caplog) -> None:
    client, queue = hook
    body = am_alert("fp-good-1")
    good2 = json.loads(json.dumps(body["alerts"][0])) | {"fingerprint": "fp-good-2"}
    bad = json.loads(json.dumps(body["alerts"][0])) | {"status": "exploded"}
    body["alerts"] = [body["alerts"][0], bad, good2]
    with caplog.at_level(logging.WARNING):
        resp = await client.post("/alerts/alertmanager", json=body, headers=bearer())
    assert resp.status_code == 202, resp.text
    assert resp.json()["new"] == 2 and "alerts.1" in resp.json()["rejected"][0]
    assert {a.fingerprint for a in await queued(queue)} == {"fp-good-1", "fp-good-2"}
    assert len([r for r in caplog.records if "alerts.1" in r.getMessage()]) == 1


async def test_a_poison_stream_entry_is_dead_lettered_alone(settings: Settings, redis_client: redis.Redis) -> None:
    """An entry in the stream that cannot be read (not an Alert, invalid JSON, deep nesting) goes to the
    dead-letter stream by itself; the good entry beside it is handled."""
    deps = make_deps(tuned(settings))
    handled: list[str] = []

    async def handle(entry_id: str, alert: Alert) -> None:
        handled.append(alert.fingerprint)

    q = AlertQueue(deps, handle, concurrency=1)
    await q.ensure_group()
    await deps.redis.xadd(q.stream, {"alert": "[" * 5000 + "]" * 5000})
    await deps.redis.xadd(q.stream, {"alert": '{"source": "gcp", "fingerprint": "x\\udfff"'})
    await deps.redis.xadd(q.stream, {"nothing": "here"})
    await q.enqueue(to_alerts(gcp_bytes("inc-stream-good")))
    await q.start()
    try:
        assert await eventually(lambda: handled == ["inc-stream-good"])
        assert await eventually(lambda: q.backlog())
        assert await eventually(lambda: _dead_count(q, 3))
    finally:
        await q.stop()
        await deps.redis.aclose()


async def _dead_count(q: AlertQueue, n: int) -> bool:
    return int(await q.deps.redis.xlen(q.dead_stream)) == n


# --- properties --------------------------------------------------------------------------------------------

_hostile_chars = st.one_of(
    st.characters(),  # any code point Hypothesis likes (no surrogates by default)
    st.characters(categories=["Cs"]),  # lone surrogates
    st.sampled_from(["\x00", "\u202e", "\u2066", "\ufeff", "\n", "`", "<", "&", "*"]),
)
hostile_text = st.one_of(
    st.text(_hostile_chars, max_size=200),
    st.integers(min_value=10_000, max_value=200_000).map(lambda n: "x" * n),  # huge
)


def _json_string(s: str) -> bytes:
    return json.dumps(s).encode()  # ASCII-escaped: a lone surrogate becomes \\udXXX, as a sender would write it


hostile_raw = st.one_of(
    hostile_text.map(_json_string),
    st.binary(max_size=64).map(lambda b: b'"' + b.replace(b'"', b"").replace(b"\\", b"") + b'"'),  # invalid UTF-8
    st.integers(min_value=1, max_value=20_000).map(lambda d: b"[" * d + b"]" * d),  # deep nesting
    st.sampled_from([b"null", b"{}", b"1e999", b"-0", b'"\\u0000"']),
)

PROPS = hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@PROPS
@given(raw=hostile_raw)
def test_property_pubsub_data_is_alerts_or_a_clear_refusal(raw: bytes) -> None:
    try:
        alerts = to_alerts(gcp_bytes("inc-prop", raw))
    except MalformedAlert as exc:
        assert str(exc)
        return
    for alert in alerts:
        Alert.model_validate_json(alert.model_dump_json())  # what the queue stores reads back
        header_reply(_incident(alert), "vllm-gemma4")  # and renders


def _incident(alert: Alert) -> Incident:
    inc = new_incident("1-0", alert, "C1", True, utcnow())
    inc.apply("1-0", alert, utcnow())
    return inc


@PROPS
@given(raw=hostile_raw, where=st.sampled_from(["gcp", "am-annotation", "am-label"]))
async def test_property_webhooks_answer_202_or_4xx_and_what_is_queued_reads_back(hook, raw: bytes, where: str) -> None:
    client, queue = hook
    n = next(_ids)
    if where == "gcp":
        path, body, headers = "/alerts/gcp", gcp_bytes(f"inc-prop-{n}", raw), basic()
    else:
        am = am_alert(f"fp-prop-{n}")
        am["alerts"][0]["annotations" if where == "am-annotation" else "labels"]["x"] = "@@X@@"
        path, body, headers = "/alerts/alertmanager", json.dumps(am).encode().replace(b'"@@X@@"', raw), bearer()
    resp = await client.post(path, content=body, headers=headers | {"Content-Type": "application/json"})
    assert resp.status_code in (202, 400, 413), (resp.status_code, resp.text[:300])
    if resp.status_code != 202:
        assert resp.json()["error"]
    await queued(queue)  # every queued entry parses back


def test_deep_nesting_is_refused_before_the_parser_recurses() -> None:
    """A body nested past the interpreter's recursion limit is refused by counting its brackets, never by letting
    json.loads recurse into a RecursionError (near the limit, a finalizer running meanwhile has no stack left: an
    unraisable RecursionError failed a CI run); brackets inside strings do not count."""
    from handlers.alerts.decode import MAX_DEPTH, Undecodable, load_alert_json

    with pytest.raises(Undecodable, match=f"more than {MAX_DEPTH} levels"):
        load_alert_json(b"[" * 20_000 + b"]" * 20_000)
    inside = b'{"summary": "' + b"[{" * 5_000 + b'\\"", "labels": {"a": "b"}}'
    assert load_alert_json(inside)["labels"] == {"a": "b"}
