"""Writes whose watch stopped before their outcome was seen (the process was stopped mid-deploy): their audit
records stay `pending` (skills/audit.py) until a later start reads the outcome from the service itself.

What a write shows once it has settled: a deploy, redeploy or scale made the first revision created after it
was confirmed, and that revision's Ready condition is its outcome; a rollback moved all traffic to its target
revision, or did not; a destroy left no service. A revision still starting leaves the record pending. (The
write's revision is the first one after the latest revision when it started, recorded with it.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from skills.audit import AuditEntry, pending, settle
from skills.deploy.execute import traffic_detail
from skills.errors import NotFound, UserFacingError
from skills.ports import Store
from skills.targets.port import ServingTarget

log = logging.getLogger(__name__)

# Cloud Run stamps createTime on its own clock; a revision stamped a little before the confirm is still ours.
_CLOCK_SLACK_S = 5.0


async def observed_outcome(runtime: ServingTarget, entry: AuditEntry) -> tuple[bool, str, str] | None:
    """(ok, what the service shows, the revision it made or '') for a pending write, or None while under way."""
    if entry.action == "destroy":
        try:
            await runtime.get_service(entry.service)
        except NotFound:
            return True, f"service `{entry.service}` deleted", ""
        return False, f"service `{entry.service}` still exists", ""
    info = await runtime.get_service(entry.service)
    if entry.action in ("rollback", "promote"):
        share = sum(t.percent for t in info.traffic if t.revision == entry.target)
        if share == 100:
            return True, f"100% of traffic on `{entry.target}`", ""
        return False, f"traffic did not move: {traffic_detail(info, entry.target)}", ""
    if not runtime.capabilities.revisions:  # no revision to tell this write's from: the service's state says
        if info.ready is None:
            return None
        if info.ready:
            return True, f"`{entry.service}` is ready", ""
        cond = info.terminal_condition
        return (
            False,
            f"`{entry.service}` is not ready: " + (f"{cond.reason}: {cond.message}" if cond else "unknown"),
            "",
        )
    revisions = await runtime.list_revisions(entry.service, limit=20)  # newest first
    made = []
    for r in revisions:
        if entry.before and r.name == entry.before:
            break
        made.append(r)
    if not entry.before:  # a new service (or the latest revision could not be read): created since the confirm
        since = datetime.fromtimestamp(entry.at, UTC) - timedelta(seconds=_CLOCK_SLACK_S)
        made = [r for r in made if r.create_time and r.create_time >= since]
    if not made:
        return False, "no revision was created (the write never reached Cloud Run)", ""
    rev = made[-1]  # the first one made after the write started
    if rev.ready is None:
        return None
    if rev.ready:
        return True, traffic_detail(info, rev.name), rev.name
    return False, f"revision `{rev.name}` failed: {rev.reason}: {rev.message}".strip(": "), rev.name


async def reconcile_pending(
    store: Store, audit_key: str, target_for: Callable[[str], ServingTarget]
) -> list[AuditEntry]:
    """Record the outcome of every pending write that has settled (each read from its service's target, as
    `target_for` names it); returns the records written."""
    done = []
    for entry in await pending(store, audit_key):
        try:
            seen = await observed_outcome(target_for(entry.service), entry)
        except UserFacingError as exc:
            log.warning("audit: cannot reconcile %s %s yet: %s", entry.action, entry.plan_id, exc.message)
            continue
        if seen is None:
            continue
        ok, detail, made = seen
        outcome = entry.model_copy(
            update={
                "revision": made,  # what "what changed" attributes to this write (skills/incidents/changes.py)
                "at": time.time(),
                "result": "ok" if ok else "failed",
                "detail": f"{detail} (seen later: the watch had stopped)"[:500],
                "duration_s": round(time.time() - entry.at, 2),
            }
        )
        if await settle(store, audit_key, outcome):
            done.append(outcome)
    return done
