"""The model-based test of whole console runs at scale: Hypothesis drives the console against the sandbox for
N examples of up to M steps (the rules and invariants below) and prints what it found; tests/test_console_model.py
runs a few deterministic examples of the same machine in the suite.

    .venv/bin/python bench/console_model.py [--examples 300] [--steps 30] [--seed 0]

Violations are collected, not raised, so one run counts them all (each distinct message once, with how often).

The machine (issue 25 item 7): Hypothesis's stateful testing types what a user
types into the console, against the sandbox, and after every step checks what the bot said against what the
simulated project shows.

Rules: deploy (and a canary deploy), confirm, scale, rollback, promote, destroy, sandbox scenarios, fix buttons,
diagnose, fit of a profile and its Plan deploy button, cost, metrics, status, the Cloud TPU profile and its cost,
Ctrl-C during a confirmed write, and idle spells at the prompt (the world goes on). Invariants,
after every step (the world first settled: background watches done, starting revisions decided):
- a reply saying a revision is ready and serving N% (or holds 100% after a rollback) matches the stand-in;
- every confirmed write has one audit record, not pending once settled, whose outcome matches the stand-in
  (ok: the revision it names is ready; failed: it is not);
- no write is offered that would change nothing (a plan with Confirm shows changes; a confirmed write that
  succeeded changed the service);
- a scale confirmed while a ready revision serves does not fail (it must not build on a failed template);
- a plan button's label names every parameter its plan changes (and the plan applies nothing more);
- one configuration, one price: a deploy plan's $/h is the list price of the CPU, memory and GPU it deploys
  (what `/gemma cost` charges for them);
- every revision a scenario made fail (and alerted) has its own incident thread with findings;
- one price per configuration in every reply: fit's "Cost", a plan's "as deployed" and `/gemma cost` are the list
  price of the GPU, vCPU and memory each names; a running TPU slice costs what its plan said;
- fit's Plan deploy button plans what fit priced (the same vCPU, memory and $/h, or a refusal that it changes
  nothing);
- every diff's base is the serving revision, or the plan names it: when the template is not what serves, a plan's
  change list says which revision it is against;
- the gcloud equivalent changes exactly what the plan changes: every line of the change list is expressed by the
  commands it prints (`unexpressed`);
- sandbox metrics agree with the plan of what serves: `/gemma metrics`' KV capacity is what the plan that made the
  serving revision predicted;
- status says what the stand-in shows: ready only with a ready revision taking traffic, a split with its shares, at
  least an instance per revision taking traffic;
- TPU replies speak TPU: a slice's deploy progress uses none of Cloud Run's revision stages.

Rules take no preconditions: those would read the world, which timing can change (where a Ctrl-C lands), and
Hypothesis replays its choices; a rule that does not apply does nothing. One sandbox serves many examples (its
project is reset between them; each example has its own Redis keys).
`ConsoleModel.collect` set: violations are gathered (this script counts them); unset (the suite): a violation
fails the test with the steps that led to it.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import logging
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from bot.sandbox.cloud import Sandbox
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.console_session import CONFIRMED, READY_IDLE, READY_SERVING, SERVICE, ConsoleSession
from skills.audit import latest
from skills.capacity.prices import load_prices

log = logging.getLogger(__name__)

SCENARIOS = ("kv-cache-too-small", "gpu-oom-at-load", "host-memory", "probe-too-short")
ROLLED = re.compile(r"100% of traffic on `([\w-]+)`")
PLAN_TITLE = re.compile(r"^Plan: (Redeploy|Scale|Deploy|Roll|Delete)", re.M)
PRICE = re.compile(r"~\$(\d+\.\d\d)/h")
TPU_PROFILE, TPU_SERVICE = "gemma4-31b-tpu-v6e4", "vllm-gemma4-tpu"  # skills/data/profiles.yaml; TPU_SERVICE_NAME
TPU_PRICE = re.compile(r"Cost while ACTIVE, serving or idle \(no scale to zero\): \$([\d,]+\.\d\d)/h")
# The sandbox announces a scenario's failed, alerted revision; the incident header names the revision; each
# investigation prints one findings summary line.
ALERTED = re.compile(r"Revision `([\w-]+)` failed \([\w.-]+\); Cloud Monitoring alerts\.")
INCIDENT_HEAD = re.compile(r"^\s*Revision ([\w-]+) of [\w-]+ failed to become ready", re.M)
FINDINGS = re.compile(r"^  \| [\w-]+: (?:\d+ finding|no known failure)", re.M)
# Cloud Run's own stages and words, which a TPU deploy's replies must not use (a slice has no revisions)
CLOUD_RUN_WORDS = ("revision created", "instance starting", "weights loading", "traffic moves only when ready")
PLANNED_KV = re.compile(r"^• KV cache ([\d,]+) tokens", re.M)  # a plan's capacity check
METRICS_KV = re.compile(r"KV cache capacity\s+([\d,]+) tokens")
STATUS_HEAD = re.compile(rf"^. {SERVICE}: (\S.*)$", re.M)
STATUS_SPLIT = re.compile(r"Traffic\s+split: (.*)$", re.M)
STATUS_INSTANCES = re.compile(r"Instances\s+(\d+) now")


def reset(sandbox: Sandbox) -> None:
    """Put the shared sandbox back to its first state: the seeded service, nothing else."""
    run: CloudRunStandIn = sandbox.cloud_run
    with run._lock:
        run.services.clear()
        run.revisions.clear()
        run.ops.clear()
    sandbox.lifecycle.active.clear()
    sandbox.lifecycle.finished.clear()
    sandbox.logging.entries.clear()
    sandbox.saturated = False
    with sandbox.monitoring._lock:  # the last example's revisions' series would add to this one's
        sandbox.monitoring.series.clear()
    sandbox.fleet.reset()
    sandbox._serving = ""  # the seeded revision is served anew
    with sandbox.tpu._lock:  # no TPU slice: each example deploys its own
        sandbox.tpu.queued.clear()
        sandbox.tpu.ops.clear()
    sandbox._seed(sandbox._spec)


@dataclass
class Shared:
    """What outlives one example: the event loop and the sandbox."""

    redis_url: str = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    sandbox: Sandbox | None = None
    speed: float = 3000.0

    def start(self) -> Shared:
        from bot.sandbox.clock import SandboxClock
        from bot.settings import load_settings

        sb = Sandbox(clock=SandboxClock(self.speed), image=load_settings().vllm_image)
        self.sandbox = self.loop.run_until_complete(asyncio.to_thread(sb.start))
        return self

    def close(self) -> None:
        if self.sandbox is not None:
            self.loop.run_until_complete(self.sandbox.aclose())
        self.loop.close()


_CHANGE = re.compile(r"^\s*([~+-]) (\S+(?: --[\w-]+)?): (.*)$")


def section(text: str, heading: str) -> str:
    """A section of a reply as the console prints it (`== heading`), or ''."""
    m = re.search(rf"(?:^|\n)== {re.escape(heading)}[^\n]*\n(.*?)(?=\n== |\n  \[\d+\] |\Z)", text, re.S)
    return m.group(1) if m else ""


def unexpressed(plan_text: str) -> list[str]:
    """The plan's change lines that its gcloud equivalent does not express; a kind of field this oracle does
    not know counts as unexpressed (look at it). Read off the text only, never the code that wrote it."""
    changes = section(plan_text, "Changes to the running service")
    gcloud = section(plan_text, "gcloud equivalent")
    args = re.search(r"--args=(\S+)", gcloud)
    arg_list = args.group(1).strip("'").split(",") if args else []
    missing = []
    for line in changes.splitlines():
        m = _CHANGE.match(line)
        if not m:
            continue
        sign, field, value = m.groups()
        new = value.split(" -> ")[-1] if sign != "-" else ""
        if " --" in field and ".args" in field:
            flag = field.split(" ", 1)[1]
            pairs = list(zip(arg_list, [*arg_list[1:], ""], strict=False))
            ok = (
                (flag not in arg_list)
                if sign == "-"
                else ((flag, new) in pairs or (new in ("on", "true") and flag in arg_list))
            )
        elif field.endswith("scaling.minInstanceCount"):
            ok = f"--min-instances={new}" in gcloud
        elif field.endswith("scaling.maxInstanceCount"):
            ok = f"--max-instances={new}" in gcloud
        elif ".startupProbe." in field:
            ok = f"{field.rsplit('.', 1)[1]}={new}" in gcloud
        elif field == "traffic":
            if new == "latest=100%":
                ok = "update-traffic" in gcloud and "--to-latest" in gcloud
            else:
                split = {p.strip().replace("%", "") for p in new.split(",")}
                given = re.search(r"--to-revisions=(\S+)", gcloud)
                ok = "update-traffic" in gcloud and given is not None and set(given.group(1).split(",")) == split
        elif field == "traffic.tags":
            old = {t.split("=")[0] for t in value.split(" -> ")[0].split(", ")} if sign != "+" else set()
            now = {t.split("=")[0] for t in new.split(", ")} if new else set()
            removed = re.search(r"--remove-tags=(\S+)", gcloud)
            ok = (old - now) <= set(removed.group(1).split(",") if removed else [])
        elif field == "template.revision":
            suffix = re.search(r"--revision-suffix=(\S+)", gcloud)
            if sign == "-":  # a new revision, named by Cloud Run: any command that makes one, or traffic moved to
                # the latest revision when the template already runs the configuration (it was made before)
                ok = any(c in gcloud for c in ("gcloud run deploy", "gcloud run services update ", "--to-latest"))
            else:  # gcloud names a revision `<service>-<suffix>`
                ok = suffix is not None and new.endswith("-" + suffix.group(1))
        elif field.startswith("annotations."):
            ok = field.split(".", 1)[1] in gcloud  # said in a comment: no flag sets them
        elif field == "template.maxInstanceRequestConcurrency":
            ok = f"--concurrency={new}" in gcloud
        elif field.endswith(".resources.limits.cpu"):
            ok = f"--cpu={new}" in gcloud
        elif field.endswith(".resources.limits.memory"):
            ok = f"--memory={new}" in gcloud
        elif field.endswith("].image"):
            ok = f"--image={new}" in gcloud
        else:
            ok = False
        if not ok:
            missing.append(line.strip())
    return missing


class ConsoleModel(RuleBasedStateMachine):
    shared: ClassVar[Shared | None] = None
    collect: ClassVar[list[str] | None] = None  # set: violations are appended here instead of raised
    steps_run: ClassVar[int] = 0
    rules_run: ClassVar[collections.Counter[str]] = collections.Counter()

    def __init__(self) -> None:
        super().__init__()
        shared = type(self).shared
        assert shared is not None and shared.sandbox is not None, "set ConsoleModel.shared first"
        self.loop = shared.loop
        reset(shared.sandbox)
        self.session = self.loop.run_until_complete(ConsoleSession(shared.redis_url, sandbox=shared.sandbox).start())
        self.out = ""  # what the last step printed
        self.checked: set[str] = set()  # plan ids whose outcome was checked
        self.before: dict[str, Any] = {}  # plan id -> (kind, world before its confirm, healthy then)
        self.clicked: list[tuple[str, str]] = []  # (label, plan text) of the last fix click
        self.fitted: list[tuple[str, str]] = []  # (fit's reply, the plan its Plan deploy button made)
        self.tpu_price: tuple[str, str] | None = None  # the TPU plan's $/h for the slice, and its zone
        self.diffs_checked: set[str] = set()  # plan texts whose diff base was checked
        self.planned_kv: dict[str, int] = {}  # revision -> the KV capacity the plan that made it predicted
        self.log: list[str] = []

    def teardown(self) -> None:
        self.loop.run_until_complete(self.session.close(keep_sandbox=True))

    # --- driving ----------------------------------------------------------------------------------------
    def _run(self, coro: Any) -> str:
        t0 = time.monotonic()
        out: str = self.loop.run_until_complete(coro)
        t1 = time.monotonic()
        self.loop.run_until_complete(self.session.settle())
        type(self).steps_run += 1
        if time.monotonic() - t0 > 3:
            log.warning("slow step %r: %.1f s, settle %.1f s", self.log[-1:], t1 - t0, time.monotonic() - t1)
        return out

    def _type(self, line: str) -> None:
        self.log.append(line)
        type(self).rules_run[" ".join(line.split()[:2])] += 1
        mark = len(self.session.text)
        self._run(self.session.line(line))
        self.out = self.session.text[mark:]

    def _world(self) -> tuple[int, dict[str, int], bool, int]:
        svc = self.session.service()
        sandbox = self.session.sandbox
        revisions = len(sandbox.cloud_run.revisions.get(SERVICE, [])) if sandbox else 0
        return revisions, self.session.traffic(), svc is not None, len(sandbox.tpu.queued) if sandbox else 0

    def _healthy(self) -> bool:
        return any(p == 100 and self.session.revision_state(r) is True for r, p in self.session.traffic().items())

    def _confirm_plan(self) -> str:
        """The plan the console's `click Confirm` would press (the most recent Confirm button)."""
        for button, _ in reversed(self.session.responder.buttons):
            if button.label.lower().startswith("confirm"):
                return button.value
        return ""

    def _note_confirm(self, destroy: bool = False) -> None:
        assert self.session.deps is not None
        button = next((b for b, _ in reversed(self.session.responder.buttons) if b.label.startswith("Destroy")), None)
        plan_id = button.value if destroy and button is not None else self._confirm_plan()
        plan = self.loop.run_until_complete(self.session.deps.writes.plan(plan_id))
        if plan is not None:
            self.before[plan.id] = (plan.kind, self._world(), self._healthy())

    def _has(self, prefix: str) -> bool:
        return any(b.label.lower().startswith(prefix.lower()) for b, _ in self.session.responder.buttons)

    # --- rules --------------------------------------------------------------------------------------------
    # A plan is followed by what the user then does with it: nothing, Confirm, or Confirm and Ctrl-C.
    THEN = st.sampled_from(["leave", "confirm", "confirm", "interrupt"])

    def _then(self, then: str) -> None:
        if then == "leave" or not self._pending_confirm():
            return
        self.every_diff_is_against_what_serves_or_says_so()  # the plan against the world it was made in
        out = self.out
        if then == "confirm":
            self.confirm()
        else:
            self.interrupt()
        self.out = out + self.out

    def _pending_confirm(self) -> bool:
        """The most recent Confirm button's plan can still be confirmed."""
        plan_id = self._confirm_plan()
        if not plan_id or self.session.deps is None:
            return False
        return self.loop.run_until_complete(self.session.deps.writes.plan(plan_id)) is not None

    def _exists(self) -> bool:
        return self.session.service() is not None

    @rule(mml=st.sampled_from([8192, 16384, 32768]), then=THEN)
    def deploy(self, mml: int, then: str) -> None:
        self._type(f"/gemma deploy gemma4-12b-qat-l4 --max-model-len {mml}")
        self._then(then)

    @rule(mml=st.sampled_from([8192, 16384]), then=THEN)
    def canary(self, mml: int, then: str) -> None:
        if not self._exists():
            return
        self._type(f"/gemma deploy gemma4-12b-qat-l4 --max-model-len {mml} --canary 10")
        self._then(then)

    @rule(then=THEN)
    def promote(self, then: str) -> None:
        buttons = [b for b, _ in self.session.responder.buttons if b.label.startswith("Promote")]
        if not buttons:
            return
        number = max(i for i, (b, _) in enumerate(self.session.responder.buttons) if b is buttons[-1]) + 1
        self._type(f"click {number}")
        self._then(then)

    @rule(profile=st.sampled_from(["gemma4-12b-qat-l4", "gemma4-26b-qat-l4"]), press=st.booleans())
    def fit(self, profile: str, press: bool) -> None:
        self._type(f"/gemma fit {profile}")
        fitted = self.out
        if press and self._has("Plan deploy"):
            number = max(
                i for i, (b, _) in enumerate(self.session.responder.buttons) if b.label.startswith("Plan deploy")
            )
            self._type(f"click {number + 1}")
            self.fitted.append((fitted, self.out))

    @rule()
    def cost(self) -> None:
        if self._exists():
            self._type("/gemma cost")

    @rule(then=THEN)
    def tpu(self, then: str) -> None:
        """The Cloud TPU profile: its plan prices the slice; once it runs, `/gemma cost` of it must say the same."""
        if self.session.sandbox is not None and self.session.sandbox.tpu.queued:
            self._type(f"/gemma cost {TPU_SERVICE}")
            return
        self._type(f"/gemma deploy {TPU_PROFILE}")
        quoted, zone = TPU_PRICE.search(self.out), re.search(r"on-demand in ([a-z0-9-]+)", self.out)
        if quoted and zone:
            self.tpu_price = (quoted.group(1), zone.group(1))
        self._then(then)

    @rule()
    def confirm(self) -> None:
        if not self._pending_confirm():
            return
        self._note_confirm()
        assert self.session.deps is not None
        # The plan this Confirm presses (not the last one printed: a button may belong to an earlier message)
        plan = self.loop.run_until_complete(self.session.deps.writes.plan(self._confirm_plan()))
        predicted = PLANNED_KV.search("\n".join(f"• {line}" for line in plan.fit_lines)) if plan else None
        self._type("click Confirm")
        made = READY_SERVING.search(self.out) or READY_IDLE.search(self.out)
        if predicted and made:
            self.planned_kv[made.group(1)] = int(predicted.group(1).replace(",", ""))

    @rule(seconds=st.sampled_from([0.2, 1.0]))
    def idle(self, seconds: float) -> None:
        """Nothing typed for a while at the prompt: the world goes on (watches, alerts and their closes)."""
        self.log.append(f"(idle {seconds:g} s)")
        type(self).rules_run["(idle)"] += 1
        mark = len(self.session.text)
        self._run(asyncio.sleep(seconds, result=""))
        self.out = self.session.text[mark:]

    @rule()
    def metrics(self) -> None:
        if self._exists():
            self._type("/gemma metrics")

    @rule()
    def status(self) -> None:
        if self._exists():
            self._type("/gemma status --fresh")

    @rule(low=st.integers(0, 1), high=st.integers(1, 3), then=THEN)
    def scale(self, low: int, high: int, then: str) -> None:
        if not self._exists():
            return
        self._type(f"/gemma scale {low} {high}")
        self._then(then)

    @rule(then=THEN)
    def rollback(self, then: str) -> None:
        if not self._exists():
            return
        self._type("/gemma rollback")
        self._then(then)

    @rule()
    def destroy(self) -> None:
        if not self._exists() or len(self.log) < 12:  # late in a run: after it, little works
            return
        self._type("/gemma destroy")
        if self._has("Destroy"):
            self._note_confirm(destroy=True)
            self._type("click Destroy")

    @rule(name=st.sampled_from(SCENARIOS))
    def scenario(self, name: str) -> None:
        if not self._exists():
            return
        self._type(f"/gemma sandbox {name}")

    @rule(pick=st.integers(0, 20), then=THEN)
    def fix(self, pick: int, then: str) -> None:
        buttons = self.session.responder.buttons
        labels = [b.label for b, _ in buttons if b.label.startswith(("Plan redeploy", "On the serving"))]
        if not labels:
            return
        label = labels[-1 - pick % len(labels)]
        number = max(i for i, (b, _) in enumerate(buttons) if b.label == label) + 1
        self._type(f"click {number}")
        self.clicked.append((label, self.out))
        self._then(then)

    @rule()
    def diagnose(self) -> None:
        if not self._exists():
            return
        self._type("/gemma diagnose")

    @rule()
    def interrupt(self) -> None:
        """Ctrl-C once the write has been submitted (the issue's "Ctrl-C four seconds after Confirm")."""
        if not self._pending_confirm():
            return
        self._note_confirm()
        self.log.append("click Confirm  ^C")
        type(self).rules_run["click Confirm ^C"] += 1
        mark = len(self.session.text)
        self._run(self.session.interrupt("click Confirm", lambda seen: "submitted" in seen))
        self.out = self.session.text[mark:]

    # --- invariants -----------------------------------------------------------------------------------------
    def _fail(self, what: str) -> None:
        message = f"{what}\n  steps: {' | '.join(self.log)}\n  last output:\n{self.out[-3000:]}"
        if type(self).collect is not None:
            type(self).collect.append(f"{what}\n    after: {' | '.join(self.log[-12:])}")  # type: ignore[union-attr]
            return
        raise AssertionError(message)

    @invariant()
    def replies_match_the_world(self) -> None:
        traffic = self.session.traffic()
        for revision, percent in READY_SERVING.findall(self.out):
            if self.session.revision_state(revision) is not True or traffic.get(revision, 0) != int(percent):
                self._fail(f"said `{revision}` is ready and serving {percent}%; the stand-in routes {traffic}")
        for revision in READY_IDLE.findall(self.out):
            if self.session.revision_state(revision) is not True or traffic.get(revision, 0):
                self._fail(f"said `{revision}` is ready and idle; the stand-in routes {traffic}")
        for revision in ROLLED.findall(self.out):
            if traffic.get(revision) != 100:
                self._fail(f"said 100% of traffic is on `{revision}`; the stand-in routes {traffic}")

    @invariant()
    def every_confirmed_write_has_one_settled_record(self) -> None:
        deps = self.session.deps
        assert deps is not None
        confirmed = set(CONFIRMED.findall(self.session.text))
        if not confirmed - self.checked:
            return
        records = self.loop.run_until_complete(latest(deps.redis, deps.settings.key("audit"), 50))
        for plan_id in confirmed - self.checked:
            mine = [e for e in records if e.plan_id == plan_id and e.result in ("pending", "ok", "failed")]
            if len(mine) != 1 or mine[0].result == "pending":
                self._fail(f"confirmed plan {plan_id}: audit records {[e.result for e in mine]} once settled")
                self.checked.add(plan_id)
                continue
            entry = mine[0]
            if entry.service == TPU_SERVICE:  # a slice, not a Cloud Run revision: its queued resource decides
                slice_ok = self.session.sandbox is not None and any(
                    q.endswith(f"/queuedResources/{TPU_SERVICE}") for q in self.session.sandbox.tpu.queued
                )
                if entry.result == "ok" and entry.action == "deploy" and not slice_ok:
                    self._fail(f"audit says the TPU deploy succeeded ({entry.detail[:120]}); no slice exists")
                self.checked.add(plan_id)
                continue
            said = READY_SERVING.search(entry.detail) or READY_IDLE.search(entry.detail)
            named = re.search(r"revision `([\w-]+)`", entry.detail)
            if entry.result == "ok" and entry.action in ("deploy", "redeploy", "scale"):
                if said is None or self.session.revision_state(said.group(1)) is not True:
                    self._fail(f"audit says {entry.action} ok ({entry.detail[:120]}); the stand-in disagrees")
            if entry.result == "failed" and named and self.session.revision_state(named.group(1)) is True:
                self._fail(f"audit says {entry.action} failed ({entry.detail[:120]}); the revision is ready")
            kind, world, healthy = self.before.get(plan_id, ("", None, False))
            if entry.result == "ok" and world is not None and world == self._world() and kind != "destroy":
                self._fail(f"{kind} plan {plan_id} was confirmed, succeeded and changed nothing")
            stale = "changed after this plan was made" in entry.detail  # someone else wrote first: refused, rightly
            if kind == "scale" and healthy and entry.result != "ok" and not stale:
                self._fail(f"a scale on a healthy serving service failed: {entry.detail[:200]}")
            self.checked.add(plan_id)

    @invariant()
    def no_plan_offers_a_change_of_nothing(self) -> None:
        for block in re.split(r"(?=^Plan: )", self.out, flags=re.M):
            if block.startswith("Plan: ") and "No field changes against the running service" in block:
                if re.search(r"\[\d+\] Confirm", block):
                    self._fail("a plan with nothing to change offers Confirm")

    @invariant()
    def a_button_names_every_change_its_plan_makes(self) -> None:
        while self.clicked:
            label, plan = self.clicked.pop()
            title = next((x for x in plan.splitlines() if x.startswith("Plan: Redeploy")), "")
            if not title or not re.search(r"\[\d+\] Confirm", plan):
                continue
            asked = set(re.findall(r"(\w+)=", label.split(":", 1)[1]))
            planned = set(re.findall(r"(\w+)=", title))
            if asked != planned or "Applied to fit" in plan:
                self._fail(f"button `{label}` planned `{title}`" + (" + applied to fit" if "Applied" in plan else ""))

    def _list_price(self, gpu: str, cpu: float, memory_gib: float) -> float:
        """The price table's instance-based rates in the sandbox's region, read here directly (no pricing code)."""
        table = load_prices()
        assert self.session.deps is not None
        tier = table.region(self.session.deps.settings.google_cloud_location).tier
        rates = table.tiers[tier]["instance"]
        gpu_rate = table.gpus[gpu][tier].no_zonal_redundancy.value
        return (
            gpu_rate * 3600
            + cpu * rates.vcpu_usd_per_s.value * 3600
            + memory_gib * rates.memory_usd_per_gib_s.value * 3600
        )

    @invariant()
    def one_configuration_one_price(self) -> None:
        """Every reply that prices an L4 configuration (a deploy plan, fit, `/gemma cost`) says the list price of
        the GPU, vCPU and memory it names, computed here from the catalog's list prices."""
        for block in re.split(r"(?=^Plan: |^✓ |^✗ |^vllm-gemma4: )", self.out, flags=re.M):
            if block.startswith("Plan: Deploy"):
                price = PRICE.search(block)
                cpu, mem = re.search(r"--cpu=(\d+)", block), re.search(r"--memory=(\d+)Gi", block)
                gpu = re.search(r"--gpu-type=([\w-]+)", block)
                found = (
                    (price.group(1), cpu.group(1), mem.group(1), gpu.group(1))
                    if price and cpu and mem and gpu
                    else None
                )
                what = "a deploy plan"
            elif block.startswith(("✓ ", "✗ ")) and " on nvidia-l4" in block.splitlines()[0]:
                cost = re.search(r"Cost\s+\$(\d+\.\d\d)/h, (\d+) vCPU", block)
                mem = re.search(r"→ memory (\d+)Gi", block)
                found = (cost.group(1), cost.group(2), mem.group(1), "nvidia-l4") if cost and mem else None
                what = "fit"
            elif block.startswith("vllm-gemma4: ") and "per running instance" in block:
                title = re.search(r"\$(\d+\.\d\d)/hour", block)
                config = re.search(r"GPU 1 x ([\w-]+), (\d+) vCPU, (\d+) GiB", block)
                found = (
                    (title.group(1), config.group(2), config.group(3), config.group(1)) if title and config else None
                )
                what = "/gemma cost"
            else:
                continue
            if found is None:
                continue
            usd, cpu_n, mem_n, gpu_name = found
            expected = self._list_price(gpu_name, float(cpu_n), float(mem_n))
            if f"{expected:.2f}" != usd:
                self._fail(f"{what} shows ${usd}/h for {cpu_n} vCPU, {mem_n} GiB, {gpu_name}: priced ${expected:.2f}/h")

    @invariant()
    def a_slice_costs_what_its_plan_said(self) -> None:
        """In the zone the plan named (a zone out of capacity hands over to the next, at that zone's price, which
        the plan's zone search lists)."""
        said = re.search(rf"^{TPU_SERVICE}: \$([\d,]+\.\d\d)/hour", self.out, re.M)
        where = re.search(r"Cloud TPU v6e-\d+ \(\d+ chips\), [a-z-]+, ([a-z0-9-]+)", self.out)
        if said and where and self.tpu_price and where.group(1) == self.tpu_price[1]:
            if said.group(1) != self.tpu_price[0]:
                self._fail(
                    f"the TPU plan priced the slice in {where.group(1)} ${self.tpu_price[0]}/h; /gemma cost says "
                    f"${said.group(1)}/hour"
                )

    @invariant()
    def fit_button_plans_what_fit_priced(self) -> None:
        while self.fitted:
            fitted, plan = self.fitted.pop()
            cost = re.search(r"Cost\s+\$(\d+\.\d\d)/h, (\d+) vCPU", fitted)
            mem = re.search(r"→ memory (\d+Gi)", fitted)
            if not (cost and mem):
                continue
            if "would change nothing" in plan:
                continue  # the configuration fit priced is the one running (refused, rightly)
            deployed = re.search(r"~\$(\d+\.\d\d)/h as deployed \((\d+) vCPU, (\d+Gi)", plan)
            if deployed is None:
                continue  # refused for another reason (a plan still open, a lock): not a plan of fit's
            if (deployed.group(1), deployed.group(2), deployed.group(3)) != (
                cost.group(1),
                cost.group(2),
                mem.group(1),
            ):
                self._fail(
                    f"fit priced ${cost.group(1)}/h with {cost.group(2)} vCPU, {mem.group(1)}; its button planned "
                    f"${deployed.group(1)}/h with {deployed.group(2)} vCPU, {deployed.group(3)}"
                )

    @invariant()
    def every_diff_is_against_what_serves_or_says_so(self) -> None:
        """Checked against the world when the plan was shown (`_then` checks it before a Confirm changes it)."""
        for block in re.split(r"(?=^Plan: )", self.out, flags=re.M):
            if not block.startswith(("Plan: Deploy", "Plan: Scale", "Plan: Redeploy")):
                continue
            if "Changes to the running service" not in block or block in self.diffs_checked:
                continue
            self.diffs_checked.add(block)
            info = self.session.sandbox.cloud_run.services.get(SERVICE) if self.session.sandbox else None
            serving = next((r for r, p in self.session.traffic().items() if p == 100), "")
            latest = str((info or {}).get("latestCreatedRevision", "")).rsplit("/", 1)[-1]
            said = f"serving revision `{serving}`" in block or f"`{serving}`, which serves" in block
            if serving and latest and serving != latest and not said:
                self._fail(f"a plan's changes are against template `{latest}` while `{serving}` serves, unsaid")

    @invariant()
    def the_gcloud_equivalent_changes_what_the_plan_changes(self) -> None:
        for block in re.split(r"(?=^Plan: )", self.out, flags=re.M):
            if block.startswith("Plan: ") and "== gcloud equivalent" in block and "== Changes to the running" in block:
                missing = unexpressed(block)
                if missing:
                    self._fail(f"the gcloud equivalent leaves out {len(missing)} change(s): {'; '.join(missing)[:300]}")

    @invariant()
    def every_failed_revision_has_its_own_investigation(self) -> None:
        """Each scenario revision whose failure was alerted opens its own incident with its findings.

        Counted from what the machine made happen (the sandbox's "Revision `X` failed (...); Cloud Monitoring
        alerts." line), not from the headers the bot printed, so alerts folded into another incident's thread
        (one failure per revision, each a different incident) show as missing investigations.
        """
        text = self.session.text
        alerted = set(ALERTED.findall(text))
        headed = set(INCIDENT_HEAD.findall(text))
        for revision in sorted(alerted - headed):
            self._fail(f"revision `{revision}` failed and was alerted, but no incident thread opened for it")
        findings = len(FINDINGS.findall(text))
        if len(alerted) > findings:
            self._fail(f"{len(alerted)} failed revisions alerted, {findings} investigations with findings")

    @invariant()
    def sandbox_metrics_agree_with_the_plan_of_what_serves(self) -> None:
        """`/gemma metrics`' KV capacity is what the plan that made the serving revision predicted (the sandbox's
        vLLM derives its figures from what was deployed, never a constant)."""
        said = METRICS_KV.search(self.out) if self.log and self.log[-1] == "/gemma metrics" else None
        serving = [r for r, p in self.session.traffic().items() if p == 100]
        if said is None or not serving or serving[0] not in self.planned_kv:
            return
        shown, planned = int(said.group(1).replace(",", "")), self.planned_kv[serving[0]]
        if shown != planned:
            self._fail(f"metrics say a KV capacity of {shown:,} tokens; the plan of `{serving[0]}` said {planned:,}")

    @invariant()
    def status_says_what_the_stand_in_shows(self) -> None:
        """Status says ready only when a ready revision takes traffic; a split is shown with the stand-in's shares;
        one instance per revision with traffic."""
        if not self.log or not self.log[-1].startswith("/gemma status"):
            return
        head = STATUS_HEAD.search(self.out)
        traffic = {r: p for r, p in self.session.traffic().items() if p}
        if head and head.group(1).startswith("ready"):
            if not any(self.session.revision_state(r) is True for r in traffic):
                self._fail(f"status says ready; the stand-in routes {traffic} to no ready revision")
        split = STATUS_SPLIT.search(self.out)
        shown = {r: int(p) for p, r in re.findall(r"(\d+)% `([\w-]+)`", split.group(1))} if split else {}
        if len(traffic) > 1 and shown != traffic:
            self._fail(f"status shows the split {shown or 'not at all'}; the stand-in routes {traffic}")
        # At least one instance per revision taking traffic; more when a revision that served within the last
        # alignment period (a minute of wall clock, hours of sandbox time here) had one (ALIGN_MAX)
        instances = STATUS_INSTANCES.search(self.out)
        if instances and len(traffic) > 1 and int(instances.group(1)) < len(traffic):
            self._fail(f"status says {instances.group(1)} instance(s) now; {len(traffic)} revisions take traffic")

    @invariant()
    def tpu_replies_speak_tpu(self) -> None:
        """A TPU deploy's progress speaks of its queued resource's states, never of Cloud Run's revisions."""
        if f"deploy `{TPU_SERVICE}`" not in self.out or f"deploy `{SERVICE}`" in self.out:
            return
        said = [w for w in CLOUD_RUN_WORDS if w in self.out]
        if said:
            self._fail(f"a TPU deploy's replies speak Cloud Run: {', '.join(said)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=300)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--speed", type=float, default=3000.0, help="sandbox clock speed")
    args = ap.parse_args()

    log_path = Path(tempfile.gettempdir()) / "console-model.log"
    logging.basicConfig(filename=log_path, level=logging.WARNING)  # the bot's own warnings: not the figures
    shared = Shared(speed=args.speed).start()
    found: list[str] = []
    ConsoleModel.shared, ConsoleModel.collect, ConsoleModel.steps_run = shared, found, 0
    examples = 0
    original = ConsoleModel.__init__

    first: list[int] = []  # the example in which the first violation showed

    def counting(self: ConsoleModel) -> None:
        nonlocal examples
        if found and not first:
            first.append(examples)
        if examples and examples % 10 == 0:  # a long run shows where it is (and what it found so far)
            print(
                f"... {examples} examples, {ConsoleModel.steps_run} steps, {time.monotonic() - t0:.0f} s, "
                f"{len(found)} violations" + (f" (first in example {first[0]})" if first else ""),
                flush=True,
            )
        examples += 1
        original(self)

    t0 = time.monotonic()
    ConsoleModel.__init__ = counting  # type: ignore[method-assign]
    try:
        from hypothesis import seed

        seeded = seed(args.seed)(run_state_machine_as_test)
        seeded(
            ConsoleModel,
            settings=settings(
                max_examples=args.examples,
                stateful_step_count=args.steps,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        shared.close()
    took = time.monotonic() - t0
    counts = collections.Counter(_kind(f) for f in found)
    print(
        f"console model: {examples} examples, {ConsoleModel.steps_run} steps (up to {args.steps} per example), "
        f"seed {args.seed}, {took:.0f} s"
    )
    print("lines typed: " + ", ".join(f"{k} {n}" for k, n in ConsoleModel.rules_run.most_common()))
    if not found:
        print("violations: 0")
        return 0
    print(f"violations: {len(found)} in {len(counts)} kinds; first seen in example {first[0] if first else examples}")
    for kind, n in counts.most_common():
        example = next(f for f in found if _kind(f) == kind)
        print(f"  {n:5d}  {kind}: e.g. {example[:900]}")
    return 1


def _kind(message: str) -> str:
    """A violation's kind: its message with names and numbers taken out."""
    import re

    return re.sub(r"`[^`]*`|[0-9a-f]{12}|\d+(\.\d+)?|\{[^}]*\}|\([^)]*\)", "…", message.splitlines()[0])[:90]


if __name__ == "__main__":
    raise SystemExit(main())
