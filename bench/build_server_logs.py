"""Build labelled logs of three server products that print their own message ids (issue 32, outside Loghub,
fifth batch): MySQL 8.0 error log `[MY-nnnnnn]`, IBM MQ queue-manager error log `AMQnnnnX:`, IBM AIX audit
records (the audit event name).

    python bench/build_server_logs.py INTAKE_FORMATS_GIT_DIR [OUT_DIR]
    python bench/build_server_logs.py --list INTAKE_FORMATS_GIT_DIR
    (default OUT_DIR: bench/out/message_id_logs; --list prints the systems and their counts, writes nothing)

Sources, at the commits recorded in tests/data/logs_outside_loghub/manifest.json ("message_id_systems" ->
"beats_files", "intake_formats_source"); nothing of them is committed here:

- elastic/beats (https://github.com/elastic/beats; Apache-2.0 outside x-pack/, Elastic License under x-pack/):
  the filebeat module test logs `filebeat/module/mysql/error/test/mysql-ubuntu-8.0.15.log` (a MySQL 8.0.15 error
  log) and `x-pack/filebeat/module/ibmmq/errorlog/test/AMQERR01.LOG` (an IBM MQ 9.1 queue-manager error log). The
  repository is too large to fetch (842 MB): each file was transcribed whole through the search tool's read_file
  into bench/out/sources/elastic-beats/<commit>/<path>; the manifest's beats_files records each file's commit,
  character count (equal to read_file's total_chars) and sha256, which this builder checks.
- SEKOIA-IO/intake-formats (https://github.com/SEKOIA-IO/intake-formats, no licence stated), read from its git
  directory at the commit of batch 4 (b8f64fe1): the parser tests `IBM/ibm-aix/tests/*.json`, one raw AIX audit
  record (auditpr output) per test in input.message.

The rule, written here before any of these systems was built or scored:
- A system is one product's catalogue from one source: beats_mysql (mysql-ubuntu-8.0.15.log), beats_ibmmq
  (AMQERR01.LOG), sekoia_ibm_aix (IBM/ibm-aix/tests/). One message id is one message definition of the vendor's
  catalogue, so one template: the id is the ground truth.
- Records and labels (ID_RE per product):
  - MySQL: a record is one line of the file; id `[MY-<6 digits>]` after the timestamp, thread id and
    `[<priority>]`; label = `MY-<6 digits>`; content = the text after the id and the subsystem in brackets that
    follows it (`[Server] `), stripped.
  - IBM MQ: a record is one entry of the error log: the lines between two separator lines (`-----` ... at the
    start of a line). Its header (date, Process, User, Program, Host, Installation, VRMF, Time and the
    ArithInsert/CommentInsert lines) is not content. Label = the message id `AMQ<4 digits><severity letter>` at
    the start of a line, as printed (without the colon); content = the message text after `AMQnnnnX: ` up to the
    first blank line, its line breaks joined with a single space (as the WebLogic continuation lines of batch 2).
    The EXPLANATION and ACTION paragraphs that follow are catalogue text fixed per id and are not content.
  - IBM AIX audit: a record is a test's input.message; id = the audit event name (`AUD_It`, `FILE_Link`,
    `S_PASSWD_READ`, `TCP_kaccept`: letters, digits and `_`, with at least one `_`, starting with a capital) as
    the record's first word, followed by auditpr's header columns: command, login user, real user, status
    (OK or FAIL), date and time (`25 sep 2022 23:10:00.924334`) and the roles column when it reads `No
    associated roles`; label = the event name; content = the event's tail after those columns, stripped.
- Dropped and counted, per reason:
  - no id: the record has no id of its product where the rule expects it (MySQL lines printed without an id,
    e.g. `[Note] Aborted connection`; AIX records whose first word is not an event name followed by the header
    columns: test lines cut or shifted by the test authors);
  - translated: IBM MQ entries printed in another language than English (their EXPLANATION heading is not
    `EXPLANATION:`; the file mixes German and English entries of the same ids: one id would otherwise have two
    templates, one per language, which no grouper could be asked to merge);
  - field list: content with three or more `key=value` (or `key = value`) tokens (as in the earlier batches);
    CEF/LEEF content.
- Exact-duplicate records are kept.
- A system with fewer than MIN_RECORDS (8) records is not a system.
- Looked at and not taken (read before this rule was written): wazuh/wazuh v4.14.7's other rule tests
  (ruleset/testing/tests/*.ini besides batch 4's three): no file holds 8 lines carrying a product message id that
  are not field lists (sophos.ini: XML with printf templates and separate arguments; cimserver.ini 2 `PGSnnnnn`
  lines; glpi.ini 1 `AH` line; huawei_usg 3, netscreen 4, junos 3; the rest JSON, key=value, CEF/LEEF, CSV or
  messages without ids). SEKOIA-IO/intake-formats' other formats: VMware ESXi (85 tests, only 4 `[vob.*]` ids),
  Citrix ADC native (`<MODULE> <EVENT>` ids, but the texts are `Key value - Key value` field lists, generic
  `Message` wrappers, CEF; batch 2 left it out for the same reasons), Cisco ISE (message codes inside key=value
  lists; Cisco overlap), IBM i (CEF), Ivanti Pulse (`AUTnnnnn` inside key=value lists), Clavister, WatchGuard,
  Stormshield, Sophos, Veeam, Fortinet, Forcepoint, Trend Micro, CyberArk (key=value, LEEF, CEF or JSON), Ekinops
  OneOS (`#INFO#` is a severity, not an id), Broadcom SiteMinder (9 access-log records typed by their first word),
  Windows (JSON). elastic/beats: the MySQL 5.x and MariaDB error logs (no ids), the other IBM MQ test logs
  (AMQERR01_QM1.log, AMQERR01_QM2.log: 1.7 and 1.55 million characters, too large to transcribe through
  read_file), mssql's test.log (no error numbers in its lines), apache error test.log (1 `AH` line), the
  x-pack modules' generated.log files (synthetic lines filled with placeholder words). DataDog/integrations-core
  (too large to fetch; its ibm_mq log tests hold 3 samples). logstash-plugins/logstash-patterns-core's specs
  (Cisco ASA: overlap with batches 1 and 4; a handful of `AH` and NetScreen lines). Scattered MySQL 8.0 and
  Liberty `CWWK` lines in READMEs and build transcripts of unrelated repositories (not one product's log).
- Split of this batch alone: sha256("<source>/<system>") hex order ("beats/<system>" for the elastic/beats files,
  "intake-formats/<system>" for the SEKOIA tests), the first half (rounded up) held out; recorded in the manifest
  (systems with "batch": 5) before any of them is built or scored.

Output, the layout bench/log_grouping.py's load_message_ids reads: OUT_DIR/<split>/<system>/<system>.log (one
record a line) and <system>_structured.csv (LineId, Content, EventId). What the manifest already records of a
system (split, records, tags, structured_sha256) is checked: a difference is an error.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from outside_systems import git, heldout_split, write_batch

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "tests" / "data" / "logs_outside_loghub" / "manifest.json"
BEATS_SOURCES = REPO / "bench" / "out" / "sources" / "elastic-beats"
MIN_RECORDS = 8
BATCH = 5
BEATS = "beats"
INTAKE = "intake-formats"

MYSQL_FILE = "filebeat/module/mysql/error/test/mysql-ubuntu-8.0.15.log"
IBMMQ_FILE = "x-pack/filebeat/module/ibmmq/errorlog/test/AMQERR01.LOG"
AIX_TESTS = "IBM/ibm-aix/tests/"

# system -> (source, product, the file (beats) or test folder (intake-formats) that makes it)
SYSTEMS: dict[str, tuple[str, str, str]] = {
    "beats_mysql": (BEATS, "mysql", MYSQL_FILE),
    "beats_ibmmq": (BEATS, "ibmmq", IBMMQ_FILE),
    "sekoia_ibm_aix": (INTAKE, "aix", AIX_TESTS),
}

ID_RE = {
    "mysql": re.compile(r"\[(MY-[0-9]{6})\] \[[^\]]*\] ?"),
    "ibmmq": re.compile(r"^(AMQ[0-9]{4}[A-Z]?): ", re.M),
    "aix": re.compile(
        r"^\s*([A-Z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+)\s+\S+\s+\S+\s+\S+\s+(?:OK|FAIL)\s+"
        r"[0-9]{1,2} [A-Za-z]{3} [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?\s+(?:No associated roles)?"
    ),
}
MQ_SEPARATOR = re.compile(r"^-----.*$", re.M)
KEY_VALUE = re.compile(r"(?:^|\s)[\w.-]+ ?= ?\S")


def split_of(names: list[str]) -> dict[str, str]:
    """The split of this batch's systems: sha256 order, first half (rounded up) held out."""
    return heldout_split(names, lambda n: SYSTEMS[n][0])


def label(product: str, record: str) -> tuple[str, str] | str:
    """(label, content) of one record, or the reason it is dropped."""
    m = ID_RE[product].search(record) if product != "aix" else ID_RE[product].match(record)
    if not m:
        return "no id"
    tag = m.group(1)
    if product == "ibmmq":
        if "\nEXPLANATION:" not in record:
            return "translated"
        content = " ".join(record[m.end() :].split("\n\n", 1)[0].split("\n")).strip()
    else:
        content = record[m.end() :].strip()
    if "CEF:" in content or "LEEF:" in content or len(KEY_VALUE.findall(content)) >= 3:
        return "field list"
    return tag, content


def beats_text(files: dict[str, dict[str, object]], path: str) -> str:
    """A transcribed elastic/beats file, checked against the manifest's character count and sha256."""
    entry = files[path]
    local = BEATS_SOURCES / str(entry["commit"]) / path
    text = local.read_text(encoding="utf-8")
    if len(text) != entry["total_chars"] or hashlib.sha256(text.encode()).hexdigest() != entry["sha256"]:
        raise SystemExit(f"{local}: differs from the manifest's beats_files entry")
    return text


def raw_records(files: dict[str, dict[str, object]], intake: tuple[Path, str], system: str) -> list[str]:
    """The records of one system, in file order (intake-formats: test files in path order)."""
    source, product, part = SYSTEMS[system]
    if source == BEATS:
        text = beats_text(files, part)
        if product == "mysql":
            return [line for line in text.split("\n") if line.strip()]
        return [entry.strip("\n") for entry in MQ_SEPARATOR.split(text) if entry.strip()]
    git_dir, commit = intake
    listing = git(git_dir, "ls-tree", "--name-only", commit, part).decode("utf-8").split("\n")
    out: list[str] = []
    for path in sorted(p for p in listing if p.endswith(".json")):
        test = json.loads(git(git_dir, "show", f"{commit}:{path}"))
        message = test.get("input", {}).get("message") if isinstance(test, dict) else None
        if isinstance(message, str):
            out.append(message)
    return out


Built = dict[str, tuple[list[tuple[str, str]], Counter[str]]]


def records(files: dict[str, dict[str, object]], intake: tuple[Path, str]) -> Built:
    """Per system: ([(label, content)], dropped per reason)."""
    out: Built = {}
    for system, (_, product, _) in SYSTEMS.items():
        kept: list[tuple[str, str]] = []
        dropped: Counter[str] = Counter()
        for record in raw_records(files, intake, system):
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
    if len(args) not in (1, 2) or (list_only and len(args) != 1):
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(args[1]) if len(args) == 2 else REPO / "bench" / "out" / "message_id_logs"
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))["message_id_systems"]
    files = {f["path"]: f for f in manifest["beats_files"]}
    intake = (Path(args[0]), manifest["intake_formats_source"]["commit"])
    recorded = {s["name"]: s for s in manifest["systems"] if s.get("batch") == BATCH}
    recs = records(files, intake)
    return write_batch(recs, split_of, recorded, out, MIN_RECORDS, list_only)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
