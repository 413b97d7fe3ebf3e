"""Writes that tell the truth (issue 25), each case a whole console session on the sandbox, as a user types it:
replies and the audit say what the service shows, a write builds on what serves, a no-op is refused, a plan
names every change it makes, and the deploy's self-check finds vLLM's start-up lines."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import pytest

from bot.sandbox.console_session import CONFIRMED, READY_SERVING, ConsoleSession
from bot.wiring import reconcile_writes
from skills.audit import latest, pending
from skills.deploy.flow import BACKGROUND
from tests.conftest import REDIS_URL
from tests.eventually import eventually


@pytest.fixture
async def console() -> AsyncIterator[ConsoleSession]:
    session = await ConsoleSession(REDIS_URL).start()
    try:
        yield session
    finally:
        await session.close()


async def _audit(console: ConsoleSession) -> list[object]:
    assert console.deps is not None
    return list(await latest(console.deps.redis, console.deps.settings.key("audit"), 50))


def _serving(console: ConsoleSession) -> str:
    return next(r for r, p in console.traffic().items() if p == 100)


async def test_scale_after_failed_deploys_builds_on_the_serving_revision(console: ConsoleSession) -> None:
    serving = _serving(console)
    for scenario in ("kv-cache-too-small", "gpu-oom-at-load"):
        await console.line(f"/gemma sandbox {scenario}")
    assert _serving(console) == serving  # the service itself is healthy
    plan = await console.line("/gemma scale 0 2")
    assert f"on the serving revision `{serving}`'s configuration" in plan
    out = await console.line("click Confirm")
    found = READY_SERVING.search(out)
    assert found, out
    assert console.revision_state(found.group(1)) is True
    assert console.traffic().get(found.group(1)) == int(found.group(2)) == 100


async def test_after_a_rollback_replies_say_where_traffic_is(console: ConsoleSession) -> None:
    await console.line("/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384")
    await console.line("click Confirm")
    await console.line("/gemma rollback")
    out = await console.line("click Confirm")
    pinned = re.search(r"100% of traffic on `([\w-]+)`", out)
    assert pinned and console.traffic() == {pinned.group(1): 100}
    await console.line("/gemma scale 0 2")
    out = await console.line("click Confirm")
    said = READY_SERVING.findall(out)
    assert said, out
    for revision, percent in said:  # whatever it says is what the stand-in routes
        assert console.traffic().get(revision, 0) == int(percent)


async def test_no_op_writes_are_refused_with_the_reason(console: ConsoleSession) -> None:
    svc = console.service()
    assert svc is not None
    scaling = svc["template"]["scaling"]
    low, high = scaling.get("minInstanceCount", 0), scaling["maxInstanceCount"]
    mark = len(console.responder.buttons)
    out = await console.line(f"/gemma scale {low} {high}")
    assert "the scale would change nothing" in out
    out += await console.line(f"/gemma rollback {_serving(console)}")
    assert "the rollback would change nothing" in out
    assert not [label for _, label in console.buttons(mark) if label == "Confirm"]


async def test_ctrl_c_after_confirm_records_what_happened_not_a_failure(console: ConsoleSession) -> None:
    await console.line("/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384")
    out = await console.interrupt("click Confirm", lambda seen: "submitted" in seen)
    assert "^C" in out
    plan_id = CONFIRMED.findall(out)[0]
    assert await console.settle()
    records = [e for e in await _audit(console) if getattr(e, "plan_id", "") == plan_id]
    assert len(records) == 1, records
    record = records[0]
    assert record.result == "ok", record  # type: ignore[attr-defined]
    revision = READY_SERVING.search(record.detail)  # type: ignore[attr-defined]
    assert revision and console.revision_state(revision.group(1)) is True


async def test_a_watch_that_died_is_reconciled_at_the_next_start() -> None:
    console = await ConsoleSession(REDIS_URL, speed=0).start()  # a stopped clock: the revision waits for us
    try:
        assert console.deps is not None and console.sandbox is not None
        await console.line("/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384")
        key = console.deps.settings.key("audit")
        confirm = asyncio.get_running_loop().create_task(console.line("click Confirm"))
        revisions = console.sandbox.cloud_run.revisions["vllm-gemma4"]
        assert await eventually(lambda: len(revisions) == 2)  # the write reached Cloud Run; its revision starts
        watches = [*BACKGROUND, confirm]
        for task in watches:  # the process dies mid-watch: nothing more is recorded by it
            task.cancel()
        await asyncio.gather(*watches, return_exceptions=True)
        assert [e.result for e in await pending(console.deps.redis, key)] == ["pending"]
        assert await reconcile_writes(console.deps) == 0  # still starting: stays pending
        console.sandbox.clock.advance(3 * 3600)
        console.sandbox.tick()
        assert await reconcile_writes(console.deps) == 1  # what the next start does
        (record,) = [e for e in await _audit(console) if e.action == "deploy"]  # type: ignore[attr-defined]
        assert record.result == "ok" and "seen later" in record.detail  # type: ignore[attr-defined]
        assert READY_SERVING.search(record.detail)  # type: ignore[attr-defined]
        assert await pending(console.deps.redis, key) == []
    finally:
        await console.close()


async def test_a_fix_that_needs_more_to_fit_names_every_change(console: ConsoleSession) -> None:
    # The case was the kv-cache fix "util 0.6" that silently also applied --kv-cache-dtype fp8. With the
    # weights of what vLLM loads (issue 29) util 0.6 now fits on its own, so the same class is shown on the GPU-OOM
    # fix "max_model_len 16384", which at util 0.98 still needs --enforce-eager to fit.
    await console.line("/gemma sandbox gpu-oom-at-load")
    await console.line("/gemma diagnose --since 10m")
    (fix,) = {label for _, label in console.buttons() if label.startswith("Plan redeploy: max_model_len")}
    mark = len(console.responder.buttons)
    plan = await console.line(f"click {fix}")
    # As asked it does not fit: not confirmable as if it were the change the button named; the extended change is
    # offered under a label naming all of it.
    assert "this does not fit; the capacity planner would also set" in plan
    labels = [label for _, label in console.buttons(mark)]
    assert "Confirm" not in labels
    (offer,) = [label for label in labels if label.startswith("Plan redeploy: ")]
    named = dict(kv.split("=") for kv in offer.removeprefix("Plan redeploy: ").split(", "))
    assert named.keys() > {"max_model_len"}
    plan = await console.line(f"click {offer}")
    assert "Confirm" in [label for _, label in console.buttons(mark)][len(labels) :]
    out = await console.line("click Confirm")
    assert "confirmed by @console" in out
    (record,) = [e for e in await _audit(console) if e.action == "redeploy"]  # type: ignore[attr-defined]
    assert {k: str(v) for k, v in record.params.items()} == named  # type: ignore[attr-defined]
    assert "Applied to fit" not in plan  # the plan applies what the label says, nothing more


async def test_the_deploy_self_check_finds_vllms_start_up_lines(console: ConsoleSession) -> None:
    await console.line("/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384")
    out = await console.line("click Confirm")
    assert "Planner vs vLLM" in out
    assert "Nothing to compare" not in out
    assert "GPU KV cache size: predicted" in out


async def test_diagnose_is_about_the_serving_and_latest_revisions(console: ConsoleSession) -> None:
    await console.line("/gemma sandbox kv-cache-too-small")
    now = await console.line("/gemma diagnose")
    assert "KV cache too small" in now and "past (a replaced revision)" not in now  # the latest revision
    await console.line("/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384")
    await console.line("click Confirm")
    mark = len(console.responder.buttons)
    later = await console.line("/gemma diagnose")
    serving = _serving(console)
    # The diagnosis's title says which revisions it is about (the first scenario's incident may post its
    # resolution into the same output while the command runs, so look for the title, not the first line).
    (title,) = [line for line in later.splitlines() if "finding(s)" in line or "no known failure" in line]
    assert f"`{serving}`" in title
    assert "past (a replaced revision): KV cache too small" in later
    assert not [label for _, label in console.buttons(mark) if label.startswith("Plan ")]  # no fix for the past


async def test_one_configuration_has_one_price_and_one_reading(console: ConsoleSession) -> None:
    plan = await console.line("/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384")
    planned = re.search(r"~\$(\d+\.\d\d)/h", plan)
    assert planned, plan
    await console.line("click Confirm")
    cost = await console.line("/gemma cost")
    assert f"${planned.group(1)}/hour per running instance" in cost  # the plan priced what it deployed
    config = await console.line("/gemma config")
    assert "nothing deployed" not in config.splitlines()[0]
    bench = await console.line("/gemma bench --concurrency 1 --context 64 --output 16 --requests 2")
    assert re.search(r"max-model-len\s+16384\b", bench), bench  # what the service runs


async def test_a_write_that_makes_no_new_revision_ends_with_what_the_service_shows(console: ConsoleSession) -> None:
    # Found by the model-based test: after scale -> rollback, the same scale built on the serving revision is the
    # latest revision's configuration again, so Cloud Run moves traffic without creating a revision.
    for line in ("/gemma scale 0 2", "click Confirm", "/gemma rollback", "click Confirm", "/gemma scale 0 2"):
        await console.line(line)
    out = await asyncio.wait_for(console.line("click Confirm"), 60)  # not a watch waiting out its deadline
    said = READY_SERVING.search(out)
    assert said and "no new revision" in out, out
    assert console.traffic() == {said.group(1): 100}


async def test_bench_compare_labels_unlike_runs_instead_of_judging(console: ConsoleSession) -> None:
    for output in (16, 64):
        await console.line(f"/gemma bench --concurrency 1 --context 64 --output {output} --requests 2")
        await console.line("click Run benchmark")
    out = await console.line("/gemma bench compare")
    assert "UNLIKE RUNS (output 64 vs 16 tokens per request)" in out, out
    assert "WORSE" not in out and "better" not in out.replace("lower is better", "").replace("higher is better", "")


async def test_metrics_advice_reads_the_running_flags(console: ConsoleSession) -> None:
    await console.line("/gemma sandbox kv-cache-too-small")
    await console.line("/gemma diagnose")
    await console.line("click Plan redeploy: kv_cache_dtype=fp8")
    out = await console.line("click Confirm")
    assert READY_SERVING.search(out), out  # the service now runs --kv-cache-dtype fp8
    await console.line("/gemma sandbox queue-saturation")
    metrics = await console.line("/gemma metrics")
    assert "KV cache 97% full" in metrics
    assert "--kv-cache-dtype fp8" not in metrics  # not advised to a service already using it


async def test_after_failed_revisions_and_a_rollback_a_scale_builds_on_what_serves(console: ConsoleSession) -> None:
    # The run: a deploy, two failed scenario revisions, a rollback to a ready one, then a scale.
    await console.line("/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384")
    await console.line("click Confirm")
    for scenario in ("kv-cache-too-small", "gpu-oom-at-load"):
        await console.line(f"/gemma sandbox {scenario}")
    await console.line("/gemma rollback")
    out = await console.line("click Confirm")
    pinned = re.search(r"100% of traffic on `([\w-]+)`", out)
    assert pinned and console.traffic() == {pinned.group(1): 100}, out
    plan = await console.line("/gemma scale 0 2")
    assert f"on the serving revision `{pinned.group(1)}`'s configuration" in plan
    out = await console.line("click Confirm")
    found = READY_SERVING.search(out)  # not a failure carried over from the failed template
    assert found, out
    assert console.revision_state(found.group(1)) is True and console.traffic() == {found.group(1): 100}


async def test_a_fix_on_a_failed_template_says_so_and_offers_the_serving_one(console: ConsoleSession) -> None:
    serving = _serving(console)
    await console.line("/gemma sandbox kv-cache-too-small")
    await console.line("/gemma diagnose")
    mark = len(console.responder.buttons)
    plan = await console.line("click Plan redeploy: kv_cache_dtype=fp8")
    assert "Builds on the service's template, which is revision" in plan and "(failed)" in plan
    assert f"not on the configuration of `{serving}`, which serves" in plan
    offers = [label for _, label in console.buttons(mark) if "On the serving revision" in label]
    assert len(offers) == 1 and "kv_cache_dtype=fp8" in offers[0], console.buttons(mark)  # names its change too
    plan = await console.line(f"click {offers[0]}")
    assert f"Builds on the serving revision `{serving}`'s configuration" in plan
    out = await console.line("click Confirm")
    found = READY_SERVING.search(out)
    assert found and console.traffic() == {found.group(1): 100}, out


async def test_status_after_a_write_shows_the_write(console: ConsoleSession) -> None:
    # /gemma status caches its report briefly; a confirmed write must not leave the old report standing, or the
    # next status says the service is as it was before the write (seen: "NOT ready", "data 1 s old (cached)").
    before = await console.line("/gemma status")
    assert "min 0 / max 1" in before, before
    await console.line("/gemma scale 0 2")
    out = await console.line("click Confirm")
    assert READY_SERVING.search(out), out
    after = await console.line("/gemma status")
    assert "min 0 / max 2" in after, after
