"""A plan's change list is against what serves (issue 48, item 3): after a canary is rolled back the service's
template is the canary's, and the next deploy's "Changes to the running service" are shown against the serving
revision (naming it and the template's revision), so a change to what runs, such as --max-model-len from the
serving 16384 to 8192, is not hidden because the rolled-back canary had it. Typed at the console on the sandbox."""

from __future__ import annotations

import re

from bot.sandbox.console_session import ConsoleSession
from tests.test_gcloud_from_plans import unexpressed
from tests.test_truthful_writes import console

__all__ = ["console"]  # a fixture, used by name


async def test_after_a_rolled_back_canary_the_deploy_diff_is_against_what_serves(console: ConsoleSession) -> None:
    await console.line("/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384")
    await console.line("click Confirm")
    await console.line("/gemma deploy gemma4-12b-qat-l4 --max-model-len 8192 --canary 10")
    await console.line("click Confirm")
    out = await console.line("/gemma rollback")  # during a canary: back to the stable revision
    out = await console.line("click Confirm")
    pinned = re.search(r"100% of traffic on `([\w-]+)`", out)
    assert pinned, out
    plan = await console.line("/gemma deploy gemma4-12b-qat-l4 --max-model-len 8192")
    assert "--max-model-len: 16384 -> 8192" in plan, plan
    assert f"against the serving revision `{pinned.group(1)}`'s configuration" in plan, plan
    assert unexpressed(plan) == [], plan
