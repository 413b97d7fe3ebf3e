"""The settings the incident pipeline reads (bot.settings.Settings has these and more; see it for each one)."""

from __future__ import annotations

from typing import Protocol


class IncidentSettings(Protocol):
    alert_channel_lease_ms: int
    alert_coalesce_interval_s: float
    alert_fix_check_s: float
    alert_group_window_s: int
    alert_header_debounce_s: float
    alert_max_attempts: int
    alert_reclaim_idle_ms: int
    alert_storm_edit_interval_s: float
    alert_storm_threshold_per_min: int
    key_prefix: str
    slack_alerts_channel: str
    slack_post_burst: int
    slack_post_per_s: float
    slack_update_per_min: float
    vllm_service_name: str
