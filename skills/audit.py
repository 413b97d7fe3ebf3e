"""The audit trail of every write: who, what, parameters, result, duration — in a capped Redis stream."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from skills.logs.redact import redact, redact_obj
from skills.ports import Store, StoreValue

MAXLEN = 5000  # keep the stream bounded; approximate trimming is cheap


class AuditEntry(BaseModel):
    at: float = Field(default_factory=time.time)
    user_id: str
    action: str
    service: str
    params: dict[str, Any] = Field(default_factory=dict)
    # pending (confirmed, outcome not seen yet) | ok | failed | refused | cancelled. A confirmed write is
    # recorded pending when it starts and again with its outcome; `latest` shows the newest record per plan.
    result: str
    detail: str = ""
    duration_s: float = 0.0
    plan_id: str = ""
    target: str = ""  # a rollback's revision (what a later reconciliation checks)
    before: str = ""  # the latest revision when a revision-making write started (its own comes after it)
    # The revision this write produced (a deploy/redeploy/scale/config outcome): how "what changed" in an incident
    # thread tells the bot's revisions (and who made them) from changes made outside the bot.
    revision: str = ""
    id: str = ""  # stream entry id, set when read back

    def when(self) -> str:
        return datetime.fromtimestamp(self.at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


async def record(store: Store, key: str, entry: AuditEntry) -> str:
    """Append `entry`; its parameters and detail are redacted first (a pasted token, an error quoting one)."""
    fields = entry.model_dump(exclude={"id"})
    fields["params"] = json.dumps(redact_obj(entry.params), sort_keys=True, default=str)
    fields["detail"] = redact(entry.detail)
    flat: dict[StoreValue, StoreValue] = {k: str(v) for k, v in fields.items()}
    return str(await store.xadd(key, flat, maxlen=MAXLEN, approximate=True))


WRITE_RESULTS = frozenset({"pending", "ok", "failed"})


def pending_key(key: str) -> str:
    """The hash of confirmed writes whose outcome is not recorded yet: plan id -> the pending entry."""
    return f"{key}:pending"


async def record_pending(store: Store, key: str, entry: AuditEntry) -> str:
    """A confirmed write starts: one pending record, and a note that its outcome is owed."""
    entry_id = await record(store, key, entry)
    await store.hsetnx(pending_key(key), entry.plan_id, entry.model_dump_json())
    return entry_id


async def settle(store: Store, key: str, entry: AuditEntry) -> bool:
    """Record the outcome of a pending write, once: whoever removes the note records it (the write's own watch,
    or the reconciliation at a later start); False when someone already did."""
    if not await store.hdel(pending_key(key), entry.plan_id):
        return False
    await record(store, key, entry)
    return True


async def pending(store: Store, key: str) -> list[AuditEntry]:
    raw: dict[Any, Any] = await store.hgetall(pending_key(key)) or {}
    return [AuditEntry.model_validate_json(v) for v in raw.values()]


def _parse(entry_id: Any, fields: Any) -> AuditEntry:
    data: dict[str, Any] = dict(fields or {})
    data["params"] = json.loads(data.get("params") or "{}")
    data["id"] = entry_id
    return AuditEntry.model_validate(data)


async def since(store: Store, key: str, start: float, limit: int = 500) -> list[AuditEntry]:
    """The records at or after `start` (epoch seconds; at most the newest `limit`), oldest first."""
    rows: list[Any] = await store.xrevrange(key, count=limit) or []
    out = [_parse(entry_id, fields) for entry_id, fields in rows]
    return [e for e in reversed(out) if e.at >= start]


async def latest(store: Store, key: str, count: int = 10) -> list[AuditEntry]:
    """The newest `count` records, one per confirmed write (its newest state: pending, then its outcome)."""
    rows: list[Any] = await store.xrevrange(key, count=count * 3 + 10) or []
    out = []
    seen: set[str] = set()
    for entry_id, fields in rows:
        entry = _parse(entry_id, fields)
        if entry.result in WRITE_RESULTS and entry.plan_id:
            if entry.plan_id in seen:
                continue
            seen.add(entry.plan_id)
        out.append(entry)
        if len(out) >= count:
            break
    return out
