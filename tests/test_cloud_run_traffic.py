"""The Cloud Run stand-in's traffic splits and tags, as strict as the real API (Knative's route validation), through
the real google-cloud-run client: bad splits are refused and change nothing; a good one names its new revision,
takes effect when that revision is ready, gives each tag its URL, and is undone if the revision fails."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bot.sandbox.cloud_run_api import CloudRunStandIn
from skills.errors import UserFacingError

pytest_plugins = ["tests.deploy_fixtures"]

REV = "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION"
LATEST = "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST"


def seeded(cloud_run: CloudRunStandIn) -> tuple[dict[str, Any], str]:
    svc = cloud_run.seed_service("vllm-gemma4")
    return copy.deepcopy(svc), svc["latestReadyRevision"].rsplit("/", 1)[-1]


def canary_body(svc: dict[str, Any], baseline: str, traffic: list[dict[str, Any]], name: str) -> dict[str, Any]:
    template = copy.deepcopy(svc["template"])
    template["revision"] = name
    template["containers"][0]["args"] = ["--max-model-len", "8192"]
    return {"template": template, "traffic": traffic}


@pytest.mark.parametrize(
    ("traffic", "said"),
    [
        ([{"type": REV, "revision": "B", "percent": 80}, {"type": REV, "revision": "C", "percent": 10}],
         "Traffic targets sum to 90, want 100"),
        ([{"type": REV, "revision": "B", "percent": 80, "tag": "x"}, {"type": REV, "revision": "C", "percent": 20,
          "tag": "x"}], 'Multiple definitions for "x"'),
        ([{"type": REV, "revision": "B", "percent": 80, "tag": "Canary_1"}, {"type": REV, "revision": "C",
          "percent": 20}], "not a DNS 1035 label"),
        ([{"type": REV, "percent": 100}], "missing field(s): service.traffic[0].revision"),
        ([{"type": LATEST, "revision": "B", "percent": 100}], "may not set revision"),
        ([{"type": REV, "revision": "B", "percent": 120}, {"type": REV, "revision": "C", "percent": -20}],
         "expected 0 <= 120 <= 100"),
    ],
)  # fmt: skip
async def test_a_bad_split_is_refused_and_changes_nothing(
    deps: Any, cloud_run: CloudRunStandIn, traffic: list[dict[str, Any]], said: str
) -> None:
    svc, baseline = seeded(cloud_run)
    name = "vllm-gemma4-canary-abc"
    traffic = [{**t, "revision": {"B": baseline, "C": name}[t["revision"]]} if "revision" in t else t for t in traffic]
    with pytest.raises(UserFacingError) as exc:
        await deps.runtime.apply_service("vllm-gemma4", canary_body(svc, baseline, traffic, name), create=False)
    assert said in exc.value.message
    assert (
        len(cloud_run.revisions["vllm-gemma4"]) == 1 and cloud_run.services["vllm-gemma4"]["traffic"] == svc["traffic"]
    )


@pytest.mark.parametrize(
    ("name", "target", "said"),
    [
        ("other-canary", "", "must be prefixed by the name of the enclosing Service"),
        ("vllm-gemma4-Canary", "", "Invalid revision name"),
        ("vllm-gemma4-canary-abc", "vllm-gemma4-nope", "'vllm-gemma4-nope' referenced in traffic not found"),
    ],
)
async def test_revision_names_and_targets_must_be_valid(
    deps: Any, cloud_run: CloudRunStandIn, name: str, target: str, said: str
) -> None:
    svc, baseline = seeded(cloud_run)
    traffic = [
        {"type": REV, "revision": baseline, "percent": 80, "tag": "stable"},
        {"type": REV, "revision": target or name, "percent": 20, "tag": "canary"},
    ]
    with pytest.raises(UserFacingError) as exc:
        await deps.runtime.apply_service("vllm-gemma4", canary_body(svc, baseline, traffic, name), create=False)
    assert said in exc.value.message
    assert len(cloud_run.revisions["vllm-gemma4"]) == 1


async def test_a_split_takes_effect_when_the_canary_is_ready_with_a_url_per_tag(
    deps: Any, cloud_run: CloudRunStandIn
) -> None:
    svc, baseline = seeded(cloud_run)
    name = "vllm-gemma4-canary-abc"
    traffic = [
        {"type": REV, "revision": baseline, "percent": 80, "tag": "stable"},
        {"type": REV, "revision": name, "percent": 20, "tag": "canary"},
    ]
    op = await deps.runtime.apply_service("vllm-gemma4", canary_body(svc, baseline, traffic, name), create=False)
    before = await deps.runtime.get_service("vllm-gemma4")
    assert [(t.revision, t.percent) for t in before.traffic] == [(baseline, 100)]  # not before it is ready
    assert (await deps.runtime.wait_operation(op, timeout_s=5)).done
    info = await deps.runtime.get_service("vllm-gemma4")
    assert info.latest_ready_revision == name
    shares = {(t.revision, t.percent, t.tag, t.uri) for t in info.traffic}
    assert shares == {
        (baseline, 80, "stable", "https://stable---vllm-gemma4-abc123-uc.a.run.app"),
        (name, 20, "canary", "https://canary---vllm-gemma4-abc123-uc.a.run.app"),
    }
    # The name is now taken: a different configuration under it is refused.
    again = canary_body(svc, baseline, traffic, name)
    again["template"]["containers"][0]["args"] = ["--max-model-len", "4096"]
    with pytest.raises(UserFacingError, match="already exists"):
        await deps.runtime.apply_service("vllm-gemma4", again, create=False)


async def test_a_canary_that_fails_leaves_the_traffic_as_it_was(deps: Any, cloud_run: CloudRunStandIn) -> None:
    svc, baseline = seeded(cloud_run)
    name = "vllm-gemma4-canary-bad"
    traffic = [
        {"type": REV, "revision": baseline, "percent": 90, "tag": "stable"},
        {"type": REV, "revision": name, "percent": 10, "tag": "canary"},
    ]
    cloud_run.next_revision_outcome = "probe_failed"
    op = await deps.runtime.apply_service("vllm-gemma4", canary_body(svc, baseline, traffic, name), create=False)
    status = await deps.runtime.wait_operation(op, timeout_s=5)
    assert status.done and "startup probe" in status.error
    info = await deps.runtime.get_service("vllm-gemma4")
    assert [(t.revision, t.percent) for t in info.traffic] == [(baseline, 100)]
    assert cloud_run.services["vllm-gemma4"]["traffic"] == svc["traffic"]  # the spec's split is undone too
