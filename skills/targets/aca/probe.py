"""The startup probe an ACA deploy gets: long enough for vLLM's cold start, within ACA's probe limits."""

from __future__ import annotations

import math

from skills.capacity.aca_catalog import AcaCatalog
from skills.errors import InvalidInput
from skills.targets.aca.spec import StartupProbe

PROBE_MARGIN = 1.5  # the cold start is an estimate: give it half again before ACA restarts the replica


def startup_probe(
    cold_start_s: float, aca: AcaCatalog, failure_threshold: int | None = None, period_s: int | None = None
) -> StartupProbe:
    """Budget = initial delay + period x failure threshold, aimed at PROBE_MARGIN x the cold start and capped by
    ACA's limits (aca.yaml `probe_limits`). An explicit threshold or period outside them is refused."""
    lim = aca.probe_limits
    threshold_lim, period_lim = lim["failureThreshold"], lim["periodSeconds"]
    for name, value, rng in (
        ("--startup-failure-threshold", failure_threshold, threshold_lim),
        ("--startup-period-s", period_s, period_lim),
    ):
        if value is not None and not rng.min <= value <= rng.max:
            raise InvalidInput(
                f"{name} {value} is outside what ACA allows for a probe ({rng.min} to {rng.max}).",
                f"Use {rng.min}..{rng.max} ({aca.cite(aca.probe_source)}).",
            )
    initial = lim["initialDelaySeconds"].min  # vLLM answers /health only once loaded: the threshold does the waiting
    want = max(cold_start_s * PROBE_MARGIN - initial, 1.0)
    if period_s is None:
        # the shortest period whose most failures still covers the wait: ready as soon as vLLM is
        threshold_max = failure_threshold or threshold_lim.max
        period_s = min(period_lim.max, max(period_lim.min, 10, math.ceil(want / threshold_max)))
    if failure_threshold is None:
        failure_threshold = min(threshold_lim.max, max(threshold_lim.min, math.ceil(want / period_s)))
    timeout_lim = lim["timeoutSeconds"]
    timeout = min(timeout_lim.max, max(timeout_lim.min, min(5, period_s)))
    return StartupProbe(
        initial_delay_s=initial, period_s=period_s, failure_threshold=failure_threshold, timeout_s=timeout
    )


def limits_text(aca: AcaCatalog) -> str:
    """ACA's longest startup wait, as plans say it: initial delay + failures x period at their maxima."""
    lim = aca.probe_limits
    return (
        f"{lim['initialDelaySeconds'].max} s + {lim['failureThreshold'].max} x {lim['periodSeconds'].max} s = "
        f"{aca.max_startup_window_s()} s ({aca.cite(aca.probe_source)})"
    )
