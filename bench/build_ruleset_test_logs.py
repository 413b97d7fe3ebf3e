"""Build labelled logs from two detection rule sets' test samples (issue 32, outside Loghub, fourth batch).

    python bench/build_ruleset_test_logs.py WAZUH_GIT_DIR INTAKE_FORMATS_GIT_DIR [OUT_DIR]
    python bench/build_ruleset_test_logs.py --list WAZUH_GIT_DIR INTAKE_FORMATS_GIT_DIR
    (default OUT_DIR: bench/out/message_id_logs; --list prints the systems and their counts, writes nothing)

Two sources, each read from its git directory (no work tree needed) at the commit recorded in
tests/data/logs_outside_loghub/manifest.json ("message_id_systems" -> "wazuh_source" / "intake_formats_source"):

- wazuh/wazuh (https://github.com/wazuh/wazuh, GPL-2.0), tag v4.14.7: ruleset/testing/tests/*.ini, the log lines
  its analysis rules are tested on (`log <n> pass = LINE`, `log <n> fail = LINE`). This is the rule set's test
  suite that OSSEC started (ossec/ossec-hids contrib/ossec-testing/tests: older, smaller copies of the same
  files; wazuh/wazuh-ruleset: the archived copy that wazuh/wazuh superseded), so only wazuh/wazuh is read.
- SEKOIA-IO/intake-formats (https://github.com/SEKOIA-IO/intake-formats, no licence stated): the parsers'
  tests, <Vendor>/<format>/tests/*.json, one test a file, its raw log line in input.message.

These products print their own message identity in each line; one message id is one message definition in the
vendor's catalogue, so one template: the id is the ground truth.

The rule, written here before any of these systems was built or scored:
- A system is one product's catalogue from one source: the files in SYSTEMS, in path order.
  wazuh: a record is the text after `= ` of each line `log <n> pass|fail = ...` (lines commented out with `;`
  are not records). intake-formats: a record is a test file's input.message (a string).
- Label: the vendor message id found by that product's regex (ID_RE); content (what a log parser is given, like
  Loghub's Content column): the text after the id (and the header fields that belong to the id, below), stripped.
  - Cisco ASA / PIX / FTD (one catalogue): `%ASA-<sev>-<6 digits>` (also `%PIX-`, `%FTD-`), colon optional
    (some devices print none); label = the 6-digit number.
  - Cisco IOS / NX-OS: `%FACILITY[-SUB]-SEVERITY-MNEMONIC:`; label = the tag; the last tag in the line (a
    wrapper forwards a message carrying its own tag; the innermost tag names the message).
  - F5 BIG-IP: `<8 hex digits>:<severity digit>:` (01490005:5:); label = the 8 hex digits.
  - ArubaOS (Aruba controllers and instant APs): `<6 digits>` in angle brackets, followed by its header fields
    in angle brackets (process id, level, host and address); label = the 6 digits; content = the text after the
    last of those bracketed header fields.
  - Junos: the message tag (upper case, words joined by `_`) as the line's first word or right after
    `process[pid]: `, followed by `: ` or ` [`; label = the tag.
  - VMware vCenter events: `Event [key] [chain] [time] [vim.event.<Class>] [severity] [user] [datacenter]
    [chain id] [message]`; label = `vim.event.<Class>`; content = the message inside the last bracket (its
    closing `]` removed when present; some samples are cut before it).
- Dropped and counted, per reason:
  - no id: the record carries no id of its system's product (other products' lines in the same test folder
    included, e.g. HPE Aruba CX `Event|` lines among the ArubaOS tests: another catalogue);
  - wrapper: ids whose text is another program's or a user's free text, not one message definition: Cisco
    mnemonics SYSTEM_MSG, Q_IND, RRM_LOGMSG and `HA_EM-<sev>-LOG` (as in the earlier batches), vCenter
    `vim.event.EventEx` (an extended event; its real type id is not printed) and `vim.event.GeneralUserEvent`
    (a user's text);
  - field list: content that is a field list whose fields vary per line, not a template: ASA/FTD 430001-430005,
    CEF or LEEF content, or content with three or more `key=value` tokens (as in the earlier batches).
- Exact-duplicate records are kept.
- A system with fewer than MIN_RECORDS records is not a system (dropped, counted, listed).
- Not taken, decided from reading the files before this rule was written: wazuh's cisco_ftd.ini (most lines are
  Cisco's catalogue text with its placeholders left in: `{permitted | denied}`, `<ingress_ifc>`,
  `interface_name`) and f5_big_ip.ini (catalogue text with printf conversions left in, `%u`, `%A`, and the
  placeholder `componentName`, besides CEF lines); files whose lines are JSON or key=value field lists (Windows
  event channel, Sysmon, FortiGate, SonicWall, Palo Alto CSV, Cisco ISE, Citrix ADC, WatchGuard LEEF ...);
  products with fewer than 8 id lines (wazuh junos 3, huawei_usg 3, netscreen 4; intake-formats Ivanti Pulse
  lines are key=value lists).
- Split of this batch alone: sha256("<source repo name>/<system>") hex order ("wazuh/<system>",
  "intake-formats/<system>"), the first half (rounded up) held out; recorded in the manifest (systems with
  "batch": 4) before any of them is built or scored.

Output, the layout bench/log_grouping.py's load_message_ids reads: OUT_DIR/<split>/<system>/<system>.log (one
record a line; a line break inside a record is written there as the two characters backslash and n) and
<system>_structured.csv (LineId, Content, EventId; Content exactly the record's content). What the manifest
already records of a system (split, records, tags, structured_sha256) is checked: a difference is an error.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from outside_systems import git, heldout_split, write_batch

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "tests" / "data" / "logs_outside_loghub" / "manifest.json"
MIN_RECORDS = 8
BATCH = 4
WAZUH = "wazuh"
INTAKE = "intake-formats"
SOURCE_KEY = {WAZUH: "wazuh_source", INTAKE: "intake_formats_source"}
WAZUH_TESTS = "ruleset/testing/tests/"

# system -> (source, product, the files (wazuh) or test folders (intake-formats) that make it)
SYSTEMS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "wazuh_cisco_asa": (WAZUH, "asa", (WAZUH_TESTS + "cisco_asa.ini", WAZUH_TESTS + "pix.ini")),
    "wazuh_cisco_ios": (WAZUH, "cisco_tag", (WAZUH_TESTS + "cisco_ios.ini",)),
    "sekoia_cisco_asa": (INTAKE, "asa", ("Cisco/cisco-secure-firewall/tests/",)),
    "sekoia_cisco_ios": (INTAKE, "cisco_tag", ("Cisco/cisco-ios/tests/",)),
    "sekoia_cisco_nxos": (INTAKE, "cisco_tag", ("Cisco/cisco-nx-os/tests/",)),
    "sekoia_f5_bigip": (INTAKE, "f5", ("F5 Networks/f5-big-ip/tests/",)),
    "sekoia_arubaos": (INTAKE, "arubaos", ("Aruba Network/aruba-os/tests/",)),
    "sekoia_junos": (INTAKE, "junos", ("Juniper/juniper-ngfw/tests/",)),
    "sekoia_vcenter": (INTAKE, "vcenter", ("VMWare/vmware-vcenter/tests/",)),
}

ID_RE = {
    "asa": re.compile(r"%(?:ASA|PIX|FTD)-[0-7]-([0-9]{6})\b:?"),
    "cisco_tag": re.compile(r"%([A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*-[0-7A-Z]-[A-Za-z0-9_]+) ?:"),
    "f5": re.compile(r"\b([0-9a-f]{8}):[0-7]:"),
    "arubaos": re.compile(r"<([0-9]{6})>(?:\s*<[^<>]*>)*"),
    "junos": re.compile(r"^\s*(?:[\w./-]+(?:\[[0-9]+\])?: )?([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?:: | (?=\[))"),
    "vcenter": re.compile(r"^Event (?:\[[^\]]*\] ){3}\[(vim\.event\.\w+)\] (?:\[[^\]]*\] ){4}\["),
}
LAST_ID = {"cisco_tag"}
WRAPPER_MNEMONICS = {"SYSTEM_MSG", "Q_IND", "RRM_LOGMSG"}
WRAPPER_TAG = re.compile(r"^HA_EM-[0-7]-LOG$")
WRAPPER_IDS = {"vim.event.EventEx", "vim.event.GeneralUserEvent"}
FIELD_LIST_IDS = {"430001", "430002", "430003", "430004", "430005"}
KEY_VALUE = re.compile(r"(?:^|\s)[\w.-]+=\S*")
INI_RECORD = re.compile(r"^log [0-9]+ (?:pass|fail) = (.*)$")


def split_of(names: list[str]) -> dict[str, str]:
    """The split of this batch's systems: sha256 order, first half (rounded up) held out."""
    return heldout_split(names, lambda n: SYSTEMS[n][0])


def label(product: str, record: str) -> tuple[str, str] | str:
    """(label, content) of one record, or the reason it is dropped."""
    matches = list(ID_RE[product].finditer(record))
    if not matches:
        return "no id"
    m = matches[-1] if product in LAST_ID else matches[0]
    tag, content = m.group(1), record[m.end() :].strip()
    if product == "vcenter":
        content = content.removesuffix("]").strip()
    if tag in WRAPPER_IDS or (
        product == "cisco_tag" and (tag.rsplit("-", 1)[-1] in WRAPPER_MNEMONICS or WRAPPER_TAG.match(tag))
    ):
        return "wrapper"
    if tag in FIELD_LIST_IDS or "CEF:" in content or "LEEF:" in content or len(KEY_VALUE.findall(content)) >= 3:
        return "field list"
    return tag, content


def raw_records(git_dirs: dict[str, Path], commits: dict[str, str], system: str) -> list[tuple[str, str]]:
    """(file, record) of one system, files in path order."""
    source, _, parts = SYSTEMS[system]
    git_dir, commit = git_dirs[source], commits[source]
    out: list[tuple[str, str]] = []
    if source == WAZUH:
        for path in sorted(parts):
            text = git(git_dir, "show", f"{commit}:{path}").decode("utf-8")
            for line in text.splitlines():
                m = INI_RECORD.match(line)
                if m:
                    out.append((path, m.group(1)))
        return out
    for folder in parts:
        listing = git(git_dir, "ls-tree", "--name-only", commit, folder).decode("utf-8").split("\n")
        for path in sorted(p for p in listing if p.endswith(".json")):
            test = json.loads(git(git_dir, "show", f"{commit}:{path}"))
            message = test.get("input", {}).get("message") if isinstance(test, dict) else None
            if isinstance(message, str):
                out.append((path, message))
    return out


Built = dict[str, tuple[list[tuple[str, str]], Counter[str]]]


def records(git_dirs: dict[str, Path], commits: dict[str, str]) -> Built:
    """Per system: ([(label, content)], dropped per reason)."""
    out: Built = {}
    for system, (_, product, _) in SYSTEMS.items():
        kept: list[tuple[str, str]] = []
        dropped: Counter[str] = Counter()
        for _, record in raw_records(git_dirs, commits, system):
            got = label(product, record)
            if isinstance(got, str):
                dropped[got] += 1
            else:
                kept.append(got)
        out[system] = (kept, dropped)
    return out


def main(argv: list[str]) -> int:
    list_only = len(argv) > 1 and argv[1] == "--list"
    args = argv[2:] if list_only else argv[1:]
    if len(args) not in (2, 3) or (list_only and len(args) != 2):
        print(__doc__, file=sys.stderr)
        return 2
    git_dirs = {WAZUH: Path(args[0]), INTAKE: Path(args[1])}
    out = Path(args[2]) if len(args) == 3 else REPO / "bench" / "out" / "message_id_logs"
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))["message_id_systems"]
    commits = {s: manifest[key]["commit"] for s, key in SOURCE_KEY.items()}
    recorded = {s["name"]: s for s in manifest["systems"] if s.get("batch") == BATCH}
    recs = records(git_dirs, commits)
    return write_batch(recs, split_of, recorded, out, MIN_RECORDS, list_only)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
