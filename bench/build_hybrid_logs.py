"""Build the labelled CTS and HiBench logs (issue 32, systems outside Loghub) from a hybridlogparser checkout.

    python bench/build_hybrid_logs.py HYBRIDLOGPARSER_GIT_DIR [OUT_DIR]

The logs come from logpai/hybridlogparser (MIT; published with Hue, ESEC/FSE 2023): per system, the raw records
and a structured CSV with the ground-truth EventId of each record. They are third-party files, so they stay out of
this repository's commits; tests/data/logs_outside_loghub/manifest.json names the source commit, the files taken
and how many records are kept, and this script rebuilds exactly that into OUT_DIR (default
bench/out/logs_outside_loghub, which bench/log_grouping.py reads). HYBRIDLOGPARSER_GIT_DIR is a clone or a bare
git directory holding the manifest's commit.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "tests" / "data" / "logs_outside_loghub" / "manifest.json"
DEFAULT_OUT = REPO / "bench" / "out" / "logs_outside_loghub"


def source_commit(url: str) -> str:
    # ".../tree/<commit>/datasets/<System>": the commit the manifest's figures were taken at.
    return url.split("/tree/", 1)[1].split("/", 1)[0]


def show(git_dir: Path, rev: str, path: str) -> str:
    # A work tree (git -C) or a bare git directory such as a fetched snapshot (git --git-dir).
    where = ["-C", str(git_dir)] if (git_dir / ".git").exists() else ["--git-dir", str(git_dir)]
    return subprocess.run(["git", *where, "show", f"{rev}:{path}"], capture_output=True, text=True, check=True).stdout


def cut_records(name: str, text: str, keep: int | None) -> str:
    """The first `keep` records of a log (one per line) or of a CSV (header + rows); everything when None."""
    if keep is None:
        return text
    if name.endswith(".csv"):
        rows = list(csv.reader(io.StringIO(text, newline="")))
        out = io.StringIO(newline="")
        csv.writer(out, lineterminator="\n").writerows(rows[: keep + 1])
        return out.getvalue()
    return "".join(text.splitlines(keepends=True)[:keep])


def build(git_dir: Path, out: Path) -> int:
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    for system in manifest["systems"]:
        rev = source_commit(system["source"])
        keep = system.get("records_kept")
        folder = out / system["folder"]
        folder.mkdir(parents=True, exist_ok=True)
        for name in system["files_from_source"]:
            text = show(git_dir, rev, f"datasets/{system['name']}/{name}")
            # Only the log and its per-record labels are cut; the template files are kept whole.
            per_record = name in (system["log"], system["labels"])
            (folder / name).write_text(cut_records(name, text, keep if per_record else None), encoding="utf-8")
        records = len((folder / system["log"]).read_text(encoding="utf-8").splitlines())
        if records != system["records"]:
            print(f"{system['name']}: built {records} records, the manifest says {system['records']}", file=sys.stderr)
            return 1
        print(f"{system['name']} ({system['split']}): {records} records -> {folder}")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    return build(Path(argv[1]), Path(argv[2]) if len(argv) > 2 else DEFAULT_OUT)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
