"""Plan buttons carry an id instead of their payload (Slack caps a button's value at 2,000 characters; the
payloads are stored by skills/actions/button_payloads.py, which says more)."""

from __future__ import annotations

from handlers.reply import PLAN_ACTION, Reply
from skills.actions.button_payloads import PayloadStore, is_id


class ButtonPayloads(PayloadStore):
    async def stash(self, reply: Reply) -> Reply:
        """A copy of `reply` whose plan buttons carry ids; the payloads are stored first."""
        if not any(b.action_id == PLAN_ACTION and not is_id(b.value) for b in reply.buttons):
            return reply
        out = reply.model_copy(deep=True)
        for b in out.buttons:
            if b.action_id == PLAN_ACTION and not is_id(b.value):
                b.value = await self.put(b.value)
        return out
