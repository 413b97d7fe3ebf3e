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
    result: str  # ok | failed | refused | cancelled
    detail: str = ""
    duration_s: float = 0.0
    plan_id: str = ""
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


async def latest(store: Store, key: str, count: int = 10) -> list[AuditEntry]:
    rows: list[Any] = await store.xrevrange(key, count=count) or []
    out = []
    for entry_id, fields in rows:
        data: dict[str, Any] = dict(fields or {})
        data["params"] = json.loads(data.get("params") or "{}")
        data["id"] = entry_id
        out.append(AuditEntry.model_validate(data))
    return out
