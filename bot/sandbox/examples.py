"""Where the bundled example data lives (shipped inside the package, so a bare clone or a wheel has it).

- `data/scenarios/`: Cloud Logging entries (the shape `entries.list` returns) from a Cloud Run service serving
  vLLM, one scenario a file, with `manifest.json` naming the failure kinds a correct diagnosis reports.
- `data/alerts/`: alert webhook payloads (Cloud Monitoring schema 1.2, Alertmanager version 4).
Each folder's README says where its content comes from.
"""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
SCENARIOS = DATA / "scenarios"
ALERTS = DATA / "alerts"
