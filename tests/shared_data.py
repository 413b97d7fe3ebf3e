"""Where the example data lives: `shared/data` beside the checkout (as in CI), or $GEMMA_SRE_SHARED_DATA."""

from __future__ import annotations

import os
from pathlib import Path

SHARED_DATA = Path(os.environ.get("GEMMA_SRE_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
SCENARIOS = SHARED_DATA / "scenarios"
ALERTS = SHARED_DATA / "alerts"
LOGHUB = SHARED_DATA / "loghub"

if not SCENARIOS.is_dir():
    raise RuntimeError(f"example data not found at {SHARED_DATA}: set GEMMA_SRE_SHARED_DATA to shared/data")
