"""A failure that is caught on purpose still leaves a WARNING with its context in the log.

Before, a Slack outage during the role check silently denied the deployer: the person saw "not allowed"
and the logs said nothing."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest

from skills.deploy.confirm import WriteGate, is_deployer


async def test_a_usergroup_lookup_failure_denies_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    async def slack_down(group: str) -> Sequence[str]:
        raise ConnectionError("usergroups.users.list: 503")

    gate = WriteGate(
        store=None,  # type: ignore[arg-type]  (not reached: the role check reads no Redis)
        plans=None,  # type: ignore[arg-type]
        lock_prefix="p",
        lock_ttl_s=60,
        audit_key="a",
        deployers=frozenset(),
        deployer_usergroup="S0DEPLOY",
        usergroup_members=slack_down,
    )
    with caplog.at_level(logging.WARNING, logger="skills.deploy.confirm"):
        assert await is_deployer(gate, "U42") is False
    [rec] = [r for r in caplog.records if r.name == "skills.deploy.confirm"]
    assert rec.levelno == logging.WARNING
    msg = rec.getMessage()
    assert "U42" in msg and "S0DEPLOY" in msg and "ConnectionError" in msg and "503" in msg
