"""Prometheus Alertmanager webhooks (version "4": grouped `alerts[]`).

Fingerprint field: each alert's `fingerprint` (Alertmanager's hash of its label set), so one delivery can
carry several alerts, each deduplicated on its own. Secrets in any field are masked as the alert is made
(handlers/alerts/decode.py `redact_alert`), after its identity is taken.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from handlers.alerts.decode import redact_alert
from skills.incidents.model import Alert, normalise_severity

FINGERPRINT_FIELDS = ("alerts[].fingerprint",)
SERVICE_LABELS = ("service", "service_name", "job")


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class AmAlert(_Lenient):
    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: datetime | None = None
    endsAt: datetime | None = None
    generatorURL: str = ""
    fingerprint: str = Field(min_length=1)


class Webhook(_Lenient):
    version: str
    status: Literal["firing", "resolved"] | None = None
    receiver: str = ""
    externalURL: str = ""
    # How many alerts of the group Alertmanager left out (receiver `max_alerts`); shown in the thread.
    # https://prometheus.io/docs/alerting/latest/configuration/#webhook_config ("truncatedAlerts")
    truncatedAlerts: int = Field(default=0, ge=0)
    alerts: list[AmAlert] = Field(max_length=1000)

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if v != "4":
            raise ValueError(f"unsupported webhook version {v!r} (expected '4')")
        return v


def _real(t: datetime | None) -> datetime | None:
    # Alertmanager sends endsAt "0001-01-01T00:00:00Z" while an alert fires.
    return t if t is not None and t.year > 1970 else None


def to_alerts(w: Webhook) -> list[Alert]:
    base = w.externalURL.rstrip("/")
    out = []
    for a in w.alerts:
        name = a.labels.get("alertname", "Alertmanager alert")
        service = next((a.labels[k] for k in SERVICE_LABELS if a.labels.get(k)), "")
        out.append(
            redact_alert(  # identity from the raw fingerprint and alertname, then every text field masked
                Alert(
                    source="alertmanager",
                    fingerprint=a.fingerprint,
                    state=a.status,
                    name=name,
                    service=service,
                    severity=normalise_severity(a.labels.get("severity")),
                    summary=a.annotations.get("summary") or a.annotations.get("description", ""),
                    started_at=_real(a.startsAt),
                    ended_at=_real(a.endsAt) if a.status == "resolved" else None,
                    url=f"{base}/#/alerts" if base else a.generatorURL,
                    revision=a.labels.get("instance", "") if service else "",
                    labels=a.labels,
                    truncated_alerts=w.truncatedAlerts,
                    condition=name,  # alertname: the same rule firing on more instances is one failure
                )
            )
        )
    return out


def validate_isolating(doc: object) -> tuple[Webhook, list[str]]:
    """The webhook with its valid alerts, and one reason per alert left out: one bad alert in a group does not
    lose the others. Raises ValidationError when the envelope itself is wrong or no alert is valid."""
    try:
        return Webhook.model_validate(doc), []
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        alerts = doc.get("alerts") if isinstance(doc, dict) else None
        per_alert = [
            e for e in errors if e["loc"][:1] == ("alerts",) and len(e["loc"]) > 1 and isinstance(e["loc"][1], int)
        ]
        bad = {int(e["loc"][1]) for e in per_alert}
        if not isinstance(doc, dict) or not isinstance(alerts, list) or len(per_alert) < len(errors):
            raise  # the envelope is wrong
        if len(bad) >= len(alerts):
            raise  # nothing in it is usable

        def why(i: int) -> str:
            return "; ".join(
                f"{'.'.join(map(str, e['loc'][2:])) or 'alert'}: {e['msg']}" for e in per_alert if e["loc"][1] == i
            )

        reasons = [f"alerts.{i}: {why(i)}" for i in sorted(bad)]
        kept = [a for i, a in enumerate(alerts) if i not in bad]
        return Webhook.model_validate({**doc, "alerts": kept}), reasons
