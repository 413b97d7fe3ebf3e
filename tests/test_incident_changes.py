"""Issue 34, "what changed": the revisions before an incident, diffed against the last healthy one, who made each
(the audit records the revision a write produced), hand changes flagged, closest first, with a rollback plan.

The rule for the last healthy revision is checked on its own; the whole path runs in the sandbox console: a deploy
through the bot, then a teammate's hand deploy that fails and alerts."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from skills.incidents.changes import last_healthy
from skills.ports import RevisionInfo
from tests.test_sandbox_incidents import _quit, _run, _spawn

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def _rev(name: str, minutes: int, ready: bool | None = True, traffic: int = 0) -> RevisionInfo:
    return RevisionInfo(name=name, ready=ready, create_time=T0 + timedelta(minutes=minutes), traffic_percent=traffic)


def test_the_last_healthy_revision_served_long_enough_with_no_incident_open() -> None:
    revs = [_rev("r1", 0), _rev("r2", 60), _rev("r3", 65, ready=False), _rev("r4", 70)]
    start = T0 + timedelta(minutes=75)
    now = start + timedelta(minutes=5)
    # r4 served 5 min before the incident: too short; r2 served 10 min (60 -> 70): healthy.
    assert last_healthy(revs, start, [], 600, now) == ("r2", True)
    # An incident open while r2 served leaves no quiet 10 minutes: back to r1 (served 0 -> 60).
    assert last_healthy(revs, start, [(T0 + timedelta(minutes=62), T0 + timedelta(minutes=66))], 600, now) == (
        "r1",
        True,
    )
    # Nothing served long enough: the one serving just before stands in, unproven.
    assert last_healthy(revs, start, [], 3 * 3600, now) == ("r4", False)
    # A failed revision is never the healthy one, and one created after the start does not count.
    assert last_healthy([_rev("bad", 0, ready=False), _rev("late", 80)], start, [], 60, now) == ("", False)


def test_a_revision_created_within_a_whole_second_start_can_be_the_healthy_one() -> None:
    # Cloud Monitoring's started_at is whole seconds: the incident began within that second, so a ready revision
    # created 0.4 s "after" it may be from before; with a start that carries fractions, it is after.
    start = T0 + timedelta(minutes=10)
    revs = [_rev("r1", 10).model_copy(update={"create_time": start + timedelta(milliseconds=400)})]
    now = start + timedelta(minutes=1)
    assert last_healthy(revs, start, [], 600, now) == ("r1", False)
    assert last_healthy(revs, start + timedelta(milliseconds=100), [], 600, now) == ("", False)


def test_a_hand_deploy_just_before_the_incident_comes_first_with_a_rollback_plan(tmp_path: Path) -> None:
    child = _spawn(tmp_path)
    _run(child, "/gemma scale 0 2")
    done = _run(child, "click Confirm")  # the console waits for the watch: ready, serving
    assert "serving 100% of traffic" in done, done
    out = _run(child, "/gemma sandbox kv-cache-too-small")  # a teammate's deploy by hand, outside the bot
    tail = _quit(child)
    assert "Traceback" not in tail
    assert "What changed on `vllm-gemma4` before this incident" in out, out
    section = out[out.index("What changed on") :]
    numbered = re.findall(r"\d\. `(vllm-gemma4-\d{5}-[a-z0-9]+)` \(([^)]*)\), created [^,]+, (.*)", section)
    assert numbered, section
    first = numbered[0]
    assert "outside the bot" in first[2] and "likely cause" in first[2], section  # the hand deploy comes first
    assert "failed" in first[1]
    assert "--max-model-len: 32768 -> 131072" in section  # its diff against the last healthy revision
    healthy = re.search(r"Last healthy revision: `(vllm-gemma4-\d{5}-[a-z0-9]+)` \(([^)]*)\)", section)
    assert healthy, section
    # The bot's own revision, made seconds before (as the baseline or as the next change): who made it.
    assert "scale by @console through the bot" in section
    assert f"Plan rollback to {healthy.group(1)}" in section
