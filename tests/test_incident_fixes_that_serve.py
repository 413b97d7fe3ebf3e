"""Incidents close as the lifecycle says (issue 49, item 3), each case one console session on the sandbox, typed as
a user types it: a fix marks its incident fixed only when its revision serves and the alert's condition cleared
after it served; otherwise the incident resolves when its alert closes (or by a human's Resolve), and a fix that
lands later says it came after the close. The postmortem's impact reads the request rate `/gemma status` reads,
and lists each fix once; `/gemma incidents` tells incidents of one alert apart (revision, finding, start)."""

from __future__ import annotations

import asyncio
import re

from bot.sandbox.console_session import READY_SERVING, ConsoleSession
from tests.eventually import eventually
from tests.test_truthful_writes import console

FIXED = re.compile(
    r"fixed by (\w+) `vllm-gemma4` at [0-9-]+ [0-9:]+ UTC: revision `([\w-]+)` serving (\d+)% of traffic"
)


__all__ = ["console"]  # a fixture, used by name


def _incident(out: str) -> str:
    [found] = re.findall(r"incident (inc-[0-9-]+)", out)
    return found


async def _two_failures(console: ConsoleSession) -> tuple[str, str]:
    """Two hand deploys that fail, each its own open incident: (the kv-cache one, the GPU-OOM one)."""
    kv = _incident(await console.line("/gemma sandbox kv-cache-too-small"))
    oom = _incident(await console.line("/gemma sandbox gpu-oom-at-load"))
    return kv, oom


async def _resolved(console: ConsoleSession, *ids: str) -> None:
    async def all_resolved() -> bool:
        text = console.text
        return all(f"incident {i}" in text for i in ids) and text.count("RESOLVED: vLLM revision") >= len(ids)

    await eventually(all_resolved, timeout=30)


async def test_a_fix_landing_after_the_close_is_not_what_fixed_it(console: ConsoleSession) -> None:
    kv, oom = await _two_failures(console)
    await asyncio.sleep(1.5)  # the user reads the diagnosis first (what changed compares at whole seconds)
    # The OOM incident's fix serves; the sandbox's Cloud Monitoring sees both failed rollouts clear.
    await console.line("click Plan redeploy: enforce_eager=True")
    first = await console.line("click Confirm")
    ready = READY_SERVING.search(first)
    assert ready and ready.group(2) == "100", first
    await console.settle()
    await _resolved(console, kv, oom)
    credited = FIXED.findall(console.text)
    assert credited == [("redeploy", ready.group(1), "100")], console.text  # the OOM incident's fix, once
    # Then the kv-cache incident's own fix: its alert closed before this revision existed.
    mark = len(console.text)
    await asyncio.sleep(1.5)  # a user reads before the next click: the alert's times are whole seconds
    await console.line("click Plan redeploy: max_model_len=88064")
    second = await console.line("click Confirm")
    late = READY_SERVING.search(second)
    assert late and late.group(1) != ready.group(1), second
    await console.settle()

    async def said() -> bool:
        return "after the incident resolved" in console.text[mark:]

    await eventually(said, timeout=30)
    after = console.text[mark:]
    assert not FIXED.search(after), after  # not "fixed by … condition cleared": the close came first
    assert f"revision `{late.group(1)}` serving 100% of traffic" in after, after
    assert "after the incident resolved: its alert closed at" in after, after
    # The kv-cache incident's postmortem says so too: resolved when its alert closed, the fix came after.
    draft = await console.line(f"/gemma postmortem {kv}")
    fixed_it = draft[draft.index("What fixed it") : draft.index("Follow-ups")]
    assert "its alert closed" in fixed_it and "after the alert closed" in fixed_it, fixed_it
    # Its cause is the revision its alert is about, not a fix made after it started; and no write after the close
    # is listed as what fixed it.
    failed = re.search(r"Revision `([\w-]+)` failed \(kv_cache_insufficient\)", console.text)
    assert failed and f"Likely triggering change: revision `{failed.group(1)}`" in draft, draft
    oom_draft = await console.line(f"/gemma postmortem {oom}")
    oom_fixed = oom_draft[oom_draft.index("What fixed it") : oom_draft.index("Follow-ups")]
    assert late.group(1) not in oom_fixed, oom_fixed  # the kv-cache fix came after the OOM incident closed


def _section(text: str, heading: str, following: str) -> str:
    return text[text.index(heading) : text.index(following)]


async def test_the_postmortem_reads_the_request_rate_status_reads_and_lists_its_fix_once(
    console: ConsoleSession,
) -> None:
    inc = _incident(await console.line("/gemma sandbox kv-cache-too-small"))
    during = await console.line("/gemma status --fresh")  # what the user saw while it fired
    [rate] = re.findall(r"Requests +(\d+\.\d\d)/s now", during)
    await console.line("click Plan redeploy: max_model_len=88064")
    fixed = READY_SERVING.search(await console.line("click Confirm"))
    assert fixed, console.text
    await console.settle()
    await _resolved(console, inc)
    await asyncio.sleep(2.5)  # the user reads the thread first: the postmortem is drafted seconds after the close
    draft = await console.line(f"/gemma postmortem {inc}")
    impact = _section(draft, "Impact", "Timeline")
    # Status's figure, over the incident's window: the users' rate went on while the revision failed to start.
    assert "Not measured" not in impact, impact
    said = re.search(r"Requests: (\d+\.\d\d)/s (?:at its end|now), peak (\d+\.\d\d)/s.* during the incident", impact)
    assert said and float(said.group(2)) >= float(rate) > 0, impact
    fixes = _section(draft, "What fixed it", "Follow-ups")
    timeline = _section(draft, "Timeline", "Cause")
    rows = [line for line in timeline.splitlines() if f"{fixed.group(1)}" in line]
    assert len(rows) == 1 and "the incident's fix" in rows[0], timeline  # one row for one write
    writes = [line for line in fixes.splitlines() if "• redeploy" in line]
    assert len(writes) == 1 and f"`{fixed.group(1)}`" in writes[0], fixes  # once, not again as its audit record
    assert "condition cleared" in fixes, fixes


async def test_incidents_of_one_alert_are_told_apart_by_revision_finding_and_start(console: ConsoleSession) -> None:
    kv, oom = await _two_failures(console)
    listed = await console.line("/gemma incidents")
    rows = {i: next(line for line in listed.splitlines() if f"`{i}`" in line) for i in (kv, oom)}
    assert rows[kv] != rows[oom]
    failed = {kv: "kv_cache_insufficient", oom: "gpu_oom_at_load"}
    for inc, row in rows.items():
        revision = re.search(r"revision `(vllm-gemma4-\d+-\w+)`", row)
        assert revision and console.revision_state(revision.group(1)) is False, row  # the revision it is about
        assert f"`{failed[inc]}`" in row, row  # its diagnosis's lead finding
        assert re.search(r"started \d\d:\d\d:\d\d UTC", row), row
    assert re.search(r"revision `([\w-]+)`", rows[kv]).group(1) != re.search(r"revision `([\w-]+)`", rows[oom]).group(1)  # type: ignore[union-attr]
