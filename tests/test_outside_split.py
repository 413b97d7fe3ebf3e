"""The held-out split of the labelled outside-Loghub systems (issue 32) follows the rule each batch fixed before it
was scored: sort the batch's systems by sha256 of "<source>/<system>", hold out the first half (rounded up).
Moving a system between halves after seeing a score would make the held-out figures mean nothing; this test
fails if the manifest's splits stop following the rule."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path

MANIFEST = Path(__file__).resolve().parent / "data" / "logs_outside_loghub" / "manifest.json"


def _source_key(system: dict[str, object]) -> tuple[str, str]:
    """(batch, the name hashed): the source prefix each batch's builder documents."""
    name, builder, batch = str(system["name"]), system.get("builder"), system.get("batch")
    if builder is None:
        return "napalm", f"napalm-logs/{name}"
    if builder == "bench/build_vendor_logs.py":
        return f"elastic-{batch or 1}", f"elastic-integrations/{name}"
    if builder == "bench/build_patterndb_logs.py":
        return "patterndb", f"syslog-ng-patterndb/{name}"
    if builder == "bench/build_ruleset_test_logs.py":
        return "rulesets", (f"wazuh/{name}" if name.startswith("wazuh_") else f"intake-formats/{name}")
    if builder == "bench/build_server_logs.py":
        return "servers", (f"beats/{name}" if name.startswith("beats_") else f"intake-formats/{name}")
    raise AssertionError(f"{name}: no split rule known for builder {builder}")


def test_every_batch_holds_out_the_first_half_by_sha256() -> None:
    systems = json.loads(MANIFEST.read_text(encoding="utf-8"))["message_id_systems"]["systems"]
    batches: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for s in systems:
        batch, key = _source_key(s)
        batches[batch].append((hashlib.sha256(key.encode()).hexdigest(), s["name"], s["split"]))
    assert set(batches) == {"napalm", "elastic-1", "elastic-2", "patterndb", "rulesets", "servers"}
    for batch, members in batches.items():
        members.sort()
        held = (len(members) + 1) // 2
        expected = ["heldout"] * held + ["tuning"] * (len(members) - held)
        assert [split for _, _, split in members] == expected, (batch, [(n, sp) for _, n, sp in members])
