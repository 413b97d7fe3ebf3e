"""Plans for write actions: what will change, stored in Redis for a limited time, confirmed at most once.

A plan is computed when someone asks for a write (a command or a plan button) and executed only when a
deployer confirms it. Storing the computed spec (not just the request) means what runs is exactly what was
shown. The plan key's TTL is the confirm window; a separate claim key (SET NX) makes confirm one-shot.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any, Literal

from pydantic import BaseModel, Field

from skills.deploy.changes import FieldChange
from skills.deploy.preflight_check import PreflightCheck, preflight_blocked
from skills.deploy.profiles import DEFAULT_TARGET
from skills.ports import Store

PlanKind = Literal["deploy", "redeploy", "scale", "rollback", "destroy", "promote"]
Verdict = Literal["fits", "fits_with_changes", "does_not_fit"]


class Plan(BaseModel):
    id: str = Field(default_factory=lambda: secrets.token_hex(6))
    kind: PlanKind
    service: str
    summary: str  # one line: what will happen
    params: dict[str, Any] = Field(default_factory=dict)  # the request, as audited
    added: dict[str, Any] = Field(default_factory=dict)  # what it changes beyond the request (the planner's)
    created_by: str = ""
    channel_id: str = ""
    # Where it was asked from when that was a thread (a button in an incident thread): the plan, its
    # progress and its result are posted there. Empty for a slash command (its own message starts a thread).
    thread_ts: str = ""
    message_ts: str = ""  # the plan message itself, once posted by the bot (edited on confirm/cancel)
    incident_id: str = ""  # the incident whose thread it came from: a short line there when it completes
    created_at: float = Field(default_factory=time.time)
    expires_at: float = 0.0
    verdict: Verdict | None = None  # the capacity planner's, when it applies
    fit_lines: list[str] = Field(default_factory=list)  # the planner's figures, for display
    fit_changes: list[str] = Field(default_factory=list)  # what the planner says must change
    notes: list[str] = Field(default_factory=list)
    changes: list[FieldChange] = Field(default_factory=list)
    gcloud: str = ""  # the equivalent command of the target's CLI (named by `cli`)
    cli: str = "gcloud"
    create: bool = False  # the service does not exist yet
    target: str = DEFAULT_TARGET  # the serving target's kind (skills/targets/port.py): it runs the plan
    spec: dict[str, Any] | None = None  # the target's spec document apply_service gets (None for destroy)
    base_fingerprint: str = ""  # the running spec at plan time; confirm refuses if it moved
    cold_start_s: float | None = None
    wait_budget_s: float = 0.0  # how long execution waits for the revision to become ready
    target_revision: str = ""  # rollback, promote
    canary: dict[str, Any] = Field(default_factory=dict)  # a canary deploy: skills/deploy/canary.py CanaryInfo
    preflight: list[PreflightCheck] = Field(default_factory=list)  # deploy/redeploy: skills/deploy/preflight.py
    # Other plans worth offering instead, as (params, label) of a plan button ('' label: named by its params):
    # the same redeploy built on the serving revision, or with what the capacity planner adds for it to fit.
    offers: list[tuple[dict[str, Any], str]] = Field(default_factory=list)
    refusal: str = ""  # why this plan cannot be confirmed as it is (besides the planner's verdict)

    def blocked(self) -> str:
        """Why this plan cannot be confirmed ('' when it can)."""
        if self.refusal:
            return self.refusal
        if self.verdict == "does_not_fit":
            return (
                "The capacity planner says this configuration does not fit; pick one of the alternatives and re-plan."
            )
        return preflight_blocked(self.preflight)

    def expired(self, now: float | None = None) -> bool:
        return bool(self.expires_at) and (now or time.time()) >= self.expires_at


class PlanStore:
    def __init__(self, store: Store, key_prefix: str, ttl_s: int) -> None:
        self._store = store
        self._prefix = key_prefix  # e.g. settings.key("plan")
        self.ttl_s = ttl_s

    def _key(self, plan_id: str) -> str:
        return f"{self._prefix}:{plan_id}"

    def _claim_key(self, plan_id: str) -> str:
        return f"{self._prefix}:{plan_id}:claim"

    async def save(self, plan: Plan) -> Plan:
        plan.expires_at = plan.created_at + self.ttl_s
        await self._store.set(self._key(plan.id), plan.model_dump_json(), ex=self.ttl_s)
        return plan

    async def set_message(self, plan: Plan, message_ts: str) -> None:
        """Remember the plan message (posted after the plan was stored), keeping the plan's own expiry."""
        plan.message_ts = message_ts
        left_ms = int((plan.expires_at - time.time()) * 1000)
        if left_ms > 0:
            await self._store.set(self._key(plan.id), plan.model_dump_json(), px=left_ms, xx=True)

    async def get(self, plan_id: str) -> Plan | None:
        if not plan_id or len(plan_id) > 64:
            return None
        raw = await self._store.get(self._key(plan_id))
        if not raw:
            return None
        plan = Plan.model_validate_json(raw)
        return None if plan.expired() else plan

    async def claim(self, plan_id: str, user_id: str) -> bool:
        """One-shot: True for the first caller only (a double click gets False)."""
        # Kept longer than the plan so a late second click still learns who confirmed it.
        return bool(await self._store.set(self._claim_key(plan_id), user_id, nx=True, ex=self.ttl_s * 4))

    async def claimed_by(self, plan_id: str) -> str | None:
        raw = await self._store.get(self._claim_key(plan_id))
        return str(raw) if raw else None

    async def unclaim(self, plan_id: str) -> None:
        await self._store.delete(self._claim_key(plan_id))

    def _progress_key(self, plan_id: str) -> str:
        return f"{self._prefix}:{plan_id}:progress"

    async def set_progress(self, plan_id: str, progress: dict[str, Any]) -> None:
        """The latest progress of a confirmed plan's write, for whoever follows it from another surface (MCP's
        plan_status); kept as long as the claim."""
        await self._store.set(self._progress_key(plan_id), json.dumps(progress), ex=self.ttl_s * 4)

    async def progress(self, plan_id: str) -> dict[str, Any] | None:
        if not plan_id or len(plan_id) > 64:
            return None
        raw = await self._store.get(self._progress_key(plan_id))
        return json.loads(raw) if raw else None

    async def discard(self, plan_id: str) -> bool:
        return bool(await self._store.delete(self._key(plan_id)))
