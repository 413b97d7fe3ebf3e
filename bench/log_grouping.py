"""Grouping accuracy and speed of the log grouper (skills/logs/templates.py) next to drain3, on labelled logs.

    pip install '.[bench]'                              (drain3, the reference, is a bench-only extra)
    python bench/log_grouping.py                        (Loghub 8 in the repository + outside systems, tuning half)
    python bench/log_grouping.py --heldout              (also the held-out outside systems: not while tuning)
    python bench/log_grouping.py DATASET_DIR            (a folder of Loghub systems, e.g. the other 8)
    python bench/log_grouping.py --speed                (lines per CPU-second only, cold and warm, small and large)
    python bench/log_grouping.py --vllm [--heldout]     (only the vLLM lines labelled by call site, issue 53)

vLLM lines labelled by call site (tests/data/vllm_call_sites/README.md): the project's own real vLLM logs
(tests/data/field_logs*), each line that prints vLLM's header labelled by the call site it names (one logging
statement), the header cut before the grouper sees the message. Each log is grouped on its own; pooled GA is over
all labelled lines of a half, macro GA the mean of the logs'. Always run (the logs are in the repository).

Network OSes labelled by the message tag their lines carry (manifest "message_id_systems") join the outside
tables when bench/build_message_id_logs.py (napalm-logs) and bench/build_vendor_logs.py (elastic/integrations)
have built them into bench/out/message_id_logs (not committed).

The repository holds 8 Loghub systems; the other 8 measure generalisation and stay out of it: copy them from
https://github.com/logpai/loghub (loghub/<System>/<System>_2k.log_structured.csv) into a temporary folder and
pass that folder. tests/data/logs_outside_loghub/manifest.json names labelled logs of systems outside Loghub's
sixteen, split (before any tuning) into a tuning half and a held-out half. They are third-party files, not
committed: bench/build_hybrid_logs.py builds CTS and HiBench into bench/out/logs_outside_loghub from a
logpai/hybridlogparser checkout.

For every system both groupers see the same lines in the same run with one configuration for all systems.
Two figures per system:
- GA, grouping accuracy (the Loghub definition): the share of lines whose predicted group holds exactly the
  lines of their true group. One dominant template can swing it.
- groups: the share of true groups recovered exactly (a predicted group holding exactly that group's lines),
  each group counting once however many lines it has.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from skills.logs.input_format import decode_log_bytes  # noqa: E402
from skills.logs.templates import TemplateMiner  # noqa: E402

# One shared set of variable masks for drain3 (the usual Loghub preprocessing: IPs, block ids, hex, numbers).
DRAIN_MASKS = [
    (r"((?<=[^A-Za-z0-9])|^)(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})(:\d+)?((?=[^A-Za-z0-9])|$)", "IP"),
    (r"blk_-?\d+", "BLK"),
    (r"((?<=[^A-Za-z0-9])|^)(0x[a-fA-F0-9]+)((?=[^A-Za-z0-9])|$)", "HEX"),
    (r"((?<=[^A-Za-z0-9])|^)([\-\+]?\d+)((?=[^A-Za-z0-9])|$)", "NUM"),
]
# The batches whose held-out half no one has read the failures of (tests/data/logs_outside_loghub/README.md says
# when each of the others was read): their scores are the untouched figures.
UNREAD_BATCHES = frozenset({5})
REPEAT = 3  # lines/s: median of three passes, a fresh grouper each pass (what one diagnose call does)
# Speed is lines per CPU-second of this process (single-threaded work), so that other load on a shared
# machine does not move the figure the way wall time does. Each pass starts from a fresh grouper, so its
# per-grouper caches start cold, as they do for a user's log of that size.
MESSAGE_ID_DIR = REPO / "bench" / "out" / "message_id_logs"
OUTSIDE_MANIFEST = REPO / "tests" / "data" / "logs_outside_loghub" / "manifest.json"
OUTSIDE_DIR = REPO / "bench" / "out" / "logs_outside_loghub"  # built by bench/build_hybrid_logs.py
VLLM_DIR = REPO / "tests" / "data" / "vllm_call_sites"
# vLLM's logging header: any prefix (syslog, docker compose, Cloud Logging, the process prefix "(EngineCore_DP0
# pid=7) "), level, MM-DD, time, call site ("[core.py:77]"; older releases print no opening bracket), message.
VLLM_HEADER = re.compile(
    r"^(?P<head>(?P<prefix>.*?)(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d\s+\d\d:\d\d:\d\d(?:[.,]\d+)?\s+"
    r"\[?(?P<site>[\w./-]+\.py:\d+)\])\s?(?P<msg>.*)$"
)


def load(folder: Path) -> tuple[list[str], list[str]] | None:
    files = list(folder.glob("*_structured.csv"))
    if not files:
        return None
    contents, truth = [], []
    with open(files[0], newline="", encoding="utf-8", errors="replace") as fh:
        for row in csv.DictReader(fh):
            contents.append(row["Content"])
            truth.append(row["EventId"])
    return contents, truth


def load_outside(root: Path, split: str) -> list[tuple[str, tuple[list[str], list[str]]]]:
    """The systems of one split named in tests/data/logs_outside_loghub/manifest.json, as built under `root` by
    bench/build_hybrid_logs.py: records with their header cut (the part a log parser is given, like Loghub's
    Content column) and the publisher's in-record '/n' as a space."""
    manifest = json.loads(OUTSIDE_MANIFEST.read_text(encoding="utf-8"))
    out = []
    for system in manifest["systems"]:
        if system["split"] != split:
            continue
        folder = root / system["folder"]
        if not (folder / system["log"]).exists():
            print(f"({system['name']}: not built; see bench/build_hybrid_logs.py)", file=sys.stderr)
            continue
        header = re.compile(system["header"])
        raw = (folder / system["log"]).read_text(encoding="utf-8", errors="replace").splitlines()
        with open(folder / system["labels"], newline="", encoding="utf-8") as fh:
            truth = [row["EventId"].strip() for row in csv.DictReader(fh)]
        if len(raw) != len(truth):
            raise SystemExit(f"{system['name']}: {len(raw)} records but {len(truth)} labels")
        lines = [" ".join(header.sub("", r, count=1).replace("/n", " ").split()) for r in raw]
        out.append((system["name"], (lines, truth)))
    return out


def load_message_ids(root: Path, split: str) -> list[tuple[str, tuple[list[str], list[str]]]]:
    """The built message-tag systems of one split (empty when not built)."""
    manifest = json.loads(OUTSIDE_MANIFEST.read_text(encoding="utf-8"))
    out = []
    for system in manifest.get("message_id_systems", {}).get("systems", []):
        if system["split"] != split:
            continue
        data = load(root / system["folder"])
        if data is None:
            builder = system.get("builder", "bench/build_message_id_logs.py")
            print(f"({system['name']}: not built; see {builder})", file=sys.stderr)
            continue
        out.append((system["name"], data))
    return out


def vllm_labelled(text: str) -> list[tuple[str, str]]:
    """(message, call site) of each labelled line of one log (tests/data/vllm_call_sites/README.md): a line with
    vLLM's header, not continuing the record above (the same whole header on the labelled line directly above)."""
    out: list[tuple[str, str]] = []
    above = None
    for line in text.splitlines():
        m = VLLM_HEADER.match(line)
        if m is None:
            above = None
            continue
        if m["head"] != above:
            out.append((" ".join(m["msg"].split()), m["site"]))
        above = m["head"]
    return out


def vllm_logs() -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(file under tests/data, source, labelled lines) of every log with a labelled line, a re-encoded copy once."""
    by_source: dict[str, tuple[str, str, list[tuple[str, str]]]] = {}
    for manifest in sorted((REPO / "tests" / "data").glob("field_logs*/manifest.json")):
        for entry in json.loads(manifest.read_text(encoding="utf-8"))["logs"]:
            path = manifest.parent / entry["file"]
            labelled = vllm_labelled(decode_log_bytes(path.read_bytes()))
            name = f"{manifest.parent.name}/{entry['file']}"
            kept = by_source.get(entry["source"])
            if labelled and (kept is None or len(name.split("/")[1]) < len(kept[0].split("/")[1])):
                by_source[entry["source"]] = (name, entry["source"], labelled)
    return list(by_source.values())


def vllm_split() -> dict[str, str]:
    """file -> "tuning" / "heldout": sorted by the sha256 of the source, alternately (the README's rule)."""
    logs = sorted(vllm_logs(), key=lambda log: hashlib.sha256(log[1].encode()).hexdigest())
    return {name: ("tuning", "heldout")[i % 2] for i, (name, _, _) in enumerate(logs)}


def load_vllm(split: str) -> list[tuple[str, list[str], list[str]]]:
    """(log, messages, call sites) of one half, checked against the manifest written when the rule was applied."""
    manifest = json.loads((VLLM_DIR / "manifest.json").read_text(encoding="utf-8"))
    recorded = {log["file"]: log["split"] for log in manifest["logs"]}
    if recorded != vllm_split():
        raise SystemExit("tests/data/vllm_call_sites/manifest.json no longer matches its split rule")
    return [
        (name.split("/")[1].removesuffix(".log"), [m for m, _ in lab], [s for _, s in lab])
        for name, _, lab in vllm_logs()
        if recorded[name] == split
    ]


def score_vllm(title: str, logs: list[tuple[str, list[str], list[str]]]) -> None:
    """Per log, pooled and macro GA of ours (blind to the call site), drain3, and ours split by call site."""
    print(f"\n{title}")
    print(f"{'log':<44} {'lines':>5} {'sites':>5} {'GA ours':>8} {'GA drain3':>10} {'ours+site':>10}")
    runs = {"ours": run_ours, "drain3": run_drain3}
    correct: dict[str, float] = defaultdict(float)
    macro: dict[str, float] = defaultdict(float)
    n_lines = 0
    for name, lines, sites in logs:
        preds = {k: fn(lines) for k, fn in runs.items()}
        preds["ours+site"] = [f"{p}|{s}" for p, s in zip(preds["ours"], sites, strict=True)]
        ga = {k: grouping_accuracy(p, sites) for k, p in preds.items()}
        for k, v in ga.items():
            correct[k] += v * len(lines)
            macro[k] += v
        n_lines += len(lines)
        print(
            f"{name[:44]:<44} {len(lines):>5} {len(set(sites)):>5} {ga['ours']:>8.3f} {ga['drain3']:>10.3f}"
            f" {ga['ours+site']:>10.3f}"
        )
    n = len(logs)
    pooled = {k: v / n_lines for k, v in correct.items()}
    mean = {k: v / n for k, v in macro.items()}
    n_sites = sum(len(set(s)) for _, _, s in logs)
    print(
        f"{'pooled GA':<44} {n_lines:>5} {n_sites:>5} {pooled['ours']:>8.3f} {pooled['drain3']:>10.3f}"
        f" {pooled['ours+site']:>10.3f}"
    )
    print(
        f"{f'macro GA ({n} logs)':<44} {'':>5} {'':>5} {mean['ours']:>8.3f} {mean['drain3']:>10.3f}"
        f" {mean['ours+site']:>10.3f}"
    )
    print(
        f"ours vs drain3: pooled GA {pooled['ours'] - pooled['drain3']:+.3f},"
        f" macro GA {mean['ours'] - mean['drain3']:+.3f}"
    )


def group_accuracy(pred: list[int | str], truth: list[str]) -> float:
    """The share of true groups recovered exactly: some predicted group holds exactly that group's lines."""
    members: dict[int | str, set[int]] = defaultdict(set)
    for i, p in enumerate(pred):
        members[p].add(i)
    true_groups: dict[str, set[int]] = defaultdict(set)
    for i, t in enumerate(truth):
        true_groups[t].add(i)
    exact = sum(1 for idx in true_groups.values() if members[pred[next(iter(idx))]] == idx)
    return exact / len(true_groups)


def grouping_accuracy(pred: list[int | str], truth: list[str]) -> float:
    members: dict[int | str, list[int]] = defaultdict(list)
    for i, p in enumerate(pred):
        members[p].append(i)
    truth_size = Counter(truth)
    correct = 0
    for idx in members.values():
        ids = {truth[i] for i in idx}
        if len(ids) == 1 and truth_size[next(iter(ids))] == len(idx):
            correct += len(idx)
    return correct / len(truth)


def run_ours(lines: list[str]) -> list[int | str]:
    miner = TemplateMiner()
    gids = [miner.add(line) for line in lines]
    return [miner.group(g) for g in gids]


def run_drain3(lines: list[str]) -> list[int | str]:
    from drain3 import TemplateMiner as Drain
    from drain3.masking import MaskingInstruction
    from drain3.template_miner_config import TemplateMinerConfig

    cfg = TemplateMinerConfig()
    cfg.masking_instructions = [MaskingInstruction(p, m) for p, m in DRAIN_MASKS]
    cfg.drain_sim_th = 0.4
    cfg.drain_depth = 4
    miner = Drain(config=cfg)
    ids = [miner.add_log_message(line)["cluster_id"] for line in lines]
    # Drain refines templates as it goes; the final grouping is each line matched against the final clusters.
    out: list[int | str] = []
    for line, cid in zip(lines, ids, strict=True):
        m = miner.match(line)
        out.append(m.cluster_id if m is not None else cid)
    return out


def timed(fn: Callable[[list[str]], list[int | str]], lines: list[str]) -> tuple[list[int | str], float]:
    times = []
    pred: list[int | str] = []
    for _ in range(REPEAT):
        t0 = time.process_time()
        pred = fn(lines)
        times.append(time.process_time() - t0)
    return pred, len(lines) / max(sorted(times)[len(times) // 2], 1e-9)


def score(title: str, systems: list[tuple[str, tuple[list[str], list[str]]]]) -> tuple[float, float] | None:
    """Print one table (per system and average); return the average GA of ours and of drain3 (None: no system
    of the table is built, said in one line)."""
    print(f"\n{title}")
    if not systems:
        print("(skipped: none of its systems is built here; see the builders named above)")
        return None
    print(
        f"{'system':<16} {'lines':>6} {'GA ours':>8} {'GA drain3':>10} {'groups ours':>12} {'groups drain3':>14}"
        f" {'ours l/s':>10} {'drain3 l/s':>11}"
    )
    ga_o, ga_d, gr_o, gr_d, n_all, t_o, t_d = [], [], [], [], 0, 0.0, 0.0
    for name, (lines, truth) in systems:
        pred_o, lps_o = timed(run_ours, lines)
        pred_d, lps_d = timed(run_drain3, lines)
        a_o, a_d = grouping_accuracy(pred_o, truth), grouping_accuracy(pred_d, truth)
        g_o, g_d = group_accuracy(pred_o, truth), group_accuracy(pred_d, truth)
        ga_o.append(a_o)
        ga_d.append(a_d)
        gr_o.append(g_o)
        gr_d.append(g_d)
        n_all += len(lines)
        t_o += len(lines) / lps_o
        t_d += len(lines) / lps_d
        print(
            f"{name:<16} {len(lines):>6} {a_o:>8.3f} {a_d:>10.3f} {g_o:>12.3f} {g_d:>14.3f}"
            f" {lps_o:>10,.0f} {lps_d:>11,.0f}"
        )
    n = len(ga_o)
    avg_o, avg_d = sum(ga_o) / n, sum(ga_d) / n
    print(
        f"{'average':<16} {n_all:>6} {avg_o:>8.3f} {avg_d:>10.3f} {sum(gr_o) / n:>12.3f} {sum(gr_d) / n:>14.3f}"
        f" {n_all / t_o:>10,.0f} {n_all / t_d:>11,.0f}"
    )
    print(
        f"ours vs drain3: GA {avg_o - avg_d:+.3f}, groups {(sum(gr_o) - sum(gr_d)) / n:+.3f},"
        f" speed x{(n_all / t_o) / (n_all / t_d):.1f}"
    )
    return avg_o, avg_d


def speed(systems: list[tuple[str, tuple[list[str], list[str]]]]) -> None:
    """Lines per CPU-second of ours: per system from a fresh grouper (cold caches, as a user's log of that size
    is grouped), and over large inputs (every system's lines one after another, once and five times: the
    share of the cost that is warm-up falls as the input grows). Tokens per CPU-second beside it: a record can
    be a whole Windows event text of a hundred words, and lines per second alone reads that as slowness."""
    print(f"\n{'system':<16} {'lines':>7} {'tokens/line':>11} {'cold l/s':>10} {'cold tokens/s':>14}")
    slowest = float("inf")
    for name, (lines, _) in systems:
        _, lps = timed(run_ours, lines)
        per_line = sum(len(line.split()) for line in lines) / max(len(lines), 1)
        slowest = min(slowest, lps)
        print(f"{name:<16} {len(lines):>7} {per_line:>11.1f} {lps:>10,.0f} {lps * per_line:>14,.0f}")
    every = [line for _, (lines, _) in systems for line in lines]
    for k in (1, 5):
        big = every * k
        _, lps = timed(run_ours, big)
        print(f"{f'all x{k}':<16} {len(big):>7} {'':>11} {lps:>10,.0f}")
    print(f"slowest system: {slowest:,.0f} lines per CPU-second (cold)")


def main(argv: list[str]) -> int:
    args = [a for a in argv[1:] if not a.startswith("--")]
    heldout = "--heldout" in argv
    if "--speed" in argv:
        root = REPO / "tests" / "data" / "loghub"
        outside = OUTSIDE_DIR
        systems = [(d.name, data) for d in sorted(root.iterdir()) if d.is_dir() and (data := load(d))]
        systems += load_outside(outside, "tuning") + load_message_ids(MESSAGE_ID_DIR, "tuning")
        if heldout:
            systems += load_outside(outside, "heldout") + load_message_ids(MESSAGE_ID_DIR, "heldout")
        speed(systems)
        return 0
    try:
        import drain3  # noqa: F401
    except ImportError:
        print("drain3 is not installed: it is a bench extra (pip install '.[bench]')", file=sys.stderr)
        return 2
    if args:
        root = Path(args[0]).resolve()
        systems = [(d.name, data) for d in sorted(root.iterdir()) if d.is_dir() and (data := load(d))]
        if not systems:
            print(f"no Loghub systems (*_structured.csv) under {root}", file=sys.stderr)
            return 2
        score(f"Loghub systems under {root}", systems)
        return 0
    if "--vllm" not in argv:
        _score_loghub_and_outside(heldout)
    score_vllm("vLLM lines labelled by call site, tuning half (tests/data/vllm_call_sites)", load_vllm("tuning"))
    if heldout:
        score_vllm("vLLM lines labelled by call site, HELD-OUT half", load_vllm("heldout"))
    return 0


def _score_loghub_and_outside(heldout: bool) -> None:
    root = REPO / "tests" / "data" / "loghub"
    score(
        f"Loghub, the 8 systems in the repository ({root})",
        [(d.name, data) for d in sorted(root.iterdir()) if d.is_dir() and (data := load(d))],
    )
    outside = OUTSIDE_DIR
    score(
        "Outside Loghub, tuning half",
        load_outside(outside, "tuning") + load_message_ids(MESSAGE_ID_DIR, "tuning"),
    )
    if heldout:
        held = load_outside(outside, "heldout") + load_message_ids(MESSAGE_ID_DIR, "heldout")
        batch = _batches()
        for b in sorted({batch.get(name, 1) for name, _ in held}):
            state = "never read while tuning" if b in UNREAD_BATCHES else "scored untouched first, failures read since"
            score(
                f"Outside Loghub, HELD-OUT half of batch {b} ({state})",
                [s for s in held if batch.get(s[0], 1) == b],
            )


def _batches() -> dict[str, int]:
    """System name -> the batch it came in (the manifest's "batch"; the first systems carry none: 1)."""
    manifest = json.loads(OUTSIDE_MANIFEST.read_text(encoding="utf-8"))
    return {s["name"]: int(s.get("batch", 1)) for s in manifest.get("message_id_systems", {}).get("systems", [])}


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
