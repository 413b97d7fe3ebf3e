"""A manual resolve, then Cloud Monitoring's close of the old alert and its open of a new one for the same
condition: queue workers may apply the two in either order, and the incident must end the same way (reopened, the
manual resolve withdrawn, "fired again" said once), since the condition fires again after the team closed it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from skills.incidents.model import Alert, Change, Incident, new_incident

T0 = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)


def _alert(fp: str, state: str, started: datetime, ended: datetime | None = None) -> Alert:
    return Alert(
        source="gcp",
        fingerprint=fp,
        state=state,  # type: ignore[arg-type]
        name="vLLM 5xx rate",
        service="vllm-gemma4",
        severity="critical",
        started_at=started,
        ended_at=ended,
    )


def _resolved_by_hand() -> Incident:
    first = _alert("0.old", "firing", T0)
    inc = new_incident("1-0", first, "C1", True, T0)
    inc.apply("1-0", first, T0)
    inc.act("resolve", "UDAN", T0 + timedelta(minutes=5), note="rolled back by hand")
    return inc


@pytest.mark.parametrize("open_first", [False, True], ids=["close-then-open", "open-then-close"])
def test_a_new_alert_after_a_manual_resolve_reopens_in_either_order(open_first: bool) -> None:
    inc = _resolved_by_hand()
    close = ("2-0", _alert("0.old", "resolved", T0, T0 + timedelta(minutes=10)))
    reopen = ("3-0", _alert("0.new", "firing", T0 + timedelta(minutes=20)))
    now = T0 + timedelta(minutes=21)
    changes = [inc.apply(eid, a, now) for eid, a in ([reopen, close] if open_first else [close, reopen])]
    assert Change.REFIRED in changes
    assert inc.state == "firing" and not inc.life.resolved_by
    assert [r.action for r in inc.life.log] == ["resolve", "reopened"]


def test_a_repeat_of_the_alert_the_team_resolved_does_not_undo_the_resolve() -> None:
    inc = _resolved_by_hand()
    again = _alert("0.old", "firing", T0)  # the same alert, still firing: the team knew
    assert inc.apply("2-0", again, T0 + timedelta(minutes=6)) is Change.REPEATED
    assert inc.life.resolved_by == "UDAN"
