"""Azure Monitor alerts in the Common Alert Schema, as action groups POST them to a webhook.

Sources (field names kept exactly as they are there):
- the schema: https://learn.microsoft.com/azure/azure-monitor/alerts/alerts-common-schema (MicrosoftDocs/
  azure-monitor-docs articles/azure-monitor/alerts/alerts-common-schema.md): `{"schemaId":
  "azureMonitorCommonAlertSchema", "data": {"essentials": {...}, "alertContext": {...}, "customProperties": {...}}}`;
  essentials `alertId` ("the unique resource ID that identifies the alert instance"), `alertRule`, `severity` (Sev0,
  Sev1, Sev2, Sev3 or Sev4), `signalType` (Metric, Log or Activity Log), `monitorCondition` (Fired when the alert
  fires, Resolved "when the underlying condition that caused the alert to fire clears"), `monitoringService`,
  `alertTargetIDs` (ARM ids of the affected targets; "for a log search alert defined on a Log Analytics workspace
  ... it's the respective workspace"), `configurationItems` (the affected resources; for log search alerts taken
  from the dimensions `_ResourceId`, `ResourceId`, `Resource`, `Computer`), `originAlertId`, `firedDateTime`,
  `resolvedDateTime`, `description`, `essentialsVersion`, `alertContextVersion`, `investigationLink`;
- the payloads: https://learn.microsoft.com/azure/azure-monitor/alerts/alerts-payload-samples (MicrosoftDocs/
  azure-monitor-docs articles/azure-monitor/alerts/alerts-payload-samples.md): the metric alert's alertContext
  (`conditionType`, `condition.allOf[]` with `metricName`, `operator`, `threshold`, `timeAggregation`, `dimensions`
  [{name, value}], `metricValue`, and `windowStartTime`/`windowEndTime`), the log search alert V2's (monitoringService
  "Log Alerts V2", conditionType "LogQueryCriteria", `allOf[]` with `searchQuery` and the same members), the activity
  log alert's (monitoringService "Activity Log - Administrative": `operationName`, `status`, `subStatus`, `caller`,
  `eventTimestamp`, `properties`); Budget and cost alerts send `alertRule`, `severity` and `signalType` as null;
- a failed ARM write in the activity log: `properties.statusCode` and `properties.statusMessage`, the latter ARM's
  error document as a JSON string `{"error":{"code":...,"message":...}}` (the RequestDisallowedByPolicy
  troubleshooting article, MicrosoftDocs/azure-docs articles/azure-resource-manager/.../
  resource-manager-policy-requestdisallowedbypolicy-error.md).

Identity: the fingerprint is `essentials.alertId`, the alert instance, which the Fired and the Resolved notification
of one instance share (the samples' Resolved payload is that instance with `resolvedDateTime` set). The condition
(what failed, skills/incidents/model.py groups by it) is the rule's name on the target resource, and on the revision
when the alert names one; the service is the Container Apps app the alert is about: the last segment of an
`alertTargetIDs` or `configurationItems` ARM id of type Microsoft.App/containerApps (the docs' ids are in lower case
as often as not: matched without case), else a dimension naming the app (`ContainerAppName_s`, the Log Analytics
column of the app's name: bot/adapters/aca_logs.py; `ContainerAppName` in the azure-monitor tables), else the first
configuration item's name. The revision: a dimension `RevisionName_s`/`RevisionName` (the same tables' column), or
`revisionName` (Container Apps' metric dimension, as recalled: not found in a source).

Severity: Sev0 critical, Sev1 error, Sev2 warning, Sev3 and Sev4 info. The levels' names (0 Critical, 1 Error,
2 Warning, 3 Informational, 4 Verbose) are as recalled from Azure Monitor's alert documentation and as public code
spells them ("Sev0 - Critical" ... "Sev4 - Verbose", public-code index file 1326576302), not found in Microsoft's
pages read. A Resolved notification closes the incident as Cloud Monitoring's closed incidents do (state "resolved",
`resolvedDateTime` as its end; the schema sets it only for metric alerts, so a log search alert's resolve has none).
An activity log alert on a failed write carries ARM's error in the label `armError`: a refused write runs nothing and
leaves no log line, so the incident's investigation diagnoses that error with the logs (skills/incidents/
investigation.py). Secrets in any field are masked as the alert is made (handlers/alerts/decode.py `redact_alert`),
after its identity is taken.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from handlers.alerts.decode import redact_alert
from skills.incidents.investigation import ALERT_ERROR_LABEL
from skills.incidents.model import Alert

SCHEMA_ID = "azureMonitorCommonAlertSchema"
FINGERPRINT_FIELDS = ("data.essentials.alertId",)
_SEVERITY = {"sev0": "critical", "sev1": "error", "sev2": "warning", "sev3": "info", "sev4": "info"}
# .../providers/Microsoft.App/containerApps/<name>[/...], in any case (the docs' samples lower-case resource ids)
_APP_ID = re.compile(r"/providers/microsoft\.app/containerapps/([^/]+)", re.IGNORECASE)
_APP_DIMENSIONS = ("containerappname_s", "containerappname")
_REVISION_DIMENSIONS = ("revisionname_s", "revisionname")
_MAX_CONTEXT_LINES = 5


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Essentials(_Lenient):
    alertId: str = Field(min_length=1)
    alertRule: str | None = None
    severity: str | None = None
    signalType: str | None = None
    monitorCondition: Literal["Fired", "Resolved"]
    monitoringService: str | None = None
    alertTargetIDs: list[str] | None = None
    configurationItems: list[str] | None = None
    originAlertId: str | None = None
    firedDateTime: datetime | None = None
    resolvedDateTime: datetime | None = None
    description: str | None = None
    essentialsVersion: str | None = None
    alertContextVersion: str | None = None
    investigationLink: str | None = None

    @field_validator("alertTargetIDs", "configurationItems", mode="before")
    @classmethod
    def _strings(cls, v: Any) -> Any:
        # Items are ARM ids or names; a null item is left out rather than the whole alert refused.
        return [str(x) for x in v if x is not None] if isinstance(v, list) else v


class Data(_Lenient):
    essentials: Essentials
    alertContext: dict[str, Any] | None = None
    customProperties: dict[str, Any] | None = None


class Notification(_Lenient):
    schemaId: str
    data: Data

    @field_validator("schemaId")
    @classmethod
    def _schema(cls, v: str) -> str:
        if v != SCHEMA_ID:
            raise ValueError(f"unsupported schemaId {v!r} (expected {SCHEMA_ID!r}: enable the common alert schema)")
        return v


def _dimensions(context: dict[str, Any]) -> dict[str, str]:
    """Every `condition.allOf[].dimensions[]` {name, value} of a metric or log search alert, names lower-cased."""
    out: dict[str, str] = {}
    cond = context.get("condition")
    for crit in (cond.get("allOf") or []) if isinstance(cond, dict) else []:
        if not isinstance(crit, dict):
            continue
        for d in crit.get("dimensions") or []:
            if isinstance(d, dict) and d.get("name") and d.get("value") is not None:
                out.setdefault(str(d["name"]).lower(), str(d["value"]))
    return out


def _app_of(ids: list[str]) -> str:
    return next((m.group(1) for i in ids if (m := _APP_ID.search(i))), "")


def _service(e: Essentials, dims: dict[str, str]) -> str:
    app = _app_of(e.alertTargetIDs or []) or _app_of(e.configurationItems or [])
    if app:
        return app
    app = next((dims[k] for k in _APP_DIMENSIONS if dims.get(k)), "")
    if app:
        return app
    first = next((c for c in e.configurationItems or [] if c.strip()), "")
    return first.rstrip("/").rsplit("/", 1)[-1]


def _criteria(context: dict[str, Any]) -> list[str]:
    """One line per metric or log search criterion: what was measured, its value and the threshold it crossed."""
    cond = context.get("condition")
    lines = []
    for crit in (cond.get("allOf") or []) if isinstance(cond, dict) else []:
        if not isinstance(crit, dict):
            continue
        what = crit.get("metricName") or crit.get("searchQuery") or ""
        agg = crit.get("timeAggregation") or ""
        value, op, limit = crit.get("metricValue"), crit.get("operator") or "", crit.get("threshold")
        text = f"{agg} {what}".strip()
        if value is not None:
            text += f" = {value}"
        if op and limit is not None:
            text += f" ({op} {limit})"
        if text:
            lines.append(text)
    return lines[:_MAX_CONTEXT_LINES]


def _arm_error(properties: Any) -> str:
    """A failed ARM write's error from an activity log event's properties: "Code: message" (statusMessage is ARM's
    error document as a JSON string), else the status message or code as sent."""
    if not isinstance(properties, dict):
        return ""
    raw = properties.get("statusMessage")
    if isinstance(raw, str) and raw.strip():
        try:
            doc = json.loads(raw)
        except ValueError:
            return raw.strip()
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict) and (err.get("code") or err.get("message")):
            return f"{err.get('code') or 'Error'}: {err.get('message') or ''}".strip()
        return raw.strip()
    return str(properties.get("statusCode") or "")


def _summary(e: Essentials, context: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """The alert's text and the context labels worth keeping: the rule's description, then what the alert context
    says happened (an activity log event's operation, status and ARM error; a metric or log criterion's value)."""
    parts = [e.description.strip()] if e.description and e.description.strip() else []
    labels: dict[str, str] = {}
    if context.get("operationName"):  # an activity log alert
        op, status = str(context["operationName"]), str(context.get("status") or "")
        labels.update({"operationName": op, "status": status})
        if context.get("caller"):
            labels["caller"] = str(context["caller"])
        error = _arm_error(context.get("properties"))
        parts.append(f"{op}: {status}" + (f" ({context['subStatus']})" if context.get("subStatus") else ""))
        if error:
            labels[ALERT_ERROR_LABEL] = error  # diagnosed with the logs (skills/incidents/investigation.py)
            parts.append(error)
    criteria = _criteria(context)
    parts += criteria
    if context.get("conditionType"):
        labels["conditionType"] = str(context["conditionType"])
    return "\n".join(p for p in parts if p), labels


def to_alerts(n: Notification) -> list[Alert]:
    e = n.data.essentials
    context = n.data.alertContext or {}
    dims = _dimensions(context)
    service = _service(e, dims)
    revision = next((dims[k] for k in _REVISION_DIMENSIONS if dims.get(k)), "")
    rule = e.alertRule or e.monitoringService or "Azure Monitor alert"
    summary, context_labels = _summary(e, context)
    target = (e.alertTargetIDs or [""])[0]
    condition = f"{rule} on {service}" if service else rule
    labels = {
        **{str(k): str(v) for k, v in (n.data.customProperties or {}).items()},
        **context_labels,
        **{f"dimension.{k}": v for k, v in dims.items()},
        "signalType": e.signalType or "",
        "monitoringService": e.monitoringService or "",
        "target": target,
    }
    resolved = e.monitorCondition == "Resolved"
    return [
        redact_alert(  # identity from the raw alert id, rule and app above, then every text field masked
            Alert(
                source="azure",
                condition=f"{condition} @ {revision}" if revision else condition,
                fingerprint=e.alertId,
                state="resolved" if resolved else "firing",
                name=rule,
                service=service,
                severity=_SEVERITY.get((e.severity or "").strip().lower(), "unknown"),
                summary=summary,
                started_at=e.firedDateTime,
                ended_at=(e.resolvedDateTime or None) if resolved else None,
                url=e.investigationLink or "",
                revision=revision,
                labels={k: v for k, v in labels.items() if v},
            )
        )
    ]
