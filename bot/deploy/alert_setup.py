"""Create or update, once, the notification channel and the alert policies that feed the bot.

Through google-cloud-monitoring's NotificationChannelServiceClient and AlertPolicyServiceClient. What setup owns
carries the user label managed-by=gemma-sre (and which policy it is), so a second run finds it and changes
nothing when nothing differs; a policy whose thresholds changed is updated in place, keeping its condition
names (the API's advice for small changes). A dry run asks only List* questions and says which ones it could
not ask (with Google's reason) instead of claiming everything is missing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from google.api_core import exceptions as gexc
from google.cloud.monitoring_v3 import (
    AlertPolicy,
    AlertPolicyServiceClient,
    NotificationChannel,
    NotificationChannelServiceClient,
)

from bot.deploy.alert_policies import MANAGED_BY, AlertThresholds, desired_policies


@dataclass
class Outcome:
    lines: list[str] = field(default_factory=list)
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    unchecked: list[str] = field(default_factory=list)  # questions a dry run could not ask, with the reason

    def say(self, line: str) -> None:
        self.lines.append(line)


def redact_url(url: str) -> str:
    """The webhook URL with its auth_token shown as `…` (it is a secret)."""
    return re.sub(r"(auth_token=)[^&]+", r"\1…", url)


def check_webhook_url(url: str) -> str | None:
    """Why this URL cannot feed the bot's /alerts/gcp, or None."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.netloc:
        return f"the webhook URL must be https://BOT_URL/alerts/gcp?auth_token=TOKEN, got {redact_url(url)!r}"
    if not parts.path.endswith("/alerts/gcp"):
        return "the webhook URL must end in /alerts/gcp (the bot's Cloud Monitoring route)"
    if not parse_qs(parts.query).get("auth_token", [""])[0]:
        return "the webhook URL needs ?auth_token=TOKEN (the bot's ALERT_WEBHOOK_TOKEN, secret alert-webhook-token)"
    return None


def desired_channel(kind: str, target: str, service: str) -> NotificationChannel:
    labels = {"url": target} if kind == "webhook" else {"topic": target}
    return NotificationChannel(
        type_="webhook_tokenauth" if kind == "webhook" else "pubsub",
        display_name=f"gemma-sre alerts ({service}, {kind})",
        labels=labels,
        user_labels={"managed-by": MANAGED_BY},
    )


def _comparable(p: AlertPolicy) -> dict[str, Any]:
    """The fields setup sets, without what the service fills in (names, records, enabled)."""
    d = AlertPolicy.to_dict(p)
    for k in ("name", "creation_record", "mutation_record", "enabled", "validity"):
        d.pop(k, None)
    for c in d.get("conditions", []):
        c.pop("name", None)
    d["notification_channels"] = sorted(d.get("notification_channels", []))
    return d


def _describe(exc: gexc.GoogleAPICallError | Exception) -> str:
    if isinstance(exc, gexc.GoogleAPICallError):
        return f"{exc.grpc_status_code.name if exc.grpc_status_code else exc.code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


def policy_details(policy: AlertPolicy) -> list[str]:
    """What a policy watches (a dry run shows it under each policy it would create): per condition, when it fires
    and the filter or query it reads."""
    lines = [f"severity: {AlertPolicy.Severity(policy.severity).name.lower()}"]
    for c in policy.conditions:
        if "condition_threshold" in c:
            t = c.condition_threshold
            lasting = int(t.duration.total_seconds()) if t.duration else 0
            lines += [f"when: {c.display_name}" + (f", for {lasting} s" if lasting else ""), f"metric: {t.filter}"]
        elif "condition_prometheus_query_language" in c:
            lines += [f"when: {c.display_name}", f"PromQL: {c.condition_prometheus_query_language.query}"]
        elif "condition_matched_log" in c:
            lines += [f"when: {c.display_name}", f"log filter: {c.condition_matched_log.filter}"]
        else:
            lines.append(f"when: {c.display_name}")
    return lines


def reconcile(
    *,
    project: str,
    service: str,
    channel_kind: str,
    channel_target: str,
    thresholds: AlertThresholds,
    channels: NotificationChannelServiceClient | None,
    policies: AlertPolicyServiceClient | None,
    dry_run: bool,
    timeout_s: float = 30.0,
    unasked: str = "no client",
) -> Outcome:
    """`channels` and `policies` None (a dry run without credentials): nothing is asked, each question is listed
    as unchecked with `unasked` as its reason, and everything is shown as it would be created if absent."""
    out = Outcome()
    parent = f"projects/{project}"
    shown = redact_url(channel_target)
    want_channel = desired_channel(channel_kind, channel_target, service)

    if (channels is None or policies is None) and not dry_run:
        raise ValueError("reconcile: a run that changes things needs both clients")

    def ask(what: str, call: Callable[[], list[Any]]) -> list[Any] | None:
        if channels is None or policies is None:
            out.unchecked.append(f"{what} ({unasked})")
            return None
        try:
            return call()
        except (gexc.GoogleAPICallError, gexc.RetryError) as exc:
            if not dry_run:
                raise
            out.unchecked.append(f"{what} ({_describe(exc)})")
            return None

    def list_channels() -> list[Any]:
        assert channels is not None  # ask() calls this only with clients
        return list(channels.list_notification_channels(name=parent, timeout=timeout_s))

    def list_policies() -> list[Any]:
        assert policies is not None
        return list(policies.list_alert_policies(name=parent, timeout=timeout_s))

    existing_channels = ask("list notification channels", list_channels)
    channel_name = ""
    if existing_channels is not None:
        assert channels is not None  # an answer came from it
        for ch in existing_channels:
            if ch.user_labels.get("managed-by") == MANAGED_BY and ch.type_ == want_channel.type_:
                channel_name = ch.name
                if dict(ch.labels) != dict(want_channel.labels):
                    want_channel.name = ch.name
                    if dry_run:
                        out.say(f"would update notification channel {ch.name} -> {shown}")
                    else:
                        channels.update_notification_channel(notification_channel=want_channel, timeout=timeout_s)
                        out.say(f"updated notification channel {ch.name} -> {shown}")
                    out.updated += 1
                else:
                    out.say(f"unchanged: notification channel {ch.name} ({shown})")
                    out.unchanged += 1
                break
    if not channel_name:
        verb = "would create" if existing_channels is not None else "could not check, so would create if absent:"
        if dry_run:
            out.say(f"{verb} notification channel {want_channel.type_} -> {shown}")
            channel_name = f"{parent}/notificationChannels/NEW"
        else:
            assert channels is not None  # a real run has both clients (checked above)
            made = channels.create_notification_channel(
                name=parent, notification_channel=want_channel, timeout=timeout_s
            )
            channel_name = made.name
            out.say(f"created notification channel {made.name} ({want_channel.type_} -> {shown})")
        out.created += 1

    want = desired_policies(service, thresholds, [channel_name])
    existing = ask("list alert policies", list_policies)
    by_key = {
        p.user_labels.get("gemma-sre-policy", ""): p
        for p in (existing or [])
        if p.user_labels.get("managed-by") == MANAGED_BY
    }
    for key, policy in want.items():
        have = by_key.get(key)
        if existing is None:
            out.say(f"could not check, so would create if absent: alert policy {policy.display_name!r}")
            out.lines.extend(f"    {line}" for line in policy_details(policy))
            out.created += 1
        elif have is None:
            if dry_run:
                out.say(f"would create alert policy {policy.display_name!r}")
                out.lines.extend(f"    {line}" for line in policy_details(policy))
            else:
                assert policies is not None
                made = policies.create_alert_policy(name=parent, alert_policy=policy, timeout=timeout_s)
                out.say(f"created alert policy {made.name} ({policy.display_name})")
            out.created += 1
        elif _comparable(have) == _comparable(policy):
            out.say(f"unchanged: alert policy {have.name} ({policy.display_name})")
            out.unchanged += 1
        else:
            policy.name = have.name
            for new, old in zip(policy.conditions, have.conditions, strict=False):
                if new.display_name == old.display_name or len(policy.conditions) == 1:
                    new.name = old.name
            if dry_run:
                out.say(f"would update alert policy {have.name} ({policy.display_name})")
            else:
                assert policies is not None
                policies.update_alert_policy(alert_policy=policy, timeout=timeout_s)
                out.say(f"updated alert policy {have.name} ({policy.display_name})")
            out.updated += 1
    return out
