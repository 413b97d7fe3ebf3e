"""How much ordinary log text does redaction touch? Runs skills/logs/redact.py over the repo's real log corpora
(contain no secrets) and prints, per corpus, the lines it changed and what each change masked.

    python bench/redaction_ordinary.py [--show N]

Corpora: tests/data/loghub (Loghub 2k samples of 16 systems), tests/data/field_logs and field_logs_heldout
(public vLLM / Cloud Run reports), bot/sandbox/data/scenarios (Cloud Logging entries: each entry's text),
bot/sandbox/data/alerts (webhook payloads: every string in them). A changed line is listed with the marker
kinds it gained; every one is a false positive unless the line really quotes a credential.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skills.logs.redact import redact  # noqa: E402

_KIND = re.compile(r"\[REDACTED:([a-z_]+)\]")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def corpora() -> dict[str, list[str]]:
    data = ROOT / "tests" / "data"
    out: dict[str, list[str]] = {}
    out["loghub"] = [
        ln for f in sorted((data / "loghub").glob("*/*.log")) for ln in f.read_text(errors="replace").splitlines()
    ]
    for name in ("field_logs", "field_logs_heldout"):
        out[name] = [
            ln for f in sorted((data / name).glob("*.log")) for ln in f.read_text(errors="replace").splitlines()
        ]
    scen = ROOT / "bot" / "sandbox" / "data" / "scenarios"
    lines = []
    for f in sorted(scen.glob("*.jsonl")):
        for raw in f.read_text().splitlines():
            if raw.strip():
                e = json.loads(raw)
                lines.extend(_strings(e.get("textPayload") or e.get("jsonPayload") or ""))
    out["sandbox_scenarios"] = lines
    alerts = ROOT / "bot" / "sandbox" / "data" / "alerts"
    out["sandbox_alerts"] = [s for f in sorted(alerts.glob("*.json")) for s in _strings(json.loads(f.read_text()))]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--show", type=int, default=5, help="changed lines to print per corpus")
    args = ap.parse_args()
    total = changed_total = 0
    spent = 0.0
    for name, lines in corpora().items():
        t0 = time.perf_counter()
        outs = [redact(ln) for ln in lines]
        spent += time.perf_counter() - t0
        changed = [(ln, out) for ln, out in zip(lines, outs, strict=True) if out != ln]
        kinds = Counter(k for _, out in changed for k in _KIND.findall(out))
        total += len(lines)
        changed_total += len(changed)
        rate = len(changed) / max(1, len(lines))
        print(f"{name:20s} {len(lines):6d} lines  {len(changed):4d} changed ({rate:.3%})  {dict(kinds)}")
        for ln, out in changed[: args.show]:
            print(f"    - {ln[:160]}\n      + {out[:160]}")
    print(f"{'all':20s} {total:6d} lines  {changed_total:4d} changed ({changed_total / max(1, total):.3%})")
    print(f"redact(): {spent / max(1, total) * 1e6:.1f} us per line (one pass, this machine)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
