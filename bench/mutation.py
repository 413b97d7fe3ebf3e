"""Mutation score of the code that guards writes, secrets and alerts: how many small deliberate bugs the tests
catch, and how many were not run at all.

    .venv/bin/python bench/mutation.py [--sample 16] [--seed 44] [--only queue,incident-fold] [--all]
                                       [--children 2] [--time-limit-s 1800] [--keep DIR] [--list]

The mutants come from bench/mutants.py (its docstring lists the operators: compare, boolean, not, constants,
arithmetic, return, a dropped call, an unwrapped nested call, a dropped table entry). Every target's modules are
mutated whole, module-level tables included. Each target runs a fixed-size sample of its mutants, drawn with a
seed of its own (`--seed` and the target's name), so two runs of the same code run the same mutants; `--all`
runs every mutant (hours).

How a run goes, in a copy of the checkout in a temporary directory (nothing in the checkout is ever rewritten):
1. Baseline: the targets' test files run once under coverage (bench/mutation_coverage.py), on `--children`
   processes, recording which test reaches which line and how long each takes. A test that fails here is left
   out of every selection and reported: a mutant cannot be judged by a test that already fails.
2. Each sampled mutant is written into a worker's copy and judged by the tests that reached its lines, quickest
   first, stopping at the first failure (`-x`). A mutant on lines no in-process test reached (module-level code;
   code only a subprocess runs) is judged by every test file of its target.
3. Killed: a test failed, the module no longer imported, or the run outlived its timeout (three times the
   baseline time of its tests, at least 60 s). Survived: every selected test passed.
Workers are fork servers (bench/mutation_worker.py) that import the test libraries once. Mutants run round-robin
across targets, so a run stopped by `--time-limit-s` leaves its unrun mutants spread over the targets; they are
counted as unrun, never as killed or survived.

The report: per target its mutants, the sample, how many ran and were left unrun, killed, survived, the
equivalent ones (EQUIVALENT, with why; not counted) and a score over what ran, or no score when nothing ran. The
`all` line is over what ran, with the share of the sample that ran beside it. Every survivor is printed as a
one-line diff, for a test or an entry in EQUIVALENT.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import py_compile
import queue
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.mutants import Mutant, mutants_of  # noqa: E402  (bench/ is not a package on the path)

DEFAULT_SAMPLE = 16
DEFAULT_SEED = 44


@dataclass(frozen=True)
class Target:
    name: str
    paths: tuple[str, ...]  # the modules mutated
    tests: tuple[str, ...]  # the kill criterion: test files that exercise them for real
    guards: str  # what a bug here would let through
    only: tuple[str, ...] = ()  # functions/classes to mutate ("" = the whole module)


PLAN_TESTS = (
    "tests/test_write_gate.py",
    "tests/test_plan_store.py",
    "tests/test_plan_guards.py",
    "tests/test_plans_thread.py",
    "tests/test_deploy_safety.py",
    "tests/test_swallowed_failures.py",
    "tests/test_deploy_flow.py",
    "tests/test_deploy_plan_refusals.py",
)
ALERT_TESTS = (
    "tests/test_alert_dedup.py",
    "tests/test_alerts_webhook.py",
    "tests/test_alerts_pubsub.py",
    "tests/test_incidents_threads.py",
)

TARGETS = (
    Target(
        "confirm",
        ("skills/deploy/confirm.py",),
        (*PLAN_TESTS, "tests/test_deploy_failure_logs.py", "tests/test_destroy_typed_name.py"),
        "role check, plan binding, typed name, one-shot, what the audit records",
    ),
    Target("locks", ("skills/locks.py",), (*PLAN_TESTS, "tests/test_service_lock.py"), "one write per service"),
    Target(
        "plans",
        ("skills/deploy/plans.py",),
        (*PLAN_TESTS, "tests/test_tpu_target.py"),  # a TPU plan refused for zero quota: Plan.blocked's refusal
        "a plan confirmed at most once, within its window, never when it does not fit",
        ("Plan.blocked", "Plan.expired", "PlanStore.get", "PlanStore.claim", "PlanStore.unclaim", "PlanStore.discard"),
    ),
    Target(
        "redact",
        ("skills/logs/redact.py",),
        (
            "tests/test_redact_corpus.py",
            "tests/test_redact_rules.py",
            "tests/test_redact_plain_values.py",
            "tests/test_redact_table_entries.py",
            "tests/test_redact_encoded.py",
        ),
        "secrets out of logs, the model and Slack",
    ),
    Target(
        "control-tokens",
        ("skills/control_tokens.py",),
        ("tests/test_control_tokens.py", "tests/test_control_token_fields.py"),
        "outside text never becomes a Gemma 4 control token",
    ),
    Target(
        "signature",
        ("handlers/slack_request.py",),
        ("tests/test_slack_signature.py", "tests/test_foundation_slack.py", "tests/test_http_hardening.py"),
        "forged, stale or unsigned Slack requests refused",
        ("verify", "_valid"),
    ),
    Target(
        "queue",
        ("bot/alert_queue.py",),
        (*ALERT_TESTS, "tests/test_alert_job_failures.py", "tests/test_alert_poison.py"),
        "a retry is not a new alert; a failed job is retried, then dead-lettered, never lost",
        (
            "AlertQueue.dedup_key",
            "AlertQueue.enqueue",
            "AlertQueue._process",
            "AlertQueue._ack",
            "AlertQueue._dead",
            "AlertQueue._reclaim",
        ),
    ),
    Target(
        "incident-fold",
        ("skills/incidents/model.py", "skills/incidents/store.py"),
        (
            *ALERT_TESTS,
            "tests/test_incident_refire_order.py",
            "tests/test_incident_alert_runs.py",
            "tests/test_incident_lifecycle.py",
            "tests/test_incidents_closure.py",
        ),
        "a new run of an alert pages again; a late retry or an earlier run's resolve changes nothing",
        ("Alert.dedup_key", "Incident.apply", "Incident._fold", "Incident.active", "IncidentStore._find"),
    ),
    Target(
        "coalescing",
        ("skills/incidents/publisher.py",),
        ("tests/test_incidents_storm.py", "tests/test_incidents_threads.py", "tests/test_incidents_closure.py"),
        "repeats coalesced, header debounce, resolves at once, storm threshold, fix checks",
        ("IncidentPublisher._effects", "IncidentPublisher._channel_step"),
    ),
    Target(
        "cost",
        ("skills/capacity/cost.py",),
        (
            "tests/test_prices.py",
            "tests/test_metrics_sidecar.py",
            "tests/test_memory_sizes.py",
            "tests/test_observe_model.py",
            "tests/test_cost_notes.py",
        ),
        "the price a reply shows",
    ),
    Target(
        "analyzers",
        ("skills/diagnosis/analyzers/memory.py",),
        (
            "tests/test_diagnose_kinds.py",
            "tests/test_gpu_oom_field_wordings.py",
            "tests/test_memory_findings.py",
            "tests/test_field_logs.py",
        ),
        "GPU and host out-of-memory, KV cache too small: the diagnosis a 3 a.m. reader acts on",
    ),
    Target(
        "mcp-plans",
        ("bot/mcp_plans.py",),
        ("tests/test_mcp_server.py", "tests/test_mcp_elicitation_answers.py"),
        "a write asked through MCP runs only when a deployer (or the client's human, ticked) confirms it",
        ("PlanPoster.ask_human", "plan_status", "<module>"),  # the elicitation guard, its form, what status says
    ),
)

# Mutants no test can kill because no behaviour differs, with why. Keyed by Mutant.key (where and what, not a
# line number): re-check an entry when its function changes.
_PUB = "skills/incidents/publisher.py:IncidentPublisher."
_Q = "bot/alert_queue.py:AlertQueue."


def _redact_trigger_equivalents() -> dict[str, str]:
    """The redactor's triggers are cheap `in` checks that only skip work: a trigger emptied to "" is in every text,
    and a two-trigger tuple that loses one becomes a string whose every character is a trigger; either way the
    rule behind it runs more often and finds the same secrets. (A table losing an entry of three or more, or a
    rule, is a real bug: tests/test_redact_table_entries.py names every entry.)"""
    from skills.logs import redact as r

    why = "a trigger only skips work: the rule behind it runs (more often) and masks the same"
    groups = [tuple(trigs) for _, trigs, _ in r._TOKEN_RULES] + [tuple(t) for t, _ in r._CMD_FLAGS]
    out = {}
    for m in mutants_of("skills/logs/redact.py", (ROOT / "skills/logs/redact.py").read_text(encoding="utf-8")):
        word = m.before.strip(" ,\n")
        if m.qualname != "<module>" or not (word.startswith('"') and word.endswith('"')):
            continue
        t = word[1:-1]
        emptied = m.op == "const" and m.after == '""' and (t in r._KEY_TRIGGERS or any(t in g for g in groups))
        halved = m.op == "drop-entry" and any(t in g and len(g) == 2 for g in groups)
        if emptied or halved:
            out[m.key] = why
    return out


EQUIVALENT: dict[str, str] = {
    **_redact_trigger_equivalents(),
    "skills/incidents/model.py:Incident.apply:const: 0 -> 1": "the default of posted_through: every caller in the "
    "product (IncidentStore.record) passes it",
    "skills/incidents/model.py:Incident.apply:const: 1 -> 2 #2": "rev only tells the publisher the header is stale "
    "(compared with <): a larger step for truncated alerts marks it stale the same",
    'skills/deploy/confirm.py:precheck:const: "" -> "XX"': "no name typed read as 'XX' instead of '': a service "
    "name is a lower-case DNS label, so neither ever matches one",
    'skills/deploy/confirm.py:misplaced:return: "" -> None': "'' and None are both 'in its place' to the only "
    "callers (`if why := misplaced(...)`)",
    _Q + '_dead:const: "1" -> ""': "the dead mark's value is never read: HSETNX only asks whether the field exists",
    _Q + "_process:compare: attempts >= self.max_attempts -> attempts > self.max_attempts": "the guard at the top of "
    "_process dead-letters the entry at its next reclaim instead, with the same error and attempt count: a delay of "
    "alert_reclaim_idle_ms, not a different outcome",
    "bot/mcp_plans.py:PlanPoster.ask_human:drop-call: task.add_done_callback(BACKGROUND.discard) -> pass": "only lets "
    "a finished write's task be garbage-collected",
    "skills/diagnosis/analyzers/memory.py:<module>:drop-entry: r\"To serve at least one request with the models?'s "
    'max seq len", -> ': "vLLM prints this sentence only with 'KV cache is needed, which is larger than the available "
    "KV cache memory' in the same line (vllm/v1/core/kv_cache_utils.py), which the alternative before it matches",
    "skills/locks.py:LockHolder.describe:arith: (time.time() - self.since) // 60 -> (time.time() - self.since)"
    " / 60": "int(x / 60) == int(x // 60) for x >= 0, and max(0, …) clamps a negative age (clock skew) to 0 either way",
    "skills/locks.py:ServiceLock.acquire:const: 8 -> 9": "the owner token is random: its length is unseen",
    "skills/deploy/plans.py:PlanStore.get:compare: len(plan_id) > 64 -> len(plan_id) >= 64": "the length guard only "
    "saves a Redis lookup: plan ids are 12 hex digits, so a 64-character id names no plan either way",
    _PUB + "_channel_step:const: False -> True #1": "another instance holds the channel's lease: the step's `did` "
    "only decides whether the loop idles before the next step",
    _PUB + '_channel_step:const: "fixcheck_due" -> ""': "the overlay on this step's copy of the record: a fix check "
    "is due alert_fix_check_s (> 0) later, never in the step that arms it, and the next step reads it from Redis",
    _PUB + "_effects:const: 3 -> 4": "a findings reply's priority against other effects: one incident never has a "
    "reply and new lines pending in one step, so the thread's order is the same; only a due header edit (an update, "
    "not a thread post) may go one step before the reply",
    _PUB + '_effects:const: "post" -> "" #3': "the method only picks the rate-limit bucket: anything but 'update' "
    "takes the channel's post bucket",
    _PUB + "_effects:const: 0 -> 1 #3": "the header's rev is written with its ts (effects.py), so a posted header "
    "always has one: the default is never read",
}

_STATUS_KILLED = {"killed", "timeout"}


@dataclass
class Job:
    target: Target
    mutant: Mutant
    tests: list[str]  # node ids, or whole test files when no in-process test reached the lines
    covered: bool
    timeout: float
    status: str = "unrun"  # unrun / killed / timeout / survived / error
    secs: float = 0.0
    log: str = ""


@dataclass
class Baseline:
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)  # node id -> {"secs", "passed"}
    lines: dict[str, dict[int, set[str]]] = field(default_factory=dict)  # path -> line -> node ids

    def failing(self) -> list[str]:
        return sorted(n for n, r in self.tests.items() if not r["passed"])


def _missing(targets: list[Target]) -> list[str]:
    """Targets whose files are gone (a module moved): they would mutate nothing and be silently left out."""
    out = [f"{t.name}: no file {p}" for t in targets for p in t.paths if not (ROOT / p).is_file()]
    out += [f"{t.name}: no test file {p}" for t in targets for p in t.tests if not (ROOT / p).is_file()]
    return out


def sample(target: Target, mutants: list[Mutant], size: int, seed: int) -> list[Mutant]:
    """A fixed-size sample, the same for the same code, seed and target name; size <= 0 means all."""
    if size <= 0 or size >= len(mutants):
        return list(mutants)
    return random.Random(f"{seed}:{target.name}").sample(mutants, size)


def _copy_checkout(dest: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for raw in files:
        if not raw:
            continue
        rel = Path(raw.decode())
        if not (ROOT / rel).is_file():  # deleted in the work tree
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    # Compile once, so the workers' children read cached bytecode for every module but the mutated one.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "bot", "handlers", "skills", "prompts", "tests"], cwd=dest
    )


def _env(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(copy)  # before the editable install: subprocesses the tests start run the copy too
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _baseline(copies: list[Path], targets: list[Target], test_files: list[str]) -> Baseline:
    """Run the test files once under coverage, split over the copies (one process each)."""
    include = os.pathsep.join(str(c / p) for c in copies for t in targets for p in t.paths)
    procs = []
    shares = [test_files[i :: len(copies)] for i in range(len(copies))]
    for i, (copy, files) in enumerate(zip(copies, shares, strict=True)):
        if not files:
            continue
        env = _env(copy) | {
            "MUTATION_COVERAGE_FILE": str(copy / f".mutation-coverage-{i}"),
            "MUTATION_BASELINE_OUT": str(copy / f".mutation-baseline-{i}.json"),
            "MUTATION_COVERAGE_INCLUDE": include,
        }
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "bench.mutation_coverage", *files]
        log = (copy / f".mutation-baseline-{i}.log").open("w", encoding="utf-8")
        procs.append((i, copy, subprocess.Popen(cmd, cwd=copy, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    import coverage

    base = Baseline()
    for i, copy, proc, log in procs:
        proc.wait()
        log.close()
        out = copy / f".mutation-baseline-{i}.json"
        if not out.is_file():
            tail = (copy / f".mutation-baseline-{i}.log").read_text(encoding="utf-8", errors="replace")[-2000:]
            raise SystemExit(f"the baseline run did not finish (exit {proc.returncode}):\n{tail}")
        base.tests.update(json.loads(out.read_text(encoding="utf-8")))
        data = coverage.CoverageData(basename=str(copy / f".mutation-coverage-{i}"))
        data.read()
        for measured in data.measured_files():
            rel = str(Path(measured).relative_to(copy))
            per_line = base.lines.setdefault(rel, {})
            for line, contexts in data.contexts_by_lineno(measured).items():
                per_line.setdefault(line, set()).update(c for c in contexts if c)
    return base


def _jobs(targets: list[Target], chosen: dict[str, list[Mutant]], base: Baseline) -> list[Job]:
    failing = set(base.failing())
    jobs_by_target: list[list[Job]] = []
    for t in targets:
        files = [f for f in t.tests]
        own_tests = {n for n in base.tests if n.split("::", 1)[0] in files and n not in failing}
        target_secs = sum(base.tests[n]["secs"] for n in own_tests)
        jobs = []
        for m in chosen[t.name]:
            src = (ROOT / m.path).read_text(encoding="utf-8")
            last = m.line + src[m.start : m.end].count("\n")
            reached: set[str] = set()
            for ln in range(m.line, last + 1):
                reached |= base.lines.get(m.path, {}).get(ln, set())
            tests = sorted(reached & own_tests, key=lambda n: (base.tests[n]["secs"], n))
            if tests:
                secs = sum(base.tests[n]["secs"] for n in tests)
                jobs.append(Job(t, m, tests, True, max(60.0, 3 * secs + 20)))
            else:
                # Nothing in-process reached it: every test of the target (minus the ones failing already).
                deselect = [f"--deselect={n}" for n in sorted(failing) if n.split("::", 1)[0] in files]
                jobs.append(Job(t, m, [*files, *deselect], False, max(60.0, 3 * target_secs + 20)))
        jobs_by_target.append(jobs)
    # Round-robin across targets: a time limit leaves the unrun spread evenly.
    out: list[Job] = []
    for i in range(max((len(j) for j in jobs_by_target), default=0)):
        out += [jobs[i] for jobs in jobs_by_target if i < len(jobs)]
    return out


class Worker:
    """One fork server (bench/mutation_worker.py) in its own copy of the checkout."""

    def __init__(self, copy: Path, test_files: list[str]) -> None:
        self.copy = copy
        self.proc = subprocess.Popen(
            [sys.executable, str(copy / "bench" / "mutation_worker.py"), *test_files],
            cwd=copy,
            env=_env(copy),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=(copy / ".mutation-worker.log").open("w", encoding="utf-8"),
            text=True,
        )
        ready = self.proc.stdout.readline() if self.proc.stdout else ""
        if '"ready"' not in ready:
            log = (copy / ".mutation-worker.log").read_text(encoding="utf-8", errors="replace")[-2000:]
            raise SystemExit(f"a mutation worker did not start:\n{log}")

    def run(self, job: Job, n: int) -> None:
        path = self.copy / job.mutant.path
        original = path.read_text(encoding="utf-8")
        cached = Path(importlib.util.cache_from_source(str(path)))
        log = self.copy / f".mutant-{n}.log"
        try:
            cached.unlink(missing_ok=True)
            path.write_text(job.mutant.apply(original), encoding="utf-8")
            args = ["-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", f"--timeout={int(job.timeout)}"]
            assert self.proc.stdin and self.proc.stdout
            self.proc.stdin.write(json.dumps({"args": [*args, *job.tests], "timeout": job.timeout, "log": str(log)}))
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
            answer = json.loads(self.proc.stdout.readline())
        finally:
            path.write_text(original, encoding="utf-8")
            py_compile.compile(str(path), cfile=str(cached), quiet=1)
        rc, job.secs = int(answer["rc"]), float(answer["secs"])
        text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
        job.log = text[-1500:]
        if rc == -1:
            job.status = "timeout"
        elif rc == 0:
            job.status = "survived"
        elif rc in (1, 2, 3) or (rc == 4 and ("ImportError" in text or "Error" in text)):
            job.status = "killed"  # a test failed, or the mutated module no longer imports
        else:
            job.status = "error"
        log.unlink(missing_ok=True)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _run_jobs(jobs: list[Job], copies: list[Path], test_files: list[str], deadline: float, progress: bool) -> None:
    todo: queue.Queue[tuple[int, Job]] = queue.Queue()
    for i, j in enumerate(jobs):
        todo.put((i, j))
    done = [0]
    lock = threading.Lock()

    def work(copy: Path) -> None:
        worker = Worker(copy, test_files)
        try:
            while time.monotonic() < deadline:
                try:
                    n, job = todo.get_nowait()
                except queue.Empty:
                    return
                job.timeout = min(job.timeout, max(30.0, deadline - time.monotonic()))
                worker.run(job, n)
                with lock:
                    done[0] += 1
                    if progress:
                        print(f"  [{done[0]}/{len(jobs)}] {job.status:<8} {job.secs:6.1f}s  {job.mutant.key[:120]}",
                              flush=True)  # fmt: skip
        finally:
            worker.close()

    threads = [threading.Thread(target=work, args=(c,), daemon=True) for c in copies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def report(targets: list[Target], totals: dict[str, int], jobs: list[Job], elapsed: float) -> tuple[str, float | None]:
    """The table; the overall score over what ran (None when nothing ran)."""
    lines = [
        f"{'target':<15} {'mutants':>7} {'sampled':>8} {'ran':>4} {'unrun':>5} {'killed':>6} {'survived':>8}"
        f" {'equiv':>5} {'error':>5} {'uncov':>5} {'score':>7}"
    ]
    all_ran = all_killed = all_sampled = 0
    for t in targets:
        mine = [j for j in jobs if j.target.name == t.name]
        equiv = [j for j in mine if j.mutant.key in EQUIVALENT]
        counted = [j for j in mine if j.mutant.key not in EQUIVALENT]
        ran = [j for j in counted if j.status in (*_STATUS_KILLED, "survived")]
        killed = sum(1 for j in ran if j.status in _STATUS_KILLED)
        unrun = sum(1 for j in counted if j.status == "unrun")
        errors = sum(1 for j in counted if j.status == "error")
        uncovered = sum(1 for j in mine if not j.covered)
        score = f"{100.0 * killed / len(ran):6.1f}%" if ran else "     —"
        lines.append(
            f"{t.name:<15} {totals[t.name]:>7} {len(mine):>8} {len(ran):>4} {unrun:>5} {killed:>6}"
            f" {len(ran) - killed:>8} {len(equiv):>5} {errors:>5} {uncovered:>5} {score:>7}"
        )
        all_ran += len(ran)
        all_killed += killed
        all_sampled += len(counted)
    overall = 100.0 * all_killed / all_ran if all_ran else None
    share = 100.0 * all_ran / all_sampled if all_sampled else 0.0
    score_text = f"{overall:.1f}% killed" if overall is not None else "no score (nothing ran)"
    lines.append(
        f"{'all':<15} {sum(totals[t.name] for t in targets):>7} {all_sampled:>8} {all_ran:>4}"
        f"  ran {share:.1f}% of the sample; {all_killed}/{all_ran} {score_text}  ({elapsed:.0f} s)"
    )
    return "\n".join(lines), overall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--children", type=int, default=2, help="worker processes (default 2: the machine has 2 cores)")
    ap.add_argument("--only", default="", help="comma-separated target names: " + ",".join(t.name for t in TARGETS))
    ap.add_argument("--sample", type=int, default=DEFAULT_SAMPLE, help=f"mutants per target (default {DEFAULT_SAMPLE})")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"the sample's seed (default {DEFAULT_SEED})")
    ap.add_argument("--all", action="store_true", help="run every mutant, no sample")
    ap.add_argument("--keep", type=Path, help="work in this directory and keep it (results.json there)")
    ap.add_argument("--fail-under", type=float, default=0.0, help="exit 1 when the score (%%) is lower")
    ap.add_argument("--time-limit-s", type=float, default=1800, help="stop starting mutants after this (default 1800)")
    ap.add_argument("--list", action="store_true", help="print the sampled mutants, run nothing")
    ap.add_argument("--quiet", action="store_true", help="no line per mutant while running")
    args = ap.parse_args()

    names = [n for n in args.only.split(",") if n]
    unknown = set(names) - {t.name for t in TARGETS}
    if unknown:
        ap.error(f"unknown target(s) {sorted(unknown)}; known: {[t.name for t in TARGETS]}")
    targets = [t for t in TARGETS if not names or t.name in names]
    missing = _missing(targets)
    if missing:
        ap.error("stale target(s), update TARGETS: " + "; ".join(missing))

    totals: dict[str, int] = {}
    chosen: dict[str, list[Mutant]] = {}
    for t in targets:
        every = [m for p in t.paths for m in mutants_of(p, (ROOT / p).read_text(encoding="utf-8"), t.only)]
        totals[t.name] = len(every)
        chosen[t.name] = sample(t, every, 0 if args.all else args.sample, args.seed)
    if args.list:
        for t in targets:
            print(f"{t.name}: {len(chosen[t.name])}/{totals[t.name]} sampled (seed {args.seed})")
            for m in chosen[t.name]:
                print("  " + m.diff().replace("\n", "\n  "))
        return 0

    started = time.monotonic()
    deadline = started + args.time_limit_s
    work = args.keep.resolve() if args.keep else Path(tempfile.mkdtemp(prefix="gemma-sre-mutation-"))
    try:
        copies = [work / f"w{i}" for i in range(max(1, args.children))]
        for c in copies:
            shutil.rmtree(c, ignore_errors=True)
            c.mkdir(parents=True)
            _copy_checkout(c)
        test_files = sorted({f for t in targets for f in t.tests})
        sampled = sum(len(v) for v in chosen.values())
        print(
            f"mutation: {len(targets)} target(s), {sampled} sampled of {sum(totals.values())} mutants "
            f"(seed {args.seed}), {len(copies)} workers, in {work}",
            flush=True,
        )
        base = _baseline(copies, targets, test_files)
        failing = base.failing()
        print(f"baseline: {len(base.tests)} tests in {time.monotonic() - started:.0f} s; failing: {len(failing)}")
        for n in failing:
            print(f"  failing before any mutant (left out of every selection): {n}")
        jobs = _jobs(targets, chosen, base)
        _run_jobs(jobs, copies, test_files, deadline, progress=not args.quiet)
        elapsed = time.monotonic() - started
        if time.monotonic() >= deadline and any(j.status == "unrun" for j in jobs):
            print(f"time limit ({args.time_limit_s:.0f} s) reached: mutants not started are counted as unrun")
        table, overall = report(targets, totals, jobs, elapsed)
        print("\n" + table)
        survivors = [j for j in jobs if j.status == "survived" and j.mutant.key not in EQUIVALENT]
        if survivors:
            print("\nsurviving mutants (give each a test, or an entry in EQUIVALENT with the reason):")
            for j in survivors:
                sel = (
                    f"{len(j.tests)} test(s)"
                    if j.covered
                    else "every test of the target (no in-process test reached it)"
                )
                print(f"  [{j.target.name}] {j.mutant.key}\n    judged by {sel}")
                print("    " + j.mutant.diff().replace("\n", "\n    "))
        errors = [j for j in jobs if j.status == "error"]
        for j in errors:
            print(f"\nerror (not counted) [{j.target.name}] {j.mutant.key}:\n{j.log}")
        equiv = [j for j in jobs if j.mutant.key in EQUIVALENT]
        if equiv:
            print("\nequivalent (not counted):")
            for j in equiv:
                print(f"  {j.mutant.key}: {EQUIVALENT[j.mutant.key]}")
        (work / "results.json").write_text(
            json.dumps(
                [
                    {
                        "target": j.target.name,
                        "key": j.mutant.key,
                        "status": j.status,
                        "secs": j.secs,
                        "covered": j.covered,
                        "tests": len(j.tests),
                    }
                    for j in jobs
                ],
                indent=1,
            ),
            encoding="utf-8",
        )
        return 1 if overall is not None and overall < args.fail_under else 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
