"""A destroy runs only when the service's name was typed: no name at all (the form's field missing), an empty one
or blanks are refused like a wrong one, by the skill itself, whatever the surface in front of it checked (issue
44: the surfaces' own checks masked this one, and a precheck that let a missing name through went unnoticed)."""

from __future__ import annotations

from typing import Any

import pytest

from skills.deploy.confirm import Refused, claim, precheck
from tests.test_write_gate import _gate, _plan

pytest_plugins = ["tests.deploy_fixtures"]


@pytest.mark.parametrize("typed", [None, "", "   "], ids=["missing", "empty", "blanks"])
async def test_a_destroy_with_no_name_typed_is_refused_and_keeps_its_plan(deps: Any, typed: str | None) -> None:
    gate = _gate(deps)
    destroy = await _plan(gate, kind="destroy", summary="destroy")
    with pytest.raises(Refused) as before:
        await precheck(gate, destroy.id, "UDEP", typed)
    assert before.value.message == "The name typed does not match `vllm-gemma4`; nothing was deleted."
    with pytest.raises(Refused):
        await claim(gate, destroy.id, "UDEP", typed)
    assert await gate.plans.get(destroy.id) is not None  # still there: the right name can still confirm it
    await precheck(gate, destroy.id, "UDEP", "vllm-gemma4")
