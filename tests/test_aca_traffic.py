"""Scale, rollback, canary and promote on an Azure Container Apps app (issue 55), as a user types them in one
console session against the sandbox's Azure (the ARM stand-in over HTTPS, answering azure-mgmt-appcontainers):
after each step what the bot said is checked against what the stand-in holds (revisions, their states, the
ingress weights and labels), and the az equivalent against the plan's own change list."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from bot.sandbox.console_session import ConsoleSession
from handlers.reply import CONFIRM_ACTION, PLAN_ACTION
from skills.capacity.aca_catalog import load_aca_catalog
from skills.capacity.aca_prices import aca_price
from skills.targets.aca.az import az_update, expressed
from tests.conftest import REDIS_URL
from tests.deploy_helpers import click, plan_id_of
from tests.eventually import eventually
from tests.test_aca_target import A100, APP, PROFILE
from tests.test_canary import shown


@pytest.fixture
async def console() -> AsyncIterator[ConsoleSession]:
    """A console on the sandbox at 1000x, not 3000x: a deploy watch's margin past an ACA cold start (its budget is
    the startup probe's, ~280 simulated seconds more) is then ~0.3 s of real time, which a loaded machine's poll
    does not overrun (at 3000x it was ~0.1 s, and a first deploy once ended unready under load)."""
    session = await ConsoleSession(REDIS_URL, speed=1000).start()
    try:
        yield session
    finally:
        await session.close()


def _world(console: ConsoleSession):  # type: ignore[no-untyped-def]
    assert console.sandbox is not None
    return console.sandbox.azure


def _weights(console: ConsoleSession) -> dict[str, int]:
    standin = _world(console).standin
    with standin.lock:
        standin._advance()
        return {r: w for r, w in standin.weights(standin.apps[APP]).items() if w}


async def _deployed(console: ConsoleSession) -> str:
    await console.line(f"/gemma deploy {PROFILE}")
    out = await console.line("click Confirm")
    assert f"deploy `{APP}`: ready" in out, out
    [rev] = _world(console).standin.apps[APP].revisions
    return rev


async def test_scale_rollback_canary_promote_match_what_azure_holds(console: ConsoleSession) -> None:
    first = await _deployed(console)
    standin = _world(console).standin

    # Scale: the replica range is in the template, so a new revision; its az line says exactly that.
    plan = await console.line(f"/gemma scale 1 2 --service {APP}")
    assert plan.startswith(f"Plan: Scale `{APP}` to min 1 / max 2 replicas"), plan
    assert f"az containerapp update --name {APP}" in plan and "--min-replicas 1 --max-replicas 2" in plan, plan
    assert "makes a new revision" in plan, plan
    each = aca_price(A100, standin.location).per_replica_usd_per_hour
    assert each is not None and f"${each:.2f}/h" in plan, plan  # the one ACA price
    out = await console.line("click Confirm")
    app = standin.apps[APP]
    second = app.latest
    assert second != first and f"revision `{second}` is ready and serving 100% of traffic" in out, out
    assert _weights(console) == {second: 100}
    assert app.revisions[second].template["scale"] == {"minReplicas": 1, "maxReplicas": 2}

    # Rollback: traffic only, pinned to the first revision; no revision made.
    plan = await console.line(f"/gemma rollback --service {APP}")
    assert f"100% of traffic to `{first}`" in plan, plan
    assert f"--revision-weight {first}=100" in plan, plan
    assert f"`{second}` stays active with min replicas 1" in plan, plan  # Multiple mode keeps it running
    assert f"az containerapp revision deactivate --name {APP}" in plan, plan
    out = await console.line("click Confirm")
    assert f"100% of traffic on `{first}`" in out, out
    assert "moving traffic" in out or "ready" in out, out
    assert _weights(console) == {first: 100} and len(standin.apps[APP].revisions) == 2
    cost = await console.line(f"/gemma cost {APP}")  # the scale's revision still runs its min replica, billed
    assert f"${each:.2f}/h with min-replicas 0 + 1 kept by other active revisions" in cost, cost
    assert f"`{second}` is still active with min replicas 1" in cost, cost
    status = await console.line(f"/gemma status {APP} --fresh")
    assert f"100% `{first}` (pinned)" in status, status  # what serves, not only what is latest
    assert "min 0 / max 1" in status, status  # the pinned revision's own replica range

    plan = await console.line(f"/gemma deploy {PROFILE} --max-model-len 16384")  # planned, not confirmed
    assert f"Traffic is pinned to the serving revision `{first}`" in plan and f"`{second}`'s" in plan, plan

    # Scale while pinned: built on what serves, and traffic goes back to the latest revision.
    plan = await console.line(f"/gemma scale 0 1 --service {APP}")
    assert f"on the serving revision `{first}`'s configuration" in plan, plan
    assert "--revision-weight latest=100" in plan, plan
    out = await console.line("click Confirm")
    third = standin.apps[APP].latest
    assert third not in (first, second) and f"revision `{third}` is ready and serving 100%" in out, out
    assert _weights(console) == {third: 100}

    # Canary: a named revision on the latest-revision weight (label canary), the serving one pinned (label stable).
    plan = await console.line(f"/gemma deploy {PROFILE} --max-model-len 16384 --canary 10")
    assert f"10% of traffic to `{APP}--canary-" in plan and f"90% stays on `{third}`" in plan, plan
    assert "--revision-suffix canary-" in plan and f"--revision-weight {third}=90 latest=10" in plan, plan
    assert "revision label add" in plan and "--label canary --revision latest" in plan, plan
    assert "Canary cost" in plan and "GPU quota `ManagedEnvironmentConsumptionNCA100Gpus`" in plan, plan
    out = await console.line("click Confirm")
    canary = standin.apps[APP].latest
    assert canary.startswith(f"{APP}--canary-"), canary
    assert f"revision `{canary}` is ready and serving 10% of traffic" in out, out
    assert _weights(console) == {third: 90, canary: 10}
    refused = await console.line(f"/gemma scale 1 1 --service {APP}")  # a scale would end the split unjudged
    assert "is split" in refused and "Promote or roll back the running canary first" in refused, refused
    # Each label answers at its own host, reaching its revision only.
    info = await console.deps.targets.for_service(APP).get_service(APP)
    hosts = {t.tag: t.uri for t in info.traffic if t.tag}
    domain = standin.default_domain
    assert hosts["canary"].endswith(f"/apps/{APP}---canary.{domain}"), hosts
    async with httpx.AsyncClient() as client:  # each revision's vLLM says its own --max-model-len
        for tag, mml in (("canary", 16384), ("stable", 32768)):
            for _ in range(5):  # every time, not by the weights' share
                r = await client.get(hosts[tag] + "/v1/models")
                assert r.status_code == 200 and r.json()["data"][0]["max_model_len"] == mml, (tag, r.text)

    # The comparison runs on the sandbox's clock and ends with its proposal: Promote it, 100% to it, labels gone.
    assert await eventually(lambda: f"Promote: 100% to {canary}" in console.text, timeout=30)
    assert "5xx share of the requests Azure Container Apps counts (Azure Monitor)" in console.text
    status = await console.line(f"/gemma status {APP} --fresh")
    assert f"split: 90% `{third}` (stable) · 10% `{canary}` (canary)" in status, status
    assert "Replicas" in status and "Instances" not in status, status
    plan = await console.line("click Promote")
    assert f"100% of traffic to `{canary}`" in plan and "revision label remove" in plan, plan
    out = await console.line("click Confirm")
    assert f"100% of traffic on `{canary}`" in out, out
    assert _weights(console) == {canary: 100}
    traffic = standin.apps[APP].body["properties"]["configuration"]["ingress"]["traffic"]
    assert traffic == [{"revisionName": canary, "weight": 100}], traffic


async def test_refusals_change_nothing(console: ConsoleSession) -> None:
    first = await _deployed(console)
    standin = _world(console).standin
    body = standin.apps[APP].body
    out = await console.line(f"/gemma rollback --service {APP}")
    assert "No earlier revision" in out, out
    out = await console.line(f"/gemma scale 0 1 --service {APP}")
    assert "would change nothing" in out, out
    out = await console.line(f"/gemma scale 0 400 --service {APP}")
    assert "400" in out and "click Confirm" not in out, out
    # Quota: a canary needs the serving revision's max and its own replica at once.
    quota = load_aca_catalog().profile(A100).quota_usage
    assert quota is not None
    standin.set_usage(quota, 1)
    plan = await console.line(f"/gemma deploy {PROFILE} --max-model-len 16384 --canary 10")
    assert "Canary refused" in plan and "need 2, and only 1 is free" in plan, plan
    assert "[Confirm]" not in plan, plan
    assert standin.apps[APP].body == body and list(standin.apps[APP].revisions) == [first]


def test_the_az_line_expresses_every_change_it_makes() -> None:
    old = {
        "tags": {"a": "1"},
        "properties": {
            "workloadProfileName": "A",
            "configuration": {"ingress": {"traffic": [{"latestRevision": True, "weight": 100}]}},
            "template": {
                "containers": [{"name": "vllm", "image": "i:1", "args": ["--x", "1"], "probes": []}],
                "scale": {"minReplicas": 0, "maxReplicas": 1},
            },
        },
    }
    new = {
        "tags": {"a": "2"},
        "properties": {
            "workloadProfileName": "B",
            "configuration": {
                "ingress": {
                    "traffic": [
                        {"revisionName": "app--one", "weight": 70, "label": "stable"},
                        {"latestRevision": True, "weight": 30, "label": "canary"},
                    ]
                }
            },
            "template": {
                "revisionSuffix": "canary-abc",
                "containers": [{"name": "vllm", "image": "i:2", "args": ["--x", "2"], "probes": [{"type": "Startup"}]}],
                "scale": {"minReplicas": 1, "maxReplicas": 3},
            },
        },
    }
    cmd = az_update("app", old, new, "rg")
    assert "--image i:2" in cmd and "--args --x 2" in cmd and "--min-replicas 1 --max-replicas 3" in cmd, cmd
    assert "--revision-suffix canary-abc" in cmd and "--workload-profile-name B" in cmd and "--tags a=2" in cmd
    assert "--revision-weight app--one=70 latest=30" in cmd, cmd
    assert "--label canary --revision latest" in cmd and "--label stable --revision app--one" in cmd, cmd
    assert "no flag sets properties.template.containers[vllm].probes" in cmd, cmd  # named, with the YAML route
    assert expressed(cmd, old, new) == []
    assert expressed("az containerapp update --name app", old, new)  # a command missing them is caught


async def test_a_redeploy_carries_what_serves_and_refuses_cloud_run_fixes(console: ConsoleSession) -> None:
    """A redeploy is what a fix button plans (an incident's remediation): pressed as Slack would press it."""
    first = await _deployed(console)
    standin = _world(console).standin
    await console.line(f"/gemma scale 1 2 --service {APP}")
    await console.line("click Confirm")
    deps = console.deps
    assert deps is not None
    fix = {"action": "redeploy", "params": {"service": APP, "max_model_len": 16384}}
    plan, _ = await click(deps, PLAN_ACTION, json.dumps(fix), user="console")
    assert plan is not None
    out = shown(plan)
    assert f"Redeploy `{APP}`" in plan.title and "max_model_len=16384" in plan.title, out
    assert '"--max-model-len", "32768"' in out and '"16384"' in out, out  # the one change to the flags
    assert "minReplicas" not in out, out  # the replica range the scale set is carried, not the profile's
    assert f"az containerapp update --name {APP}" in out and "--args " in out, out
    _, responder = await click(deps, CONFIRM_ACTION, plan_id_of(plan), user="console")
    latest = standin.apps[APP].latest
    said = "\n".join(shown(r) for _, r, _ in responder.posts) + "\n".join(shown(r) for _, r in responder.updates)
    assert f"revision `{latest}` is ready and serving 100%" in said, said
    args = standin.apps[APP].revisions[latest].template["containers"][0]["args"]
    assert args[args.index("--max-model-len") + 1] == "16384"
    assert standin.apps[APP].revisions[latest].template["scale"] == {"minReplicas": 1, "maxReplicas": 2}
    bad = {"action": "redeploy", "params": {"service": APP, "hf_token_from_secret": True}}
    refused, _ = await click(deps, PLAN_ACTION, json.dumps(bad), user="console")
    assert refused is not None and "Not fixes of an Azure Container Apps app" in shown(refused), shown(refused)
    assert first in standin.apps[APP].revisions and standin.apps[APP].latest == latest  # nothing changed


async def test_a_regressing_canary_on_aca_meets_the_sandboxs_users_and_is_proposed_for_rollback() -> None:
    """`/gemma sandbox canary-regresses` arms the next canary on ACA too; the sandbox's users, sent while the split
    lasts, make its evidence (slower, 8% errors) and the comparison proposes the rollback."""
    session = await ConsoleSession(REDIS_URL, speed=300).start()
    try:
        first = await _deployed(session)
        await session.line("/gemma sandbox canary-regresses")
        await session.line(f"/gemma deploy {PROFILE} --max-model-len 16384 --canary 50")
        await session.line("click Confirm")
        assert await eventually(lambda: "regresses: roll it back?" in session.text, timeout=60), session.text[-3000:]
        canary = _world(session).standin.apps[APP].latest
        load = _world(session).replicas.load

        def share(revision: str) -> float:  # of the requests a replica answered: 500s among 200s and 500s
            got = {st: sum(n for (_, _, r, s), n in load.items() if r == revision and s == st) for st in (200, 500)}
            return got[500] / max(got[200] + got[500], 1)

        assert share(canary) > 0.05 and share(first) < 0.01, (share(canary), share(first))  # as each behaves
        out = await session.line("click Roll back")
        assert f"100% of traffic to `{first}`" in out, out
        out = await session.line("click Confirm")
        assert f"100% of traffic on `{first}`" in out, out
        assert _weights(session) == {first: 100}
    finally:
        await session.close()
