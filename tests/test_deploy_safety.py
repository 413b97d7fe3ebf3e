"""Write safety: double clicks, concurrent deploys (the per-service lock), expired plans, API errors."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from bot.sandbox.cloud_run_api import CloudRunStandIn
from handlers.reply import CONFIRM_ACTION
from skills.deploy.plans import PlanStore
from skills.locks import LockHeld, ServiceLock
from skills.targets.plan import Plan
from tests.deploy_helpers import click, command, plan_id_of
from tests.eventually import eventually

pytest_plugins = ["tests.deploy_fixtures"]


def _writes(cloud_run: CloudRunStandIn) -> list[tuple[str, str]]:
    return [r for r in cloud_run.requests if r[0] != "GET"]


async def test_double_click_confirm_deploys_once(deps: Any, cloud_run: CloudRunStandIn) -> None:
    cloud_run.op_polls = 3
    reply, _ = await command(deps, "deploy gemma4-12b-qat-l4")
    plan_id = plan_id_of(reply)
    (r1, _), (r2, _) = await asyncio.gather(click(deps, CONFIRM_ACTION, plan_id), click(deps, CONFIRM_ACTION, plan_id))
    refusals = [r for r in (r1, r2) if r is not None]
    assert len(refusals) == 1 and "already confirmed" in refusals[0].title
    assert len(_writes(cloud_run)) == 1
    late, _ = await click(deps, CONFIRM_ACTION, plan_id)  # after it ran: still refused, names who confirmed
    assert late is not None and "already confirmed by <@UDEPLOYER>" in late.title
    assert len(_writes(cloud_run)) == 1


async def test_concurrent_deploys_on_one_service_are_refused_by_the_lock(deps: Any, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service("vllm-gemma4")
    cloud_run.op_polls = 30
    a, _ = await command(deps, "deploy gemma4-12b-qat-l4")
    b, _ = await command(deps, "scale 0 2")
    first = asyncio.create_task(click(deps, CONFIRM_ACTION, plan_id_of(a)))
    # until the first confirm holds the lock
    assert await eventually(lambda: deps.redis.exists(deps.settings.key("lock", "service", "vllm-gemma4")))
    second, _ = await click(deps, CONFIRM_ACTION, plan_id_of(b))
    assert second is not None and "busy" in second.title and "deploy by <@UDEPLOYER> in progress since" in second.title
    assert (await first)[0] is None
    assert len(_writes(cloud_run)) == 1
    # The refused plan was handed back, so it can be confirmed again; it then stops because the service
    # changed under it (the deploy ran), rather than applying a stale spec.
    again, responder = await click(deps, CONFIRM_ACTION, plan_id_of(b))
    assert again is None
    assert "changed after this plan was made" in (responder.updates[-1][1].sections[-1].text or "")
    assert len(_writes(cloud_run)) == 1


async def test_expired_plan_asks_to_replan(deps: Any, cloud_run: CloudRunStandIn) -> None:
    store = PlanStore(deps.redis, deps.settings.key("plan"), deps.settings.plan_ttl_s)
    old = Plan(kind="scale", service="vllm-gemma4", summary="old", created_at=time.time() - 10_000, spec={})
    await store.save(old)
    reply, _ = await click(deps, CONFIRM_ACTION, old.id)
    assert (
        reply is not None and "expired" in reply.title and "re-plan" in " ".join(s.text or "" for s in reply.sections)
    )
    unknown, _ = await click(deps, CONFIRM_ACTION, "nope")
    assert unknown is not None and "expired" in unknown.title
    assert not _writes(cloud_run)


async def _gone(client: Any, key: str) -> bool:
    return not await client.exists(key)


async def test_lock_of_a_dead_holder_expires_and_release_is_owner_only(redis_client: Any, key_prefix: str) -> None:
    key = f"{key_prefix}:lock:svc"
    dead = ServiceLock(redis_client, key, ttl_s=1)
    dead._ttl_ms = 150  # a short TTL so the test need not wait a minute
    await dead.acquire("UDEAD", "deploy")
    with pytest.raises(LockHeld) as held:
        await ServiceLock(redis_client, key, ttl_s=60).acquire("UOTHER", "scale")
    assert "deploy by <@UDEAD> in progress since" in str(held.value)
    assert await eventually(lambda: _gone(redis_client, key), timeout=5)  # Redis expires it (its own clock)
    alive = ServiceLock(redis_client, key, ttl_s=60)
    await alive.acquire("UOTHER", "scale")
    assert await dead.release() is False  # the expired holder cannot delete the new holder's lock
    assert (await alive.holder()) is not None
    assert await alive.release() is True


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (403, "permission denied"),
        (409, "conflict"),
        (429, "quota"),
        (500, "server error"),
        (400, "rejected the request"),
    ],
)
async def test_api_errors_become_one_sentence(deps: Any, cloud_run: CloudRunStandIn, status: int, words: str) -> None:
    cloud_run.seed_service("vllm-gemma4")
    reply, _ = await command(deps, "deploy gemma4-12b-qat-l4")
    cloud_run.fail_next("PATCH", status, "injected failure")
    result, responder = await click(deps, CONFIRM_ACTION, plan_id_of(reply))
    assert result is None
    last = responder.updates[-1][1]
    text = last.title + " " + " ".join(s.text or "" for s in last.sections)
    assert words in text.lower(), text
    assert "Traceback" not in text
    assert not await deps.redis.exists(deps.settings.key("lock", "service", "vllm-gemma4"))


async def test_missing_service_is_a_clear_error(deps: Any, cloud_run: CloudRunStandIn) -> None:
    reply, _ = await command(deps, "scale 0 1 --service nothere")
    assert reply is not None and reply.title.startswith(":warning:") and "does not exist" in reply.title
    cloud_run.fail_next("GET", 403, "caller lacks run.services.get")
    denied, _ = await command(deps, "rollback")
    assert denied is not None and "permission denied" in denied.title
