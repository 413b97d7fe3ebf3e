"""Alert storms against a rate-limited Slack stand-in, with two bot instances sharing Redis.

Time is a ScaledClock shared by the stand-in (its rate-limit buckets) and the bots (pacing, Retry-After,
debounce, coalescing): nothing sleeps for time to pass, and a coalescing interval ends with `advance`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from bot.alert_queue import AlertQueue, build_alert_queue
from bot.deps import Deps
from bot.sandbox.server import serve
from bot.sandbox.slack_limits import RateLimits
from bot.settings import Settings
from bot.slack_app import ClockedRateLimitRetryHandler
from bot.web import create_app
from handlers.reply import Reply
from skills.clock import ScaledClock
from skills.incidents.model import Alert, Incident, severity_rank, utcnow
from skills.incidents.outbox import IncidentOutbox
from skills.incidents.store import IncidentStore
from skills.leases import Lease
from tests.alerts_fixtures import PostsSlack, bearer, eventually, make_deps, tuned

SEVERITIES = ("critical", "error", "warning", "info")


@pytest.fixture
def clock() -> ScaledClock:
    return ScaledClock(speed=20)


@pytest.fixture
def slack(clock: ScaledClock) -> Iterator[PostsSlack]:
    """The rate-limited stand-in on the test's clock (overrides conftest's, which settings point at)."""
    standin = PostsSlack(clock=clock)
    with serve(standin.app) as url:
        standin.base_url = url
        yield standin


@dataclass
class Instance:
    deps: Deps
    queue: AlertQueue
    client: httpx.AsyncClient

    async def post(self, body: dict[str, Any]) -> None:
        r = await self.client.post("/alerts/alertmanager", json=body, headers=bearer())
        assert r.status_code == 202, r.text


async def quiet(inc: Incident, alert: Alert) -> AsyncIterator[Reply]:
    return
    yield


async def start(settings: Settings, clock: ScaledClock, investigate: Any = quiet, run: bool = True) -> Instance:
    deps = make_deps(settings, clock)
    queue = build_alert_queue(deps, investigate, concurrency=2, clock=clock)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(deps)), base_url="http://bot.test")
    if run:
        await queue.start()
    return Instance(deps, queue, client)


async def close(*instances: Instance) -> None:
    for i in instances:
        await i.queue.stop()
        await i.client.aclose()
        await i.deps.redis.aclose()


async def drained(*instances: Instance, timeout: float = 30.0) -> bool:  # noqa: ASYNC109
    async def empty() -> bool:
        for i in instances:
            b = await i.queue.backlog()
            if b["queued"] or b["pending"] or (i.queue.publisher and await i.queue.publisher.pending()):
                return False
        return True

    return bool(await eventually(empty, timeout=timeout))  # raises when they never drain


async def _jobs_handled(i: Instance) -> bool:
    b = await i.queue.backlog()
    return b["queued"] == 0 and b["pending"] == 0


def am(
    service: str,
    alertname: str,
    severity: str = "warning",
    status: str = "firing",
    truncated: int = 0,
    n: int = 1,
    start: int = 0,
) -> dict[str, Any]:
    """One notification with `n` alerts of one condition (alertname) on `n` instances (fingerprints from `start`)."""
    alerts = [
        {
            "status": status,
            "labels": {
                "alertname": alertname,
                "service": service,
                "severity": severity,
                "instance": f"10.0.0.{j}:8000",
            },
            "annotations": {"summary": f"{alertname} on {service}"},
            "startsAt": "2026-11-20T14:05:00Z",
            "endsAt": "2026-11-20T14:35:00Z" if status == "resolved" else "0001-01-01T00:00:00Z",
            "fingerprint": f"{service}-{alertname}-{j}",
        }
        for j in range(start, start + n)
    ]
    return {"version": "4", "status": status, "receiver": "gemma-sre", "truncatedAlerts": truncated, "alerts": alerts}


def text_of(msg: dict[str, Any]) -> str:
    return msg.get("text", "") + json.dumps(msg.get("blocks", []))


def headers(slack: PostsSlack) -> list[dict[str, Any]]:
    return [m for m in slack.accepted if m["_method"] == "chat.postMessage" and not m.get("thread_ts")]


def incident_headers(slack: PostsSlack) -> list[dict[str, Any]]:
    return [m for m in headers(slack) if "Alert storm" not in m.get("text", "")]


def replies(slack: PostsSlack, ts: str) -> list[dict[str, Any]]:
    return [m for m in slack.accepted if m["_method"] == "chat.postMessage" and m.get("thread_ts") == ts]


def service_of(msg: dict[str, Any]) -> str:
    return msg["text"].rsplit(" on ", 1)[1]


async def record_then_publish(bot: Any) -> None:
    """Record every queued alert's incident first, then start the publisher (a storm that outruns Slack)."""
    publisher, bot.queue.publisher = bot.queue.publisher, None
    await bot.queue.start()
    assert await drained(bot)
    assert publisher is not None
    bot.queue.publisher = publisher
    await publisher.start()


async def test_stand_in_answers_429_exactly_like_slack(clock: ScaledClock) -> None:
    standin = PostsSlack(clock=clock, limits=RateLimits(post_per_channel_burst=2, update_burst=1))
    with serve(standin.app) as url:
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": "Bearer xoxb-t"}) as c:
            clock.speed = 1e-9  # hold time still for this test: the buckets must not refill between calls
            ok = [(await c.post("/api/chat.postMessage", json={"channel": "C1", "text": "x"})) for _ in range(2)]
            limited = await c.post("/api/chat.postMessage", json={"channel": "C1", "text": "x"})
            other_channel = await c.post("/api/chat.postMessage", json={"channel": "C2", "text": "x"})
            assert [r.json()["ok"] for r in ok] == [True, True] and other_channel.json()["ok"] is True
            assert limited.status_code == 429
            assert limited.json() == {"ok": False, "error": "ratelimited"}
            assert int(limited.headers["Retry-After"]) >= 1
            ts = ok[0].json()["ts"]
            assert (await c.post("/api/chat.update", json={"channel": "C1", "ts": ts, "text": "y"})).json()["ok"]
            assert (await c.post("/api/chat.update", json={"channel": "C1", "ts": ts, "text": "y"})).status_code == 429
            clock.advance(2.0)  # a token per second per channel: after Retry-After it goes through
            assert (await c.post("/api/chat.postMessage", json={"channel": "C1", "text": "x"})).json()["ok"]
            too_many = [{"type": "section", "text": {"type": "mrkdwn", "text": "b"}}] * 51
            r = await c.post("/api/chat.postMessage", json={"channel": "C3", "text": "x", "blocks": too_many})
            assert r.json() == {"ok": False, "error": "invalid_blocks"}
    assert standin.limiter.limited == 2


async def test_storm_across_two_instances_summary_first_one_thread_each_most_severe_first(
    settings: Settings, redis_client: Any, slack: PostsSlack, clock: ScaledClock
) -> None:
    s = tuned(settings, alert_storm_threshold_per_min=10, alert_storm_edit_interval_s=2)
    a = await start(s, clock, run=False)
    b = await start(s, clock, run=False)
    services = [f"svc-{i:02d}" for i in range(40)]
    try:
        for i, svc in enumerate(services):  # 40 new incidents, 3 alerts each, split across both instances
            await (a if i % 2 else b).post(am(svc, "Storm", SEVERITIES[i % 4], n=3))
        # Record everything first (a storm arrives faster than one Slack post), then let the publishers go.
        publishers = [a.queue.publisher, b.queue.publisher]
        a.queue.publisher = b.queue.publisher = None
        await a.queue.start()
        await b.queue.start()
        assert await drained(a, b)
        for inst, pub in zip((a, b), publishers, strict=True):
            assert pub is not None
            inst.queue.publisher = pub
            await pub.start()
        assert await eventually(lambda: len(incident_headers(slack)) == 40, timeout=60)
        assert await drained(a, b)
    finally:
        await close(a, b)
    posted = incident_headers(slack)
    assert sorted(service_of(h) for h in posted) == services  # one thread per incident, none twice
    [summary] = [h for h in headers(slack) if "Alert storm" in h["text"]]
    assert headers(slack).index(summary) == 0  # the summary first: every incident visible at once
    edits = [u for u in slack.accepted if u["_method"] == "chat.update" and u["ts"] == summary["ts"]]
    final = text_of(edits[-1] if edits else summary)
    assert all(f"`{svc}`" in final for svc in services) and "40 incidents" in final
    assert len(summary["blocks"]) <= 50 and all(len(json.dumps(b)) < 3200 for b in summary["blocks"])
    after = [severity_rank(h["blocks"][1]["fields"][2]["text"].split()[-1]) for h in posted]
    assert after == sorted(after)  # threads open most severe first
    for h in posted:  # alerts grouped before the header are in it, not repeated as lines
        assert replies(slack, h["ts"]) == [] and "3 grouped (3 firing)" in text_of(h)


@pytest.mark.parametrize("new_incidents", [4, 5])
async def test_the_storm_summary_starts_at_the_threshold_not_one_later(
    settings: Settings,
    redis_client: Any,
    slack: PostsSlack,
    clock: ScaledClock,
    new_incidents: int,
    new_york: None,
) -> None:
    """ALERT_STORM_THRESHOLD_PER_MIN=5: five new incidents within the minute are a storm, four are not. The
    summary counts from one minute before it started, shown in UTC (the local zone here is New York's)."""
    clock.speed = 1.0  # the storm window is a minute of this clock: keep every incident inside it
    began = datetime.now(UTC)
    s = tuned(settings, alert_storm_threshold_per_min=5, slack_post_per_s=20, slack_post_burst=20)
    bot = await start(s, clock, run=False)
    services = [f"thr-svc-{i}" for i in range(new_incidents)]
    try:
        for svc in services:
            await bot.post(am(svc, "Boom", "error"))
        # Record every incident first, then let the publisher decide (as in a storm that outruns Slack).
        await record_then_publish(bot)
        assert await eventually(lambda: len(incident_headers(slack)) == new_incidents)
        assert await drained(bot)
    finally:
        await close(bot)
    ended = datetime.now(UTC)
    summaries = [h for h in headers(slack) if "Alert storm" in h["text"]]
    assert len(summaries) == (1 if new_incidents >= 5 else 0), [h["text"] for h in headers(slack)]
    if summaries:
        minute, shown = (began - timedelta(seconds=60)).replace(second=0, microsecond=0), set()
        while minute <= ended - timedelta(seconds=60):  # each minute the window's start can have been in
            shown.add(f"incidents since {minute:%H:%M} UTC")
            minute += timedelta(minutes=1)
        assert any(s in summaries[0]["text"] for s in shown), (summaries[0]["text"], shown)


async def test_a_storm_ends_after_a_quiet_minute_and_the_next_incident_is_its_own_thread(
    settings: Settings, redis_client: Any, slack: PostsSlack, clock: ScaledClock
) -> None:
    """Once a minute passes with no new incident and every thread is open, the storm is over: the summary is
    final, and a later incident opens its thread without being added to it."""
    clock.speed = 1.0
    s = tuned(settings, alert_storm_threshold_per_min=5, slack_post_per_s=20, slack_post_burst=20)
    bot = await start(s, clock, run=False)
    outbox = IncidentOutbox(IncidentStore(bot.deps.redis, s.key_prefix))
    try:
        for i in range(5):
            await bot.post(am(f"end-svc-{i}", "Boom", "error"))
        await record_then_publish(bot)
        assert await eventually(lambda: len(incident_headers(slack)) == 5)
        assert await drained(bot)
        [summary] = [h for h in headers(slack) if "Alert storm" in h["text"]]
        assert await outbox.storm_state(s.slack_alerts_channel)  # still within the minute: the storm goes on
        clock.advance(61)  # a quiet minute
        assert await eventually(lambda: _storm_over(outbox, s.slack_alerts_channel))
        await bot.post(am("end-svc-late", "Boom", "error"))
        assert await eventually(lambda: [h for h in incident_headers(slack) if "end-svc-late" in h["text"]])
        assert await drained(bot)
    finally:
        await close(bot)
    edits = [u for u in slack.accepted if u["_method"] == "chat.update" and u["ts"] == summary["ts"]]
    assert not [e for e in edits if "end-svc-late" in text_of(e)], "a later incident was added to a past storm"


async def _storm_over(outbox: IncidentOutbox, channel: str) -> bool:
    return not await outbox.storm_state(channel)


async def test_a_resolve_edits_the_header_at_once_whatever_the_debounce(
    settings: Settings, redis_client: Any, slack: PostsSlack, clock: ScaledClock
) -> None:
    """Header edits wait ALERT_HEADER_DEBOUNCE_S (here 10 h of this clock, never reached by the test), except
    the one that says the incident is resolved."""
    s = tuned(settings, alert_header_debounce_s=36_000)
    bot = await start(s, clock)
    try:
        await bot.post(am("vllm-gemma4", "KVCacheFull", "critical"))
        [h] = await eventually(lambda: incident_headers(slack))
        await bot.post(am("vllm-gemma4", "KVCacheFull", "critical", status="resolved"))
        [edit] = await eventually(lambda: [u for u in slack.accepted if u["_method"] == "chat.update"], timeout=20)
        assert clock.now() < 36_000
    finally:
        await close(bot)
    assert edit["ts"] == h["ts"] and "RESOLVED" in text_of(edit)


async def test_repeats_coalesce_into_one_line_headers_debounce_resolves_go_first(
    settings: Settings, redis_client: Any, slack: PostsSlack, clock: ScaledClock
) -> None:
    # Real-time pace for this clock, and intervals long against the wall time the 40 posts take on a loaded
    # machine: only the advance below may end them.
    clock.speed = 1.0
    s = tuned(settings, alert_coalesce_interval_s=6000, alert_header_debounce_s=3000)
    bot = await start(s, clock)
    seen = s.key("alerts", "seen", "*")

    async def repeat(body: dict[str, Any]) -> None:  # a repeat notification after the dedup window
        keys = [k async for k in bot.deps.redis.scan_iter(match=seen)]
        await bot.deps.redis.delete(*keys)
        await bot.post(body)

    try:
        await bot.post(am("vllm-gemma4", "KVCacheFull", "critical"))
        [h] = await eventually(lambda: incident_headers(slack))
        await repeat(am("vllm-gemma4", "KVCacheFull", "critical"))
        [first] = await eventually(lambda: replies(slack, h["ts"]))  # the first repeat at once (leading edge)
        for _ in range(37):
            await repeat(am("vllm-gemma4", "KVCacheFull", "critical"))
        await bot.post(am("vllm-gemma4", "KVCacheFull", "critical", n=2, start=1))  # two more instances
        # Every alert is handled (none left in the stream) while the coalesced rest waits in the outbox for the
        # interval (6000 s on this clock): nothing more is posted until the clock is advanced past it.
        assert await eventually(lambda: _jobs_handled(bot))
        assert bot.queue.publisher is not None and await bot.queue.publisher.pending() > 0
        assert len(replies(slack, h["ts"])) == 1 and not [u for u in slack.accepted if u["_method"] == "chat.update"]
        fixchecks = IncidentStore(bot.deps.redis, s.key_prefix).key("outbox", "fixchecks")
        assert await bot.deps.redis.zcard(fixchecks) == 0  # nobody confirmed a fix: no fix check is scheduled
        clock.advance(6000)
        assert await drained(bot)
        assert "Still firing: *KVCacheFull* (repeat notification #1)" in text_of(first)
        [_, second] = replies(slack, h["ts"])
        text = text_of(second)
        assert "+37 firings of *KVCacheFull* since" in text and ", last at " in text
        assert "2 more alerts of *KVCacheFull* on `vllm-gemma4` since" in text  # one line for one condition
        [edit] = [u for u in slack.accepted if u["_method"] == "chat.update"]  # debounced: latest state, once
        assert "3 grouped (3 firing)" in text_of(edit)
        # a resolve skips the interval and the debounce
        await bot.post(am("vllm-gemma4", "KVCacheFull", "critical", status="resolved"))
        await bot.post(am("vllm-gemma4", "KVCacheFull", "critical", status="resolved", n=2, start=1))
        assert await drained(bot)
    finally:
        await close(bot)
    last = replies(slack, h["ts"])[-1]
    assert "Resolved: *KVCacheFull*" in text_of(last) and "Incident resolved" in text_of(last)
    assert "RESOLVED" in text_of([u for u in slack.accepted if u["_method"] == "chat.update"][-1])
    lines = [text_of(m) for m in replies(slack, h["ts"])]
    assert len(lines) == len(set(lines))  # no line twice (each resolve is its own line: they skip the interval)


async def test_one_investigation_per_condition_and_truncated_alerts_are_shown(
    settings: Settings, redis_client: Any, slack: PostsSlack, clock: ScaledClock
) -> None:
    calls: list[tuple[str, int]] = []

    async def investigate(inc: Incident, alert: Alert) -> AsyncIterator[Reply]:
        calls.append((inc.id, len(inc.members)))
        yield Reply(title="Findings: KV cache too small")

    a = await start(tuned(settings), clock, investigate)
    b = await start(tuned(settings), clock, investigate)
    try:
        await a.post(am("vllm-gemma4", "KV", "critical", truncated=12, n=5))
        await b.post(am("vllm-gemma4", "More", "warning", n=3))
        assert await drained(a, b)
    finally:
        await close(a, b)
    # eight alerts of two conditions: two incidents, one investigation each (not one per alert)
    assert sorted(n for _, n in calls) == [1, 1] and len({i for i, _ in calls}) == 2
    posted = incident_headers(slack)
    assert len(posted) == 2
    [h] = [p for p in posted if "FIRING: KV on" in text_of(p)]
    assert "left 12 alert(s) of this group out of its notification (`truncatedAlerts`" in text_of(h)
    for p in posted:
        assert replies(slack, p["ts"])[0]["text"].startswith("Findings")  # the findings lead each thread


async def test_429s_from_slack_are_retried_by_slack_sdk_and_nothing_is_lost(
    settings: Settings, redis_client: Any, clock: ScaledClock
) -> None:
    # Slack stricter than our pacing (burst 1 against our 3): the bot gets 429s and must ride them out.
    strict = PostsSlack(clock=clock, limits=RateLimits(post_per_channel_burst=1, post_workspace_burst=2))
    with serve(strict.app) as url:
        strict.base_url = url
        s = tuned(settings, slack_api_url=url + "/api/", alert_storm_threshold_per_min=100)
        before = ClockedRateLimitRetryHandler.limited
        bot = await start(s, clock)
        try:
            for i in range(8):
                await bot.post(am(f"svc-{i}", "Boom", "error"))
            assert await drained(bot)
        finally:
            await close(bot)
    assert strict.limiter.limited > 0 and ClockedRateLimitRetryHandler.limited > before
    assert sorted(service_of(h) for h in incident_headers(strict)) == [f"svc-{i}" for i in range(8)]
    assert Counter(h["ts"] for h in incident_headers(strict)).most_common(1)[0][1] == 1


async def test_an_unfinished_post_of_another_holder_is_redone_once_and_counted(
    settings: Settings, redis_client: Any, slack: PostsSlack, clock: ScaledClock
) -> None:
    # A holder recorded its intent to post the header, then died before recording Slack's answer.
    s = tuned(settings)
    bot = await start(s, clock, run=False)
    try:
        await bot.post(am("svc-x", "Boom", "critical"))
        await bot.queue.ensure_group()
        threads_pub = bot.queue.publisher
        assert threads_pub is not None
        store = IncidentStore(bot.deps.redis, s.key_prefix, clock)
        entries = await bot.deps.redis.xreadgroup("alert-workers", "w", {bot.queue.stream: ">"}, count=1)
        [(_, [(entry_id, fields)])] = entries
        inc, _ = await store.record(
            entry_id,
            Alert.model_validate_json(fields["alert"]),
            utcnow(),
            channel=s.slack_alerts_channel,
            known=frozenset(),
            window_s=1800,
        )
        await bot.deps.redis.hset(store.k_pub(inc.id), "fx:header", "intent:dead-host-1-abcdef:7")
        while (await threads_pub.step())[0]:
            pass
        ambiguous = await threads_pub.outbox.ambiguous()
        pub = await store.pub(inc.id)
    finally:
        await close(bot)
    assert [service_of(h) for h in incident_headers(slack)] == ["svc-x"] and ambiguous == 1
    assert pub["fx:header"] == f"done:{pub['ts']}"


async def test_a_fenced_out_holder_cannot_record_over_the_new_one(redis_client: Any, key_prefix: str) -> None:
    old = Lease(redis_client, f"{key_prefix}:lease", ttl_ms=60_000, owner="old")
    assert await old.acquire()
    await redis_client.delete(f"{key_prefix}:lease")  # it lapsed (the holder stalled past its lease)
    new = Lease(redis_client, f"{key_prefix}:lease", ttl_ms=60_000, owner="new")
    assert await new.acquire() and new.token > old.token
    assert not await old.guarded_hset(f"{key_prefix}:h", {"through": "1"}) and not old.held
    assert await new.guarded_hset(f"{key_prefix}:h", {"through": "9"})
    assert await redis_client.hget(f"{key_prefix}:h", "through") == "9"
    await new.release()
    assert await redis_client.get(f"{key_prefix}:lease") is None
