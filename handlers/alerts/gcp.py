"""Google Cloud Monitoring webhook notifications (schema "1.2", older "1.x", and the console's test notice).

Fingerprint field: `incident.incident_id` (stable across the open/closed notifications of one incident). Secrets in
any field are masked as the alert is made (handlers/alerts/decode.py `redact_alert`), after its identity is taken.
Condition (what failed; skills/incidents/model.py groups by it): the policy and condition names on the monitored
resource's revision. Cloud Monitoring opens an incident per time series that meets a condition and closes it
when the condition stops being met (https://cloud.google.com/monitoring/alerts/concepts-indepth, "Number of
open incidents per policy"; https://cloud.google.com/monitoring/alerts/incidents-events); for a Cloud Run
revision resource the series is the revision, so the same policy failing on a new revision (a new deploy) is a
new failure, while re-notifications of one incident keep its id.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from handlers.alerts.decode import redact_alert
from skills.incidents.model import Alert, normalise_severity

FINGERPRINT_FIELDS = ("incident.incident_id",)


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Resource(_Lenient):
    type: str = ""
    labels: dict[str, str] = Field(default_factory=dict)


class Documentation(_Lenient):
    content: str = ""
    subject: str = ""


class Incident(_Lenient):
    incident_id: str = Field(min_length=1)
    state: str
    policy_name: str = ""
    condition_name: str = ""
    severity: str | None = None
    started_at: int | None = None
    ended_at: int | None = None
    summary: str = ""
    url: str = ""
    resource: Resource | None = None
    # the metric type and the metric labels the condition kept (schema 1.2); vLLM's series (prometheus_target,
    # through Cloud Run's Prometheus sidecar) carry the revision here as revision_name, not on the resource
    metric: Resource | None = None
    resource_display_name: str = ""
    documentation: Documentation | str | None = None
    policy_user_labels: dict[str, str] | None = None

    @field_validator("state")
    @classmethod
    def _state(cls, v: str) -> str:
        v = v.lower()
        if v not in {"open", "closed"}:
            raise ValueError("must be 'open' or 'closed'")
        return v

    @field_validator("started_at", "ended_at")
    @classmethod
    def _epoch(cls, v: int | None) -> int | None:
        return None if v is None else epoch_seconds(v)

    @field_validator("policy_user_labels", mode="before")
    @classmethod
    def _labels(cls, v: Any) -> Any:
        # Label values are strings in practice; coerce anything else rather than reject the whole alert.
        return {str(k): str(x) for k, x in v.items()} if isinstance(v, dict) else v


class Notification(_Lenient):
    version: str
    incident: Incident

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if v != "test" and not v.startswith("1."):
            raise ValueError(f"unsupported schema version {v!r} (expected '1.2' or 'test')")
        return v


# Unix seconds (the schema's unit) up to this; milliseconds (a common sender bug) from MS_FROM up to their
# equivalent. Anything else -- negative, 10**20, the gap between -- is not a time and gets a 400 naming the field.
MAX_S = 4_102_444_800  # 2100-01-01T00:00:00Z
MS_FROM = 100_000_000_000  # in seconds this would be the year 5138: read as milliseconds (1973 onwards)


def epoch_seconds(v: int) -> int:
    """`v` as Unix seconds: 0 stays 0 (the test notification's "unset"), milliseconds are converted."""
    if 0 <= v <= MAX_S:
        return v
    if MS_FROM <= v <= MAX_S * 1000:
        return v // 1000
    raise ValueError("not a Unix time in seconds (or milliseconds) between 1970 and 2100")


def _when(epoch: int | None) -> datetime | None:
    # The test notification sends 0 for "unset"; the validator already bounded the value.
    return datetime.fromtimestamp(epoch, UTC) if epoch else None


def to_alerts(n: Notification) -> list[Alert]:
    inc = n.incident
    labels = dict(inc.resource.labels) if inc.resource else {}
    user = inc.policy_user_labels or {}
    # Cloud Run's Prometheus sidecar names the service as `namespace` on cluster "__run__" (run-gmp-sidecar)
    run_namespace = labels.get("namespace", "") if labels.get("cluster") == "__run__" else ""
    service = labels.get("service_name") or user.get("service") or run_namespace
    doc = inc.documentation
    summary = inc.summary or (doc if isinstance(doc, str) else doc.content if doc else "")
    metric_labels = dict(inc.metric.labels) if inc.metric else {}
    revision = labels.get("revision_name") or metric_labels.get("revision_name", "")
    condition = " / ".join(x for x in (inc.policy_name, inc.condition_name) if x) or "Cloud Monitoring alert"
    return [
        redact_alert(  # identity from the raw ids and names above, then every text field masked
            Alert(
                source="gcp",
                condition=f"{condition} @ {revision}" if revision else condition,
                fingerprint=inc.incident_id,
                state="firing" if inc.state == "open" else "resolved",
                name=inc.policy_name or inc.condition_name or "Cloud Monitoring alert",
                service=service,
                severity=normalise_severity(inc.severity or user.get("severity")),
                summary=summary,
                started_at=_when(inc.started_at),
                ended_at=_when(inc.ended_at),
                url=inc.url,
                revision=revision,
                labels={**user, **{f"resource.{k}": v for k, v in labels.items()}},
                test=n.version == "test",
            )
        )
    ]
