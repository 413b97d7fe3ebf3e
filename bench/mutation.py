"""Mutation score of the code that guards writes, secrets and alerts: how many small deliberate bugs the tests
catch. Runs mutmut 3 over the guarded functions below, with the listed test files as the kill criterion, and
prints the score per target and every surviving mutant (its diff), so each one gets a test or an explanation.

    .venv/bin/python bench/mutation.py [--children 2] [--only confirm,locks] [--keep DIR] [--fail-under 90]

Why mutmut (3.x) rather than cosmic-ray: mutmut copies the code into `mutants/` of a work directory and switches
mutants at run time (trampolines), so nothing in the checkout is ever rewritten, and each mutant runs only the
tests that reached its function (it records which tests call which function in a first traced run), in a
forked pytest; cosmic-ray edits the source files in place and starts a fresh test command per mutant.
mutmut mutates code inside functions and methods only: module-level tables (the redaction patterns in
skills/logs/redact.py, the regexes of handlers/slack_request.py) are not mutated; their rules are checked one
by one by the tests of those modules.

The work happens in a copy of the checkout (tracked and new, unignored files) in a temporary directory, so a
run never leaves mutated files behind; --keep DIR keeps it (mutmut's own cache: `mutmut results`, `mutmut show
NAME` there). The run is bounded to the functions named here and to their tests: 2 worker processes by default
(the machine is shared). The score counts a mutant as killed when a test failed or it timed out; one that no
selected test reaches counts as surviving. Equivalent mutants (no behaviour can tell them apart) are listed in
EQUIVALENT with the reason and left out of the score.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Target:
    name: str
    path: str  # the module's file
    functions: tuple[str, ...]  # "fn" or "Class.method"; () = every function of the module
    tests: tuple[str, ...]  # the kill criterion: tests that exercise it for real
    guards: str  # what a bug here would let through

    @property
    def module(self) -> str:
        return self.path.removesuffix(".py").replace("/", ".")

    def globs(self) -> list[str]:
        """mutmut's mutant names: `pkg.mod.x_fn__mutmut_N`, methods `pkg.mod.xǁClassǁmethod__mutmut_N`."""
        if not self.functions:
            return [f"{self.module}.*"]
        out = []
        for fn in self.functions:
            cls, _, meth = fn.rpartition(".")
            out.append(f"{self.module}.xǁ{cls}ǁ{meth}__mutmut_*" if cls else f"{self.module}.x_{fn}__mutmut_*")
        return out


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
        "skills/deploy/confirm.py",
        (),
        (*PLAN_TESTS, "tests/test_deploy_failure_logs.py"),  # a failed write's log lines: `logs` reaches execute
        "role check, plan binding, typed name, one-shot, what the audit records",
    ),
    Target(
        "locks",
        "skills/deploy/locks.py",
        (),
        (*PLAN_TESTS, "tests/test_service_lock.py"),
        "one write per service at a time",
    ),
    Target(
        "plans",
        "skills/deploy/plans.py",
        ("Plan.blocked", "Plan.expired", "PlanStore.get", "PlanStore.claim", "PlanStore.unclaim", "PlanStore.discard"),
        PLAN_TESTS,
        "a plan confirmed at most once, within its window, never when it does not fit",
    ),
    Target(
        "redact",
        "skills/logs/redact.py",
        (),
        ("tests/test_redact_corpus.py", "tests/test_redact_rules.py", "tests/test_redact_plain_values.py"),
        "secrets out of logs/model/Slack",
    ),
    Target(
        "signature",
        "handlers/slack_request.py",
        ("verify", "_valid"),
        ("tests/test_slack_signature.py", "tests/test_foundation_slack.py", "tests/test_http_hardening.py"),
        "forged, stale or unsigned Slack requests refused",
    ),
    Target(
        "dedup",
        "bot/alert_queue.py",
        ("AlertQueue.dedup_key", "AlertQueue.enqueue"),
        ALERT_TESTS,
        "a webhook retry or repeat is not a new alert",
    ),
    Target("dedup-key", "skills/incidents/model.py", ("Alert.dedup_key",), ALERT_TESTS, "what counts as the same"),
    Target(
        "coalescing",
        "skills/incidents/publisher.py",
        ("IncidentPublisher._effects", "IncidentPublisher._channel_step"),
        ("tests/test_incidents_storm.py", "tests/test_incidents_threads.py", "tests/test_incidents_closure.py"),
        "repeats coalesced, header debounce, resolves at once, storm threshold, fix checks",
    ),
)

# Lines never mutated: the wording of our own log lines (what they say is checked where it matters, by the
# tests that read caplog; mutating every word of every log call would bury the mutants that change behaviour).
DO_NOT_MUTATE = [r"^\s*log\.(debug|info|warning|error|exception)\("]

# Mutants no test can kill because no behaviour differs, with why. Keyed by mutmut's mutant name (the numbers
# follow the code: re-check this list when the function changes).
_NONE_IS_EMPTY = "a missing header read as None instead of '' takes the same `not ts or not sig` branch"
_NO_SUCH_KEY = "the id guard only saves a Redis lookup: an empty or 64+ char id names no plan (ids are 12 hex)"
_HEADERS_FOLD_CASE = "bot/web.py passes Starlette Headers, whose lookups ignore case"
_CH = "skills.incidents.publisher.xǁIncidentPublisherǁ_channel_step__mutmut_"
_NEXT_STEP = (
    "the step stops once the state is written instead of going on: the next step (within the publisher's 0.1 s "
    "idle) reads it back and does the same"
)
_IDLE = "the step's `did` only decides whether the loop idles before the next step"
_OVERLAY = (
    "the fix/fixcheck_due overlay on this step's copy: a fix check is due alert_fix_check_s (> 0) later, never in "
    "the step that arms it, and the next step reads both from Redis"
)
_LOWERED = "the text is lower-cased first: it holds no 'X' to strip"
_EXTRA_PAD = "binascii ignores '=' beyond what a run needs (non-strict); a 4k+1 run is not base64 either way"
_CLOSE_AFTER_OPEN = "the closing quote is searched after the opening one, so it is never at 0"
_TRIGGER_ONLY = "a cheap trigger that only skips work: the rule behind it finds nothing when it is false"
EQUIVALENT: dict[str, str] = {
    "handlers.slack_request.x__valid__mutmut_4": "'UTF-8' and 'utf-8' name the same codec",
    "handlers.slack_request.x_verify__mutmut_3": _NONE_IS_EMPTY,
    "handlers.slack_request.x_verify__mutmut_5": _NONE_IS_EMPTY,
    "handlers.slack_request.x_verify__mutmut_11": _NONE_IS_EMPTY,
    "handlers.slack_request.x_verify__mutmut_13": _NONE_IS_EMPTY,
    "handlers.slack_request.x_verify__mutmut_7": _HEADERS_FOLD_CASE,
    "handlers.slack_request.x_verify__mutmut_15": _HEADERS_FOLD_CASE,
    "skills.deploy.locks.xǁLockHolderǁdescribe__mutmut_16": "int(x / 60) == x // 60 for x >= 0, and max(0, …) clamps",
    "skills.deploy.locks.xǁServiceLockǁacquire__mutmut_10": "the owner token's length is not observable (random)",
    "skills.deploy.locks.xǁServiceLockǁacquire__mutmut_11": "the owner token's length is not observable (random)",
    "skills.deploy.locks.xǁServiceLockǁ__init____mutmut_7": "'' for 'not held' compares to no lock value (JSON)",
    "skills.deploy.locks.xǁServiceLockǁrelease__mutmut_13": "'' for 'not held' compares to no lock value (JSON)",
    "skills.deploy.plans.xǁPlanStoreǁget__mutmut_1": _NO_SUCH_KEY,
    "skills.deploy.plans.xǁPlanStoreǁget__mutmut_3": _NO_SUCH_KEY,
    "skills.deploy.plans.xǁPlanStoreǁget__mutmut_4": _NO_SUCH_KEY,
    "skills.incidents.model.xǁAlertǁdedup_key__mutmut_4": "any constant marks 'no start' the same way",
    "skills.deploy.confirm.x_run_claimed__mutmut_1": "the default poll interval, which every caller overrides "
    "(WriteFlow.poll_s): when the watch looks, not what it finds",
    "skills.deploy.confirm.x_run_claimed__mutmut_42": "None and False are both 'not cancelled'",
    "skills.deploy.confirm.x_precheck__mutmut_49": "no name typed read as 'XXXX' instead of '': a service name is a "
    "lower-case DNS label, so neither ever matches one",
    # skills/incidents/publisher.py (coalescing)
    _CH + "39": "a missing edit_at reads as 0, the value written",
    _CH + "41": _NEXT_STEP,
    _CH + "65": _NEXT_STEP,
    _CH + "49": _IDLE,
    _CH + "116": _IDLE,
    **{_CH + str(n): _OVERLAY for n in (79, 80, 81, 82)},
    # skills/logs/redact.py (bench run of issue 38: 65% -> these left after tests/test_redact_rules.py)
    "skills.logs.redact.x__authz_sub__mutmut_28": _LOWERED,
    "skills.logs.redact.x__key_values__mutmut_35": _LOWERED,
    "skills.logs.redact.x__b64_text__mutmut_6": _EXTRA_PAD,
    "skills.logs.redact.x__b64_text__mutmut_10": "urlsafe_b64decode maps -_ to +/ then decodes as standard: a standard "
    "run decodes the same",
    "skills.logs.redact.x__b64_text__mutmut_21": "'UTF-8' and 'utf-8' name the same codec",
    "skills.logs.redact.x__b64_text__mutmut_27": "'X' is printable: counted either way",
    "skills.logs.redact.x__decoded_b64__mutmut_11": "every RFC 7468 label saying CERTIFICATE or PUBLIC KEY ends within "
    "the BEGIN line's first 40 bytes (ATTRIBUTE CERTIFICATE: 32)",
    "skills.logs.redact.x__decoded_b64__mutmut_13": "b'XXXX' holds neither label, as b'' does",
    "skills.logs.redact.x__key_values__mutmut_84": _CLOSE_AFTER_OPEN,
    "skills.logs.redact.x__key_values__mutmut_85": _CLOSE_AFTER_OPEN,
    "skills.logs.redact.x__rules__mutmut_50": _TRIGGER_ONLY + " (the signed-URL rule needs '=' and '?' or '&')",
    "skills.logs.redact.x__rules__mutmut_77": _TRIGGER_ONLY + " (the config-set rule needs both words)",
    "skills.logs.redact.x__rules__mutmut_140": _TRIGGER_ONLY + " (a bare PEM line is 40+ characters: len >= 40)",
    "skills.logs.redact.x__rules__mutmut_141": _TRIGGER_ONLY + " (a bare PEM line is 40+ characters: len >= 40)",
    "skills.logs.redact.x_redact__mutmut_10": _TRIGGER_ONLY + " (every shape rule needs a 24-character run)",
    "skills.logs.redact.x_redact__mutmut_19": _TRIGGER_ONLY + " (every shape rule needs a 24-character run)",
    "skills.logs.redact.x_redact_obj__mutmut_13": "'XXXX' is not a secret name, as '' is not",
    "skills.incidents.model.xǁAlertǁdedup_key__mutmut_7": "a 33-hex-digit prefix of the digest is as unique",
}

_KILLED = {"killed", "timeout", "segfault", "caught by type check"}


def _missing(targets: list[Target]) -> list[str]:
    """Targets whose file or functions are gone (a module moved): mutmut would find no mutant there and the
    target would score a silent 100%."""
    out = []
    for t in targets:
        src = ROOT / t.path
        if not src.is_file():
            out.append(f"{t.name}: no file {t.path}")
            continue
        tree = ast.parse(src.read_text(encoding="utf-8"))
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            defined |= {
                f"{cls.name}.{n.name}" for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            }
        out += [f"{t.name}: no function {fn} in {t.path}" for fn in t.functions if fn not in defined]
        out += [f"{t.name}: no test file {p}" for p in t.tests if not (ROOT / p).is_file()]
    return out


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


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join('"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"' for s in items) + "]"


def _write_config(dest: Path, targets: list[Target]) -> None:
    tests = sorted({t for tg in targets for t in tg.tests})
    sources = sorted({tg.path.split("/", 1)[0] for tg in targets})
    config = f"""

[tool.mutmut]
source_paths = {_toml_list(sources)}
only_mutate = {_toml_list(sorted({tg.path for tg in targets}))}
do_not_mutate_patterns = {_toml_list(DO_NOT_MUTATE)}
pytest_add_cli_args_test_selection = {_toml_list(tests)}
pytest_add_cli_args = ["-p", "no:cacheprovider"]
# the tests run gRPC and uvicorn stand-ins in threads: fork workers from a clean server process
process_isolation = "forkserver"
"""
    with (dest / "pyproject.toml").open("a", encoding="utf-8") as f:
        f.write(config)


def _results(work: Path) -> dict[str, str]:
    out = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=work, capture_output=True, text=True
    )
    status: dict[str, str] = {}
    for line in out.stdout.splitlines():
        name, sep, st = line.strip().rpartition(": ")
        if sep and "__mutmut_" in name:
            status[name] = st
    return status


def _diff(work: Path, name: str) -> str:
    out = subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=work, capture_output=True, text=True)
    lines = [ln for ln in out.stdout.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    return "\n".join("      " + ln.strip()[:150] for ln in lines[:6])


def _sort_key(name: str) -> tuple[str, int]:
    base, _, n = name.rpartition("__mutmut_")
    return base, int(n) if n.isdigit() else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--children", type=int, default=2, help="mutmut worker processes (default 2: a shared machine)")
    ap.add_argument("--only", default="", help="comma-separated target names: " + ",".join(t.name for t in TARGETS))
    ap.add_argument("--keep", type=Path, help="work in this directory and keep it (default: a temporary one)")
    ap.add_argument("--fail-under", type=float, default=0.0, help="exit 1 when the score (%%) is lower")
    ap.add_argument("--time-limit-s", type=float, default=3600, help="stop mutmut after this long (default 3600)")
    ap.add_argument("--report-only", action="store_true", help="with --keep: print the kept results, run nothing")
    args = ap.parse_args()

    names = [n for n in args.only.split(",") if n]
    unknown = set(names) - {t.name for t in TARGETS}
    if unknown:
        ap.error(f"unknown target(s) {sorted(unknown)}; known: {[t.name for t in TARGETS]}")
    targets = [t for t in TARGETS if not names or t.name in names]
    missing = _missing(targets)
    if missing:
        ap.error("stale target(s), update TARGETS: " + "; ".join(missing))

    work = args.keep.resolve() if args.keep else Path(tempfile.mkdtemp(prefix="gemma-sre-mutation-"))
    started = time.monotonic()
    try:
        globs = [g for t in targets for g in t.globs()]
        if args.report_only:
            if not args.keep or not (work / "mutants").is_dir():
                ap.error("--report-only needs --keep DIR of an earlier run")
            todo = []
        elif (work / "mutants").is_dir():
            # A kept directory: run only the mutants not checked yet (an interrupted run goes on where it was).
            before = _results(work)
            todo = [
                n for n, st in before.items() if st == "not checked" and any(fnmatch.fnmatchcase(n, g) for g in globs)
            ]
        else:
            work.mkdir(parents=True, exist_ok=True)
            _copy_checkout(work)
            _write_config(work, targets)
            todo = globs
        print(f"mutation: mutmut over {len(targets)} target(s), {args.children} workers, in {work}", flush=True)
        log_path = work / "mutmut-run.log"
        rc = 0
        if todo:
            with log_path.open("w", encoding="utf-8") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "mutmut", "run", "--max-children", str(args.children), *todo],
                    cwd=work,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its workers too are stopped at the time limit
                )
                try:
                    rc = proc.wait(timeout=args.time_limit_s)
                except subprocess.TimeoutExpired:
                    # mutmut bounds a mutant by CPU time; a mutant that makes a test wait idle (an alert never
                    # posted, a condition polled until its timeout) is only bounded here, by wall-clock time.
                    os.killpg(proc.pid, signal.SIGTERM)
                    try:
                        proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                    print(f"time limit ({args.time_limit_s:.0f} s) reached: mutants not run are shown as unrun")
                    rc = 0
        if rc != 0:
            tail = log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
            print(f"mutmut run failed (exit {rc}); the end of its output:\n{tail}", file=sys.stderr)
            return 2
        status = _results(work)
        elapsed = time.monotonic() - started

        print(
            f"\n{'target':<12} {'mutants':>7} {'killed':>7} {'survived':>8} {'no test':>7} {'equiv':>5}"
            f" {'unrun':>5} {'score':>6}"
        )
        total_killed = total_counted = 0
        survivors: list[tuple[Target, str, str]] = []
        for t in targets:
            mine = {n: s for n, s in status.items() if any(fnmatch.fnmatchcase(n, g) for g in t.globs())}
            equiv = [n for n in mine if n in EQUIVALENT]
            unchecked = sum(1 for s in mine.values() if s == "not checked")  # an interrupted run: not counted
            counted = {n: s for n, s in mine.items() if n not in EQUIVALENT and s != "not checked"}
            killed = sum(1 for s in counted.values() if s in _KILLED)
            no_test = sum(1 for s in counted.values() if s == "no tests")
            left = sorted((n for n, s in counted.items() if s not in _KILLED), key=_sort_key)
            survivors += [(t, n, counted[n]) for n in left]
            total_killed += killed
            total_counted += len(counted)
            score = 100.0 * killed / len(counted) if counted else 100.0
            print(
                f"{t.name:<12} {len(mine):>7} {killed:>7} {len(left) - no_test:>8} {no_test:>7} {len(equiv):>5}"
                f" {unchecked:>5} {score:>5.1f}%"
            )
        score = 100.0 * total_killed / total_counted if total_counted else 100.0
        print(f"{'all':<12} {total_counted:>7} {total_killed:>7}  score {score:.1f}% killed  ({elapsed:.0f} s)")
        if survivors:
            print("\nsurviving mutants (give each a test, or list it in EQUIVALENT with the reason):")
            for t, name, st in survivors:
                print(f"  [{t.name}] {name}: {st}")
                print(_diff(work, name))
        if EQUIVALENT:
            print("\nequivalent (not counted):")
            for name, why in sorted(EQUIVALENT.items(), key=lambda kv: _sort_key(kv[0])):
                if name in status:
                    print(f"  {name}: {why}")
        return 1 if score < args.fail_under else 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
