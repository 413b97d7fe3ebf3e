"""Canary deploys, as every target that splits traffic (capability `traffic_split`, skills/targets/port.py) has
them: the new revision takes a slice of traffic first, beside the revision serving now, each under a traffic tag.
What a canary plan sets up (CanaryInfo) is what the comparison (skills/deploy/canary_watch.py) and Promote / Roll
back work from. How a target splits its traffic is the target's: Cloud Run's is skills/targets/cloud_run/canary.py
(named revision, tagged REVISION traffic targets, cost and quota).

Sources: Knative serving's route validation (pkg/apis/serving/v1/route_validation.go), which Cloud Run's API
follows: tags and revision names are DNS-1035 labels.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skills.errors import InvalidInput, explain_error
from skills.ports import ServiceInfo

STABLE_TAG = "stable"
CANARY_TAG = "canary"
# Knative's DNS-1035 label rule for tags and revision names: lower-case letters, digits and '-', starting with a
# letter, not ending with '-', at most 63 characters.
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
MAX_LABEL = 63


class CanaryParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # A canary is a slice: half the traffic or less (more is a cut-over, not a canary).
    percent: int = Field(ge=1, le=50)


class CanaryInfo(BaseModel):
    """What a canary plan set up, for the comparison that follows it and for Promote / Roll back."""

    percent: int
    baseline: str  # the revision serving before, which keeps 100-N%
    revision: str  # the new revision's name
    min_instances: int = 0
    hourly_usd: float | None = None


class PromoteParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    revision: str = Field(min_length=1, max_length=MAX_LABEL)
    service: str | None = None


def canary_percent(value: Any) -> int:
    try:
        return CanaryParams(percent=value).percent
    except ValidationError as exc:
        # The person typed `--canary N` (an agent or MCP: `canary`): the error names that, not the model's field.
        said = "; ".join(explain_error({**err, "loc": ("canary",)}) for err in exc.errors()) + "."
        raise InvalidInput(
            f"Invalid canary: {said}", "`--canary N` sends N% of traffic (1 to 50) to the new revision."
        ) from None


Shares = list[tuple[str, int]]  # (revision, percent) of each revision that takes a share ('' : the latest)


def refuse_split(service: str, shares: Shares, why: str) -> None:
    """Refuse a write that needs one revision serving everything while traffic is split (a canary runs): `why`
    says what the write would do to the split. Every target's scale and canary say it in these words."""
    if len(shares) > 1:
        split = ", ".join(f"`{r or 'latest'}` {p}%" for r, p in shares)
        raise InvalidInput(
            f"Refused: traffic on `{service}` is split ({split}); {why}.",
            "Promote or roll back the running canary first (`/gemma rollback` or its buttons).",
        )


def serving_revision_of(service: str, shares: Shares) -> str:
    """The revision holding all traffic, or InvalidInput saying why a canary cannot start from here."""
    refuse_split(service, shares, "a canary compares one new revision with the one serving everything")
    if len(shares) == 1 and shares[0][1] == 100 and shares[0][0]:
        return shares[0][0]
    raise InvalidInput(
        f"Refused: no revision of `{service}` serves traffic, so a canary has nothing to compare with.",
        "Deploy without --canary first.",
    )


def serving_revision(info: ServiceInfo) -> str:
    return serving_revision_of(info.name, [(t.revision, t.percent) for t in info.traffic if t.percent > 0])
