"""Plans on real Redis: their confirm window, the one-shot claim (kept longer than the plan, so a late second
click still learns who confirmed), and what a plan the planner refused says."""

from __future__ import annotations

from typing import Any

from skills.deploy.plans import PlanStore
from skills.targets.plan import Plan


async def test_the_window_closes_at_expires_at_and_the_claim_outlives_the_plan(
    redis_client: Any, key_prefix: str
) -> None:
    store = PlanStore(redis_client, f"{key_prefix}:plan", ttl_s=900)
    plan = await store.save(Plan(kind="scale", service="svc", summary="s", created_at=1_000.0))
    assert plan.expires_at == 1_900.0
    assert not plan.expired(now=1_899.9) and plan.expired(now=1_900.0)  # at the deadline it is over

    live = await store.save(Plan(kind="scale", service="svc", summary="s"))
    assert 890 < await redis_client.ttl(f"{key_prefix}:plan:{live.id}") <= 900
    assert await store.claim(live.id, "U1") and not await store.claim(live.id, "U2")
    assert await store.claimed_by(live.id) == "U1"
    claim_ttl = await redis_client.ttl(f"{key_prefix}:plan:{live.id}:claim")
    assert 3_590 < claim_ttl <= 3_600  # four plan windows: the claim never stays forever
    await store.unclaim(live.id)
    assert await store.claimed_by(live.id) is None and await store.claim(live.id, "U2")
    assert await store.discard(live.id) and await store.get(live.id) is None and not await store.discard(live.id)
    assert await store.get("") is None and await store.get("x" * 65) is None  # not an id: no Redis lookup


def test_a_plan_that_does_not_fit_says_what_to_do() -> None:
    assert Plan(kind="deploy", service="svc", summary="s", verdict="fits_with_changes").blocked() == ""
    blocked = Plan(kind="deploy", service="svc", summary="s", verdict="does_not_fit").blocked()
    assert blocked == (
        "The capacity planner says this configuration does not fit; pick one of the alternatives and re-plan."
    )
