"""Build labelled logs of network operating systems from napalm-logs' test messages (issue 32, outside Loghub).

    python bench/build_message_id_logs.py NAPALM_LOGS_CHECKOUT OUT_DIR

napalm-logs (https://github.com/napalm-automation/napalm-logs, Apache-2.0) keeps, per network OS and per event,
syslog messages of real devices as test inputs (tests/config/<os>/<event>/<case>/syslog.msg). These systems
print their own message identity in every line: Cisco-style `%FACILITY-SEVERITY-MNEMONIC:` (EOS, IOS, IOS-XR,
NX-OS) or Junos' `TAG_NAME:`. That identity is the ground truth here: lines with the same vendor message tag
come from one message definition, so they are one group (the vendor documents one template per tag).

The rule, fixed before any of these systems was scored (tests/data/logs_outside_loghub/manifest.json,
"message_id_systems"): each non-empty line of a syslog.msg is a record, in path order; its label is the first
vendor tag in it (`%?` then upper-case words joined by `_` or `-`, then an optional space and `:`); its content
(what a log parser is given, like Loghub's Content column) is the text after that tag. A record with no tag is
dropped and counted. The OS folders with at least MIN_RECORDS messages are systems; the split between tuning
and held-out is by sha256 of "napalm-logs/<os>" (the first half, rounded up, held out), recorded in the manifest.

The data is not committed here (third-party files stay out of this repository's commits): build it into a
folder and pass that folder to bench/log_grouping.py --message-ids DIR.
"""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from outside_systems import heldout_split

MIN_RECORDS = 8
TAG = re.compile(r"(?<![\w%-])(%?[A-Z][A-Z0-9]*(?:[_-][A-Z0-9]+)+) ?:")


def split_of(names: list[str]) -> dict[str, str]:
    return heldout_split(names, lambda _: "napalm-logs")


def records(repo: Path, rev: str = "HEAD") -> dict[str, list[tuple[str, str, str]]]:
    """Per OS: (raw line, label, content), in path order."""
    names = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", rev, "--name-only"], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    paths = sorted(n for n in names if n.startswith("tests/config/") and n.endswith("/syslog.msg"))
    out: dict[str, list[tuple[str, str, str]]] = {}
    dropped: Counter[str] = Counter()
    for p in paths:
        system = p.split("/")[2]
        text = subprocess.run(
            ["git", "-C", str(repo), "show", f"{rev}:{p}"], capture_output=True, text=True, check=True
        ).stdout
        for line in text.splitlines():
            line = line.strip()
            if not line:
                continue
            m = TAG.search(line)
            if m is None:
                dropped[system] += 1
                continue
            out.setdefault(system, []).append((line, m.group(1), line[m.end() :].strip()))
    for system, n in sorted(dropped.items()):
        print(f"{system}: {n} line(s) without a vendor tag dropped", file=sys.stderr)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    repo, out = Path(argv[1]), Path(argv[2])
    recs = records(repo)
    systems = sorted(s for s, r in recs.items() if len(r) >= MIN_RECORDS)
    split = split_of(systems)
    for system in systems:
        folder = out / split[system] / system
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{system}.log").write_text("".join(r[0] + "\n" for r in recs[system]), encoding="utf-8")
        with open(folder / f"{system}_structured.csv", "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["LineId", "Content", "EventId"])
            for i, (_, label, content) in enumerate(recs[system], 1):
                w.writerow([i, content, label])
        tags = len({r[1] for r in recs[system]})
        print(f"{system:<10} {split[system]:<8} {len(recs[system]):>4} records {tags:>4} tags")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
