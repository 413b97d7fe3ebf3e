"""A running canary watch, kept in Redis so a restarted bot can take it up again.

While a watch runs (handlers/canary_thread.py), its record names what the watch needs to go on after a restart:
the service and target, both revisions (CanaryInfo), the thread it reports in (channel, thread, the comparison
message), when it started (on the watch's clock) and the settings it started with (min requests, auto-rollback),
plus the first /metrics scrape of each revision so a resumed comparison still counts from the canary's start.
One record per service (a canary needs one revision serving everything, so a service has at most one).

Who watches is decided by a fenced lease per service (skills/leases.py): the watcher renews it while
it runs; a second bot process that finds it held does not watch; a holder that died lets it lapse after its
TTL, and the next process takes it. The record is removed when the watch ends; a process stopped mid-watch
leaves it for the next start (`resume_canaries` in handlers/canary_thread.py).
"""

from __future__ import annotations

import logging

from pydantic import BaseModel, Field, ValidationError

from skills.leases import Lease
from skills.observe.model_metrics import Snapshot
from skills.ports import ServiceInfo, Store
from skills.targets.canary import CanaryInfo

log = logging.getLogger(__name__)


class CanaryRecord(BaseModel):
    plan_id: str
    service: str
    target: str = ""  # the serving target's kind (skills/targets/registry.py)
    info: CanaryInfo
    channel: str = ""  # where the thread is (a Slack channel id; the console's name in the console)
    thread_ts: str = ""
    comparison_ts: str = ""  # the comparison message edited in place ('' until posted)
    user_id: str = ""  # who confirmed the canary
    started: float  # on the watch's clock (skills/clock.py): epoch seconds in production
    min_requests: int
    auto_rollback: bool
    firsts: dict[str, Snapshot | None] = Field(default_factory=dict)  # role -> the first /metrics scrape


class CanaryWatches:
    """The records of running canary watches, and the lease that says which process watches each."""

    def __init__(self, store: Store, key: str, lease_ttl_ms: int) -> None:
        self.store = store
        self.key = key  # a hash: service -> record JSON
        self.lease_ttl_ms = lease_ttl_ms

    def lease(self, service: str, owner: str | None = None) -> Lease:
        return Lease(self.store, f"{self.key}:lease:{service}", self.lease_ttl_ms, owner)

    async def save(self, record: CanaryRecord) -> None:
        await self.store.hset(self.key, record.service, record.model_dump_json())

    async def get(self, service: str) -> CanaryRecord | None:
        raw = await self.store.hget(self.key, service)
        return self._parse(service, raw) if raw else None

    async def all(self) -> list[CanaryRecord]:
        raw = await self.store.hgetall(self.key)
        out = []
        for service, value in (raw or {}).items():
            record = self._parse(_text(service), value)
            if record is not None:
                out.append(record)
        return sorted(out, key=lambda r: r.started)

    async def remove(self, record: CanaryRecord) -> None:
        """Drop the record if it is still this canary's (a newer canary on the service keeps its own)."""
        current = await self.get(record.service)
        if current is not None and current.plan_id == record.plan_id:
            await self.store.hdel(self.key, record.service)

    def _parse(self, service: str, raw: object) -> CanaryRecord | None:
        try:
            return CanaryRecord.model_validate_json(_text(raw))
        except ValidationError:
            log.warning("dropping an unreadable canary watch record for %s", service)
            return None


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def split_holds(svc: ServiceInfo, info: CanaryInfo) -> bool:
    """Traffic still splits between the stable revision and the canary (both above 0%)."""
    shares = {t.revision: t.percent for t in svc.traffic if t.revision}
    return shares.get(info.revision, 0) > 0 and shares.get(info.baseline, 0) > 0


def traffic_now(svc: ServiceInfo) -> str:
    """What the service's traffic shows, for a line in the thread."""
    shares = [t for t in svc.traffic if t.percent > 0]
    if not shares:
        return "no revision takes traffic"
    return ", ".join(f"`{t.revision or 'latest'}` {t.percent}%" for t in shares)
