"""Build labelled logs of message-id systems from elastic/integrations' pipeline test logs (issue 32, outside Loghub).

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

Second batch (issue 32, data32b; rule written here before any of its systems was built or scored): products other
than Cisco whose lines carry their message identity. Same rule as above (one system per vendor catalogue, files in
path order, label = the vendor id, content = the text after it, the same drop reasons, duplicates kept, first id in
the line unless said otherwise), with these ids (VENDOR_ID):
- hpe_aruba_cx (HPE Aruba CX switches): `Event|<number>|<severity>|<module>|<slot>|`; label = the event number;
  content = the text after the fifth `|` (severity, module and slot are header fields, like a Cisco severity).
  A line whose Event field has no number (`Event|System date/time changed ...`) has no id.
- oracle_weblogic (Oracle WebLogic Server): `<BEA-nnnnnn> <`; label = `BEA-nnnnnn`; content = the message field
  after it, without its closing `>`. A WebLogic record starts with `####<`; a line that does not (a message
  printed over several lines) continues the record before it and is joined to it with one space.
- snort (Snort alerts, fast and syslog output): `[gid:sid:rev]`; label = `gid:sid` (one rule = one message; the
  revision is not part of the identity); content = the text after the bracket.
- keycloak (Keycloak on WildFly: JBoss Logging ids such as `KC-SERVICES0009`, `RESTEASY002225`, `WFLYSRV0025`):
  the id after the thread's `) `, followed by `: `; label = the id; content = the text after it. Keycloak's event
  lines (`type=LOGIN_ERROR, realmId=...`) have no id.
Not taken for the second batch (files read, not transcribed): output formats that are field lists (snort's CSV,
JSON and pfSense CSV files, keycloak's ECS JSON file), snort's full-alert format (multi-line packet dumps),
hpe_aruba_cx's fabricated and synthetic test files (not device lines) and test-aruba-cx.log (the same lines as
test-aruba-cx-6000.log with values anonymised; over the ~300-line cap).
Split of the second batch alone, the same way: sha256("elastic-integrations/<system>") order over the second
batch's systems (BATCH), first half (rounded up) held out; the first batch's split is unchanged.

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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from outside_systems import heldout_split

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
    "hpe_aruba_cx": ("hpe_aruba_cx",),
    "keycloak": ("keycloak",),
    "oracle_weblogic": ("oracle_weblogic",),
    "snort": ("snort",),
}
# system -> batch (each batch's split is drawn over its own systems)
BATCH = {
    "cisco_aironet": 1,
    "cisco_asa": 1,
    "cisco_ios": 1,
    "cisco_nexus": 1,
    "hpe_aruba_cx": 2,
    "keycloak": 2,
    "oracle_weblogic": 2,
    "snort": 2,
}
CISCO_TAG = re.compile(r"%([A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*-[0-7A-Z]-[A-Za-z0-9_]+) ?:")
ASA_ID = re.compile(r"%(?:ASA|FTD)-[0-7]-([0-9]{6}) ?:")
ARUBA_EVENT = re.compile(r"Event\|([0-9]+)\|[^|]*\|[^|]*\|[^|]*\|")
JBOSS_ID = re.compile(r"\) ([A-Z][A-Z0-9-]*?[0-9]{4,6}): ")
SNORT_RULE = re.compile(r"\[([0-9]+:[0-9]+):[0-9]+\]")
WEBLOGIC_ID = re.compile(r"<(BEA-[0-9]{6})> <")
VENDOR_ID = {
    "cisco_aironet": CISCO_TAG,
    "cisco_asa": ASA_ID,
    "cisco_ios": CISCO_TAG,
    "cisco_nexus": CISCO_TAG,
    "hpe_aruba_cx": ARUBA_EVENT,
    "keycloak": JBOSS_ID,
    "oracle_weblogic": WEBLOGIC_ID,
    "snort": SNORT_RULE,
}
# Cisco-style tags: the last (innermost) tag names the message; everywhere else the first id does
LAST_ID = {"cisco_aironet", "cisco_ios", "cisco_nexus"}
# systems whose records can span lines: a record starts where this matches
RECORD_START = {"oracle_weblogic": re.compile(r"^####<")}
PLACEHOLDER = {"FOO-6-BAR"}
WRAPPER_MNEMONICS = {"SYSTEM_MSG", "Q_IND", "RRM_LOGMSG"}
WRAPPER_TAG = re.compile(r"^HA_EM-[0-7]-LOG$")
FIELD_LIST_IDS = {"430001", "430002", "430003", "430004", "430005"}
KEY_VALUE = re.compile(r"(?:^|\s)[\w.-]+=\S*")


def split_of(names: list[str]) -> dict[str, str]:
    """The split of one batch's systems."""
    return heldout_split(names, lambda _: SOURCE_NAME)


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
    m = matches[-1] if system in LAST_ID or system == "cisco_asa" else matches[0]
    tag, content = m.group(1), line[m.end() :].strip()
    if system == "oracle_weblogic":
        content = content.removesuffix(">").strip()
    if tag in PLACEHOLDER:
        return "placeholder"
    if system in LAST_ID and (tag.rsplit("-", 1)[-1] in WRAPPER_MNEMONICS or WRAPPER_TAG.match(tag)):
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


def lines_of(system: str, text: str) -> list[str]:
    """The file's records, stripped, blank lines left out; continuation lines joined where records span lines."""
    start = RECORD_START.get(system)
    out: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if start is not None and out and not start.match(line):
            out[-1] = f"{out[-1]} {line}"
        else:
            out.append(line)
    return out


def records(root: Path) -> tuple[dict[str, list[tuple[str, str, str]]], dict[str, Counter[str]]]:
    out: dict[str, list[tuple[str, str, str]]] = {s: [] for s in SYSTEMS}
    dropped: dict[str, Counter[str]] = {s: Counter() for s in SYSTEMS}
    for f in source_files(root):
        system = system_of(str(f["path"]))
        if system is None:
            continue
        text = (root / str(f["commit"]) / str(f["path"])).read_bytes().decode("utf-8")
        for line in lines_of(system, text):
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
    split: dict[str, str] = {}
    for batch in sorted(set(BATCH.values())):
        split.update(split_of(sorted(s for s in SYSTEMS if BATCH[s] == batch)))
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
