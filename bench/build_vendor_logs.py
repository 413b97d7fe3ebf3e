"""Build labelled logs of network devices from elastic/integrations' pipeline test logs (issue 32, outside Loghub).

    python bench/build_vendor_logs.py [SOURCES_DIR [OUT_DIR]]
    (defaults: bench/out/sources/elastic-integrations and bench/out/message_id_logs)

elastic/integrations (https://github.com/elastic/integrations, Elastic License 2.0) keeps, per package, the log
lines its ingest pipelines are tested on (packages/<pkg>/data_stream/<ds>/_dev/test/pipeline/test-*.log), many of
them lines of real devices. These devices print their own message identity in every line: Cisco IOS / NX-OS /
wireless controllers `%FACILITY[-SUB]-SEVERITY-MNEMONIC:`, Cisco ASA and FTD `%ASA-<sev>-<6 digits>:` (one
catalogue for both). One message id is one message definition in the vendor's catalogue, so one template: the id
is the ground truth.

The files were transcribed whole through the search tool's read_file (the repository is too large to fetch) into
SOURCES_DIR/<commit>/<path>; tests/data/logs_outside_loghub/manifest.json ("message_id_systems", records with
"source": "elastic/integrations") holds, per file, the commit read_file reported, its character count and the
sha256 of the transcription, which this builder checks before using a file. Third-party files are not committed.

The rule, written here before any of these systems was built or scored:
- A system is one vendor catalogue: the files of its packages (SYSTEMS), in path order, each line a record.
- Label: the vendor message id found by that vendor's regex (VENDOR_ID). Cisco-style tags: the last tag in the
  line (a wrapper such as `%IOSXE-6-PLATFORM: ... %FW-6-DROP_PKT: ...` forwards a message that carries its own
  tag; the innermost tag names the message). ASA/FTD: the 6-digit message number (the `%ASA-`/`%FTD-` prefix and
  the severity are not part of it: ASA and FTD share the catalogue).
- Content (what a log parser is given, like Loghub's Content column): the text after the id and its colon,
  stripped.
- Dropped and counted, per reason:
  - no id: the line carries no vendor message id;
  - placeholder: ids invented by the package's test authors (`FOO-6-BAR`), not vendor messages;
  - wrapper: ids whose text is another program's or a user's free text, not one message definition (mnemonics
    SYSTEM_MSG, Q_IND, RRM_LOGMSG; `HA_EM-<sev>-LOG`);
  - field list: content that is a field list whose fields vary per line, not a template: ASA/FTD 430001-430005
    (FTD connection, intrusion, file and malware events), CEF or LEEF content, or content with three or more
    `key=value` tokens.
- Exact-duplicate lines are kept as they are.
- Split: sha256("elastic-integrations/<system>") order, the first half (rounded up) held out (SPLIT, recorded in
  the manifest before any of these systems was scored).

Output, the layout bench/log_grouping.py's load_message_ids reads: OUT_DIR/<split>/<system>/<system>.log (the
records as they are) and <system>_structured.csv (LineId, Content, EventId).
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "tests" / "data" / "logs_outside_loghub" / "manifest.json"
SOURCE = "elastic/integrations"
SOURCE_NAME = "elastic-integrations"

# system -> the packages whose test logs make it (one vendor catalogue each)
SYSTEMS = {
    "cisco_aironet": ("cisco_aironet",),
    "cisco_asa": ("cisco_asa", "cisco_ftd"),
    "cisco_ios": ("cisco_ios",),
    "cisco_nexus": ("cisco_nexus",),
}
CISCO_TAG = re.compile(r"%([A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*-[0-7A-Z]-[A-Za-z0-9_]+) ?:")
ASA_ID = re.compile(r"%(?:ASA|FTD)-[0-7]-([0-9]{6}) ?:")
VENDOR_ID = {
    "cisco_aironet": CISCO_TAG,
    "cisco_asa": ASA_ID,
    "cisco_ios": CISCO_TAG,
    "cisco_nexus": CISCO_TAG,
}
PLACEHOLDER = {"FOO-6-BAR"}
WRAPPER_MNEMONICS = {"SYSTEM_MSG", "Q_IND", "RRM_LOGMSG"}
WRAPPER_TAG = re.compile(r"^HA_EM-[0-7]-LOG$")
FIELD_LIST_IDS = {"430001", "430002", "430003", "430004", "430005"}
KEY_VALUE = re.compile(r"(?:^|\s)[\w.-]+=\S*")


def split_of(names: list[str]) -> dict[str, str]:
    order = sorted(names, key=lambda n: hashlib.sha256(f"{SOURCE_NAME}/{n}".encode()).hexdigest())
    held = (len(order) + 1) // 2
    return {n: ("heldout" if i < held else "tuning") for i, n in enumerate(order)}


def system_of(path: str) -> str | None:
    parts = path.split("/")
    if len(parts) < 2 or parts[0] != "packages":
        return None
    return next((s for s, pkgs in SYSTEMS.items() if parts[1] in pkgs), None)


def label(system: str, line: str) -> tuple[str, str] | str:
    """(label, content) of one line, or the reason it is dropped."""
    matches = list(VENDOR_ID[system].finditer(line))
    if not matches:
        return "no id"
    m = matches[-1]
    tag, content = m.group(1), line[m.end() :].strip()
    if tag in PLACEHOLDER:
        return "placeholder"
    if system != "cisco_asa" and (tag.rsplit("-", 1)[-1] in WRAPPER_MNEMONICS or WRAPPER_TAG.match(tag)):
        return "wrapper"
    if tag in FIELD_LIST_IDS or "CEF:" in content or "LEEF:" in content or len(KEY_VALUE.findall(content)) >= 3:
        return "field list"
    return tag, content


def source_files(root: Path) -> list[dict[str, object]]:
    """The manifest's records of elastic/integrations files, each checked against its transcription."""
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    files: list[dict[str, object]] = manifest["message_id_systems"]["elastic_integrations_files"]
    for f in files:
        p = root / str(f["commit"]) / str(f["path"])
        text = p.read_bytes().decode("utf-8")
        if len(text) != f["total_chars"] or hashlib.sha256(text.encode()).hexdigest() != f["sha256"]:
            raise SystemExit(f"{p}: not the transcription the manifest records")
    return sorted(files, key=lambda f: str(f["path"]))


def records(root: Path) -> tuple[dict[str, list[tuple[str, str, str]]], dict[str, Counter[str]]]:
    out: dict[str, list[tuple[str, str, str]]] = {s: [] for s in SYSTEMS}
    dropped: dict[str, Counter[str]] = {s: Counter() for s in SYSTEMS}
    for f in source_files(root):
        system = system_of(str(f["path"]))
        if system is None:
            continue
        text = (root / str(f["commit"]) / str(f["path"])).read_bytes().decode("utf-8")
        for line in text.splitlines():
            line = line.strip()
            if not line:
                continue
            got = label(system, line)
            if isinstance(got, str):
                dropped[system][got] += 1
            else:
                out[system].append((line, got[0], got[1]))
    return out, dropped


def main(argv: list[str]) -> int:
    if len(argv) > 3 or (len(argv) > 1 and argv[1] in ("-h", "--help")):
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(argv[1]) if len(argv) > 1 else REPO / "bench" / "out" / "sources" / SOURCE_NAME
    out = Path(argv[2]) if len(argv) > 2 else REPO / "bench" / "out" / "message_id_logs"
    recs, dropped = records(root)
    split = split_of(sorted(SYSTEMS))
    for system in sorted(SYSTEMS):
        folder = out / split[system] / system
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{system}.log").write_text("".join(r[0] + "\n" for r in recs[system]), encoding="utf-8")
        structured = folder / f"{system}_structured.csv"
        with open(structured, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["LineId", "Content", "EventId"])
            for i, (_, tag, content) in enumerate(recs[system], 1):
                w.writerow([i, content, tag])
        tags = len({r[1] for r in recs[system]})
        sha = hashlib.sha256(structured.read_bytes()).hexdigest()
        drops = ", ".join(f"{n} {why}" for why, n in sorted(dropped[system].items())) or "none"
        print(f"{system:<14} {split[system]:<8} {len(recs[system]):>4} records {tags:>4} tags  {sha}")
        print(f"{'':<14} dropped: {drops}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
