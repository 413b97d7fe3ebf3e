"""Build labelled logs from syslog-ng's pattern database examples (issue 32, outside Loghub, third batch).

    python bench/build_patterndb_logs.py PATTERNDB_GIT_DIR [OUT_DIR]
    (default OUT_DIR: bench/out/message_id_logs)

balabit/syslog-ng-patterndb (https://github.com/balabit/syslog-ng-patterndb) holds syslog-ng's db-parser rule
sets: XML files (.pdb, .xml), one <rule id="..."> per message pattern, each rule with <patterns> (one or more
patterns of the same message) and, for most rules, <examples><example><test_message program="...">LINE
</test_message>: log lines the rule's pattern is tested to match. One rule is one message definition, so the lines
of one rule are one group: the rule id is the ground truth.

The repository is read from its git directory (no work tree needed) at the commit recorded in
tests/data/logs_outside_loghub/manifest.json ("message_id_systems" -> "patterndb_source" -> "commit"). Its
files are third-party and are not committed here; neither is what this builds.

The rule, written here before any of these systems was built or scored:
- A record is one <test_message> element of a <rule>, in document order, files in path order. Its text is the
  element's text with XML entities unescaped (what an XML parser gives), whitespace as it is (not stripped; line
  breaks inside a record, as in Windows event texts, kept).
- Label: the id attribute of the <rule> the test message belongs to.
- Content (what a log parser is given, like Loghub's Content column): the test message text. The program
  attribute is NOT prepended (Loghub's Content holds no program name either).
- One system per pattern file, named "patterndb_" + the file's stem with every character outside [a-z0-9]
  (lower-cased) written "_" (applications/bind9/named.xml -> patterndb_named); a stem that already starts with
  "patterndb_" is not prefixed twice (patterndb-win2k8.xml -> patterndb_win2k8). When two files give the same
  name, each of them is named with its parent folder's name before the stem (access/sshd.pdb ->
  patterndb_access_sshd, applications/openssh/sshd.xml -> patterndb_openssh_sshd).
- A file with fewer than MIN_RECORDS records is not a system: dropped, counted and listed.
- Duplicates kept.
- Split of this batch alone: sha256("syslog-ng-patterndb/<system>") hex order, the first half (rounded up) held
  out; recorded in the manifest (systems with "batch": 3) before any of them is scored.

Output, the layout bench/log_grouping.py's load_message_ids reads: OUT_DIR/<split>/<system>/<system>.log (one
record a line; a line break inside a record is written there as the two characters backslash and n) and
<system>_structured.csv (LineId, Content, EventId; Content exactly the record's text, line breaks included).
What the manifest already records of a system (split, records, tags, structured_sha256) is checked: a difference
is an error.
"""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from outside_systems import differs, git, heldout_split, write_system

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "tests" / "data" / "logs_outside_loghub" / "manifest.json"
SOURCE_NAME = "syslog-ng-patterndb"
MIN_RECORDS = 8
BATCH = 3
NOT_NAME = re.compile(r"[^a-z0-9]")


def split_of(names: list[str]) -> dict[str, str]:
    """The split of this batch's systems: sha256 order, first half (rounded up) held out."""
    return heldout_split(names, lambda _: SOURCE_NAME)


def system_names(paths: list[str]) -> dict[str, str]:
    """path -> system name (the docstring's naming rule)."""

    def clean(s: str) -> str:
        return NOT_NAME.sub("_", s.lower())

    def stem(p: str) -> str:
        return clean(Path(p).stem)

    def name(s: str) -> str:
        return s if s.startswith("patterndb_") else f"patterndb_{s}"

    count = Counter(name(stem(p)) for p in paths)
    out = {}
    for p in paths:
        n = name(stem(p))
        if count[n] > 1:
            parent = clean(Path(p).parent.name)
            n = name(f"{parent}_{stem(p)}")
        out[p] = n
    if len(set(out.values())) != len(out):
        raise SystemExit("two pattern files still share a system name")
    return out


def records(git_dir: Path, commit: str) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """Per system: (its file, [(label, content)]) in document order; every pattern file, however few records."""
    listing = git(git_dir, "ls-tree", "-r", "--name-only", commit).decode().split("\n")
    paths = sorted(p for p in listing if p.endswith((".pdb", ".xml")))
    names = system_names(paths)
    out: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    for p in paths:
        root = ET.fromstring(git(git_dir, "show", f"{commit}:{p}"))
        recs: list[tuple[str, str]] = []
        for rule in root.iter("rule"):
            rule_id = rule.get("id")
            for message in rule.iter("test_message"):
                if rule_id is None:
                    raise SystemExit(f"{p}: a rule without an id has examples")
                recs.append((rule_id, message.text or ""))
        out[names[p]] = (p, recs)
    return out


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    git_dir = Path(argv[1])
    out = Path(argv[2]) if len(argv) == 3 else REPO / "bench" / "out" / "message_id_logs"
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))["message_id_systems"]
    commit = manifest["patterndb_source"]["commit"]
    recorded = {s["name"]: s for s in manifest["systems"] if s.get("batch") == BATCH}
    recs = records(git_dir, commit)
    systems = sorted(s for s, (_, r) in recs.items() if len(r) >= MIN_RECORDS)
    dropped = sorted((p, len(r)) for s, (p, r) in recs.items() if len(r) < MIN_RECORDS)
    split = split_of(systems)
    failed = False
    for system in systems:
        path, rows = recs[system]
        digest = write_system(out / split[system] / system, system, rows)
        tags = len({label for label, _ in rows})
        built = {"split": split[system], "records": len(rows), "tags": tags, "structured_sha256": digest}
        note = ""
        if differs(recorded.get(system), built):
            note, failed = "  DIFFERS FROM THE MANIFEST", True
        print(f"{system:<24} {split[system]:<8} {len(rows):>4} records {tags:>4} tags  {path}  {digest}{note}")
    missing = sorted(set(recorded) - set(systems))
    if missing:
        print(f"in the manifest but not built: {', '.join(missing)}", file=sys.stderr)
        failed = True
    print(f"dropped (fewer than {MIN_RECORDS} records): {len(dropped)} file(s)", file=sys.stderr)
    for path, n in dropped:
        print(f"  {path}: {n}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
