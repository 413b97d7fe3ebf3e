"""A plan for a write action: what will change, as a target's planner builds it and a deployer confirms it
(skills/deploy/plans.py stores it; skills/deploy/confirm.py runs it at most once)."""

from __future__ import annotations

import secrets
import time
from typing import Any, Literal

from pydantic import BaseModel, Field

from skills.serving.changes import FieldChange
from skills.serving.profiles import DEFAULT_TARGET
from skills.targets.preflight_check import PreflightCheck, preflight_blocked

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
    canary: dict[str, Any] = Field(default_factory=dict)  # a canary deploy: skills/targets/canary.py CanaryInfo
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
