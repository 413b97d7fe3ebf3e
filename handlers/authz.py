"""The one authorization rule for whatever writes, costs money or wakes the model service: confirming a write,
running a benchmark or an eval, the deep health check's real completion -- and cancelling or stopping them.

It is the write gate's deployer check (skills/deploy/confirm.py `is_deployer`): DEPLOYER_USER_IDS, or members
of DEPLOYER_USERGROUP_ID (Slack usergroups.users.list, cached briefly). No deployers configured means nobody
may, never everybody: the refusal says which setting to fill in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skills.deploy.confirm import Refused, is_deployer

if TYPE_CHECKING:
    from handlers.deps import HandlerDeps


async def may_spend(deps: HandlerDeps, user_id: str) -> bool:
    return bool(user_id) and await is_deployer(deps.writes.gate, user_id)


async def require_deployer(deps: HandlerDeps, user_id: str, what: str) -> None:
    """Raise Refused (a sentence for the user) unless `user_id` passes the deployer check."""
    if await may_spend(deps, user_id):
        return
    s = deps.settings
    hint = (
        "Ask a deployer."
        if s.deployers or s.deployer_usergroup_id
        else "No deployers are configured: set DEPLOYER_USER_IDS or DEPLOYER_USERGROUP_ID."
    )
    raise Refused(f"<@{user_id}> is not allowed to {what}.", hint, (user_id,))


async def require_author_or_deployer(deps: HandlerDeps, user_id: str, author: str, what: str) -> None:
    """Cancelling or stopping someone's run: its author may, and so may a deployer."""
    if user_id and user_id == author:
        return
    if await may_spend(deps, user_id):
        return
    raise Refused(
        f"Only <@{author}> (who asked for it) or a deployer can {what}.",
        "It expires on its own if nobody runs it.",
        (author,),
    )
