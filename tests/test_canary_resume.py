"""A canary watch outlives the bot process that started it: whole console sessions on one sandbox and one Redis.
A session starts a canary and is stopped mid-watch (no Promote); the next session on the same state resumes the
watch (one line in its thread says so) and proposes; a split promoted or rolled back by hand meanwhile closes
the watch with what the service shows now; two processes starting at once (or one starting beside the one still
watching) give one watcher. Time moves only when the test advances the sandbox's clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.sandbox.attach import build_sandbox_deps
from bot.sandbox.clock import SandboxClock
from bot.sandbox.cloud import Sandbox
from bot.sandbox.console_session import SERVICE, ConsoleSession
from bot.sandbox.slack_api import SlackStandIn
from bot.settings import load_settings
from bot.slack_app import make_web_client
from bot.web import reconcile_and_resume
from bot.wiring import close_deps
from handlers.canary_thread import watches_of
from skills.deploy.flow import BACKGROUND
from skills.targets.cloud_run.render import strip_output_only
from tests.conftest import REDIS_URL
from tests.eventually import eventually

DEPLOY = "/gemma deploy gemma4-12b-qat-l4 --max-model-len 8192 --canary 20"
RESUMED = "Canary watch resumed after a restart"
FAST_LEASE = {"canary_lease_ms": 1000}  # a stopped process's lease lapses in 1 s of Redis time


@pytest.fixture
async def sandbox() -> AsyncIterator[Sandbox]:
    sb = Sandbox(clock=SandboxClock(speed=0), image=load_settings().vllm_image)
    await asyncio.to_thread(sb.start)
    yield sb
    await sb.aclose()


async def session(sb: Sandbox, key_prefix: str, **settings: Any) -> ConsoleSession:
    return await ConsoleSession(REDIS_URL, speed=0, key_prefix=key_prefix, sandbox=sb, settings=settings).start()


async def until(sb: Sandbox, seen: Any, step_s: float = 60.0, patience_s: float = 60.0) -> bool:
    """Move the sandbox clock `step_s` every 20 ms of real time until `seen()` (cold start, the canary's window)."""

    def moved() -> bool:
        if seen():
            return True
        sb.clock.advance(step_s)
        return False

    return bool(await eventually(moved, timeout=patience_s))


async def canary_then_stop(sb: Sandbox, key_prefix: str, **settings: Any) -> ConsoleSession:
    """Start a 20% canary, let its comparison be posted once, then stop the process mid-watch (its tasks
    cancelled, as at a shutdown); its Redis state stays."""
    a = await session(sb, key_prefix, **settings)
    await a.line(DEPLOY)
    confirm = asyncio.get_running_loop().create_task(a.line("click Confirm"))
    assert await until(sb, lambda: "not enough traffic yet" in a.text)
    watches = [*BACKGROUND, confirm]
    for task in watches:
        task.cancel()
    await asyncio.gather(*watches, return_exceptions=True)
    assert "promote it?" not in a.text and "roll it back?" not in a.text  # stopped before any proposal
    return a


async def no_records(where: ConsoleSession | Any) -> bool:
    deps = where.deps if isinstance(where, ConsoleSession) else where
    return await watches_of(deps).all() == []


def baseline_and_canary(a: ConsoleSession) -> tuple[str, str]:
    split = a.traffic()
    base = next(r for r, p in split.items() if p == 80)
    return base, next(r for r, p in split.items() if p == 20)


async def test_a_watch_stopped_mid_way_resumes_in_the_next_process_and_proposes(
    sandbox: Sandbox, key_prefix: str, redis_client: Any
) -> None:
    sandbox.fleet.arm("canary-holds")
    a = await canary_then_stop(sandbox, key_prefix)
    assert a.deps is not None
    (record,) = await watches_of(a.deps).all()  # the watch's state, kept in Redis
    base, canary = baseline_and_canary(a)
    assert (record.info.baseline, record.info.revision, record.min_requests) == (base, canary, 50)
    assert record.thread_ts and record.comparison_ts and record.firsts.get("canary") is not None
    await a.close(keep_sandbox=True, keep_state=True)

    b = await session(sandbox, key_prefix)
    try:
        assert f"{RESUMED}: `{canary}` (20%) vs `{base}`" in b.text
        assert await until(sandbox, lambda: "holds: promote it?" in b.text)
        assert b.text.count(RESUMED) == 1
        assert a.sandbox is not None and b.traffic() == {base: 80, canary: 20}  # the watch proposes; no write
        assert b.deps is not None
        assert await eventually(lambda: no_records(b))  # the watch ended: its record goes right after
        out = await b.line(f"click Promote: 100% to {canary}")
        assert f"Promote `{canary}` on `{SERVICE}`" in out
        await b.line("click Confirm")
        assert b.traffic() == {canary: 100}
    finally:
        await b.close(keep_sandbox=True)


async def test_a_split_removed_while_the_bot_was_stopped_closes_the_watch(
    sandbox: Sandbox, key_prefix: str, redis_client: Any
) -> None:
    sandbox.fleet.arm("canary-regresses")
    a = await canary_then_stop(sandbox, key_prefix)
    assert a.deps is not None
    base, canary = baseline_and_canary(a)
    # By hand meanwhile, as `gcloud run services update-traffic --to-revisions BASE=100` would: the Cloud Run API.
    spec = strip_output_only(await a.deps.runtime.get_service_spec(SERVICE) or {})
    spec["traffic"] = [{"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION", "revision": base, "percent": 100}]
    await a.deps.runtime.wait_operation(await a.deps.runtime.apply_service(SERVICE, spec, create=False), 60)
    assert a.traffic() == {base: 100}
    await a.close(keep_sandbox=True, keep_state=True)

    b = await session(sandbox, key_prefix)
    try:
        assert RESUMED not in b.text
        assert (
            f"Canary watch closed: traffic on `{SERVICE}` no longer splits between `{base}` and `{canary}` "
            f"(changed while the bot was stopped); it shows now: `{base}` 100%." in b.text
        )
        assert await no_records(b)  # closed before the start went on
        sandbox.clock.advance(3600)  # nothing watches any more: no comparison, no proposal
        assert "roll it back?" not in b.text and "Canary `" not in b.text
    finally:
        await b.close(keep_sandbox=True)


async def test_two_processes_starting_at_once_give_one_watcher(
    sandbox: Sandbox, key_prefix: str, redis_client: Any
) -> None:
    sandbox.fleet.arm("canary-holds")
    a = await canary_then_stop(sandbox, key_prefix, **FAST_LEASE)
    await a.close(keep_sandbox=True, keep_state=True)

    b, c = await asyncio.gather(session(sandbox, key_prefix, **FAST_LEASE), session(sandbox, key_prefix, **FAST_LEASE))
    try:
        assert (b.text + c.text).count(RESUMED) == 1
        watcher = b if RESUMED in b.text else c
        other = c if watcher is b else b
        assert await until(sandbox, lambda: "holds: promote it?" in watcher.text)
        assert "Canary `" not in other.text and "promote it?" not in other.text
    finally:
        await other.close(keep_sandbox=True, keep_state=True)
        await watcher.close(keep_sandbox=True)


async def test_a_process_starting_beside_the_one_still_watching_leaves_the_watch_to_it(
    sandbox: Sandbox, key_prefix: str, redis_client: Any
) -> None:
    sandbox.fleet.arm("canary-holds")
    a = await session(sandbox, key_prefix, **FAST_LEASE)
    try:
        await a.line(DEPLOY)
        confirm = asyncio.get_running_loop().create_task(a.line("click Confirm"))
        assert await until(sandbox, lambda: "not enough traffic yet" in a.text)
        b = await session(sandbox, key_prefix, **FAST_LEASE)  # a renews its lease: b stands by
        assert RESUMED not in b.text and "Canary watch closed" not in b.text
        assert await until(sandbox, lambda: "holds: promote it?" in a.text)
        await confirm
        assert "Canary `" not in b.text
        await b.close(keep_sandbox=True, keep_state=True)
    finally:
        await a.close(keep_sandbox=True)


async def test_a_killed_watchers_lease_lapses_and_the_next_start_takes_the_watch(
    sandbox: Sandbox, key_prefix: str, redis_client: Any
) -> None:
    sandbox.fleet.arm("canary-holds")
    a = await canary_then_stop(sandbox, key_prefix, **FAST_LEASE)
    assert a.deps is not None
    # Killed rather than stopped: its lease was never handed back, and lapses on its TTL in Redis.
    lease = watches_of(a.deps).lease(SERVICE, owner="killed-process")
    assert await redis_client.set(lease.key, "killed-process:1", px=1000, nx=True)
    await a.close(keep_sandbox=True, keep_state=True)

    b = await session(sandbox, key_prefix, **FAST_LEASE)  # it stands by until that lease lapses
    try:
        assert await eventually(lambda: RESUMED in b.text)
        assert await until(sandbox, lambda: "holds: promote it?" in b.text)
        assert b.text.count(RESUMED) == 1
    finally:
        await b.close(keep_sandbox=True)


async def test_a_serve_process_resumes_the_watch_in_its_slack_thread(
    sandbox: Sandbox, key_prefix: str, redis_client: Any, slack: SlackStandIn
) -> None:
    """The serve start-up path (bot/web.py): the resumed watch posts through the Slack Web API, in the thread
    the record names, and its proposal's buttons work there (their payloads stashed in Redis)."""
    sandbox.fleet.arm("canary-holds")
    a = await canary_then_stop(sandbox, key_prefix)
    assert a.deps is not None
    watches = watches_of(a.deps)
    (record,) = await watches.all()
    # The same canary as a confirm in Slack leaves it: its deploy thread in a channel.
    record.channel, record.thread_ts, record.comparison_ts = "C0CANARY", "1700000000.000100", ""
    await watches.save(record)
    await a.close(keep_sandbox=True, keep_state=True)

    settings = load_settings(
        key_prefix=key_prefix,
        redis_url=REDIS_URL,
        deployer_user_ids="U1",
        slack_bot_token="xoxb-sandbox",
        slack_api_url=slack.base_url + "/api/",
    )
    deps = build_sandbox_deps(sandbox.configure(settings), sandbox, None)
    deps.chat = make_web_client(settings)
    try:
        await reconcile_and_resume(deps)

        def thread() -> list[dict[str, Any]]:
            return [p for p in slack.of("chat.postMessage") if p.get("thread_ts") == record.thread_ts]

        assert thread() and RESUMED in thread()[0]["text"] and thread()[0]["channel"] == "C0CANARY"
        assert await until(sandbox, lambda: any("holds: promote it?" in p["text"] for p in thread()))
        edits = [u for u in slack.of("chat.update") if "the canary holds" in u["text"]]
        assert edits and edits[-1]["channel"] == "C0CANARY"  # the comparison, posted once and edited in place
        assert await eventually(lambda: no_records(deps))
    finally:
        await close_deps(deps)


async def test_a_resumed_watch_keeps_the_settings_its_canary_started_with(
    sandbox: Sandbox, key_prefix: str, redis_client: Any
) -> None:
    # Started with CANARY_AUTO_ROLLBACK on; the next process runs without it: the canary's own setting holds.
    sandbox.fleet.arm("canary-regresses")
    a = await canary_then_stop(sandbox, key_prefix, canary_auto_rollback=True)
    base, canary = baseline_and_canary(a)
    await a.close(keep_sandbox=True, keep_state=True)

    b = await session(sandbox, key_prefix)
    try:
        assert b.deps is not None and not b.deps.settings.canary_auto_rollback
        assert RESUMED in b.text
        assert await until(sandbox, lambda: "Rolled back automatically" in b.text)
        assert f"100% of traffic on `{base}`, canary `{canary}` at 0%" in b.text
        assert b.traffic() == {base: 100}
    finally:
        await b.close(keep_sandbox=True)
