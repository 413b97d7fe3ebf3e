"""Alerts that arrive as Pub/Sub messages (no public URL): the message data is the JSON a webhook would POST.

Cloud Monitoring's Pub/Sub notification channel publishes the incident notification as the message data
(https://cloud.google.com/monitoring/support/notification-options, "Pub/Sub"); an Alertmanager webhook body
relayed onto a topic is accepted too. Parsing uses the webhooks' own models (handlers/alerts/gcp.py,
alertmanager.py), so both paths fingerprint and dedup identically.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

from handlers.alerts import alertmanager, gcp
from handlers.alerts.decode import Undecodable, load_alert_json
from skills.incidents.model import Alert

MAX_DATA_BYTES = 256 * 1024
log = logging.getLogger(__name__)


class MalformedAlert(ValueError):
    """The message cannot become an alert; retrying it would never help (ack it and say why)."""


def to_alerts(data: bytes) -> list[Alert]:
    if not data.strip():
        raise MalformedAlert("empty message data: expected a Cloud Monitoring incident notification (JSON)")
    if len(data) > MAX_DATA_BYTES:
        raise MalformedAlert(f"message data is {len(data)} bytes; alerts are at most {MAX_DATA_BYTES}")
    try:
        doc = load_alert_json(data)
    except Undecodable as exc:
        raise MalformedAlert(f"message data is not JSON we can read ({exc})") from None
    if not isinstance(doc, dict):
        raise MalformedAlert("message data is JSON but not an object")
    try:
        if "incident" in doc:
            return gcp.to_alerts(gcp.Notification.model_validate(doc))
        if "alerts" in doc:
            webhook, rejected = alertmanager.validate_isolating(doc)
            for reason in rejected:  # the rest of the group goes on
                log.warning("Alertmanager alert left out of a Pub/Sub message: %s", reason)
            return alertmanager.to_alerts(webhook)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = ".".join(str(p) for p in first["loc"]) or "body"
        raise MalformedAlert(f"invalid alert payload: {loc}: {first['msg']}") from None
    raise MalformedAlert("neither a Cloud Monitoring incident ('incident') nor an Alertmanager webhook ('alerts')")
