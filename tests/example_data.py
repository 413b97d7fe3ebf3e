"""Example data the tests read: the bundled scenarios and alerts, and the Loghub samples in tests/data."""

from __future__ import annotations

from pathlib import Path

from bot.sandbox.examples import ALERTS, SCENARIOS

LOGHUB = Path(__file__).resolve().parent / "data" / "loghub"

__all__ = ["ALERTS", "LOGHUB", "SCENARIOS"]
