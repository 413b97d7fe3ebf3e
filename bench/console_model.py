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

Azure Container Apps (the app `vllm-gemma4-aca` the ACA profiles deploy, on the sandbox's ARM stand-in): rules for
a deploy of each ACA profile (with --max-model-len, --min-instances), confirm, status, revisions, cost, destroy
(typed name), fit on t4/a100-80gb and its Plan deploy button if it shows one, scale, rollback, a canary (its
Promote comes from the `promote` rule), and the idle spells (ACA scales a min-0 revision to zero after its 300 s
cooldown: 0.1 s of wall clock here). The app exists only once a deploy was confirmed, so a write or an idle spell
is often followed, in the same rule, by a look at the app's status, revisions or cost, or its destroy (AFTER; the
invariants check the world the write left first). The world moves on at the sandbox's speed, so ACA invariants
compare the bot's replies with what ARM answered while the bot asked (`spy_on_arm` records every app and revision
document the stand-in serves) and with the replicas the stand-in ran during the step; the oracle reads the
stand-in's state, never advances it. Invariants:
- status of the ACA app says what ARM showed: ready only when a provisioned, running, healthy revision takes
  traffic (shown so, or with a replica up during the step); "scaled to zero / cold" only when a revision with
  traffic and min replicas 0 had no replica up; not ready never when every revision shown was serving healthy; a
  split and a pinned 100% are ARM's weights; the app's workload profile named; `/gemma revisions` shares and
  "ready" as ARM showed them; a destroy plan's revision and running-replica counts as ARM's;
- every confirmed ACA write has one settled record matching ARM (ok: a revision ARM showed healthy, or for a
  rollback/promote 100% on the revision named; a destroy's app gone; failed: not a revision ARM last showed
  healthy) and a write that succeeded changed the app;
- one configuration, one price: an ACA plan's $/h (deploy, destroy, a scale's per replica, a canary's cost),
  `/gemma cost` of the app (per replica, idle at min and busy at max replicas) and fit on an ACA GPU are
  skills.capacity.aca_prices.aca_price of the workload profile each names in its region, and cost's profile and
  region are the app's as ARM holds it;
- the az equivalent (plan.cli "az") expresses every field the plan lists (`aca_unexpressed`: a flag with the
  plan's value, a flag's default, or the field named with its YAML route); a change to the running app is an
  update, not a create; a destroy deletes the app;
- ACA plans build on what serves (a canary's remaining share stays on the serving revision; a pinned revision is
  named when the template is not what serves; a rollback moves traffic to a revision ARM holds);
- a revision said ready and serving N% (or holding 100% after a rollback or promote) has that weight in ARM;
- ACA replies speak ACA (replicas, revisions, workload profile, az, Azure Monitor): no "instance", gcloud, Cloud
  Monitoring/Logging, nor a TPU slice's "one node";
- a reset between examples clears the ACA world (no app, replica, or request of the last example).
Bugs found in files this machine's owner does not own are listed in KNOWN_BUGS: the suite sets their violations
aside (and a strict xfail there notices when one is fixed); this script counts them like any other.

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
import copy
import json
import logging
import os
import re
import shlex
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from bot.sandbox.aca_api import AcaStandIn, App
from bot.sandbox.cloud import Sandbox
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.console_session import CONFIRMED, READY_IDLE, READY_SERVING, SERVICE, ConsoleSession
from skills.audit import latest
from skills.capacity.aca_prices import aca_price
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
# Bugs this machine found in files its owner does not own, reported with their steps (each a violation's message):
# the suite's examples (tests/test_console_model.py) set aside their violations, so those examples keep checking
# everything else, and a strict xfail there fails once a bug is fixed (then drop it here); the bench counts them.
KNOWN_BUGS: dict[str, re.Pattern[str]] = {
    # None open. Found and fixed: az containerapp create without the app's --tags and --transport, and status's "one
    # node, always on" (a TPU slice's words) for an ACA app at min = max = 1 replica (7bcbdcb); an ACA deploy after a
    # rollback diffed against the latest revision's template while the pinned one serves, unsaid (9514061).
}


def known_bug(message: str) -> str:
    """The KNOWN_BUGS key a violation's message is an instance of ('' when none)."""
    return next((k for k, rx in KNOWN_BUGS.items() if rx.match(message.splitlines()[0])), "")


# Azure Container Apps (skills/targets/aca): the app an ACA profile deploys (AcaOptions.service), its profiles
ACA_APP = "vllm-gemma4-aca"
ACA_PROFILES = ("gemma4-12b-qat-aca-a100", "gemma4-e4b-aca-t4")  # skills/data/profiles.yaml
ALSO_SERVING = re.compile(r"revision `([\w-]+)` is ready and serving \d+% of traffic \(also ([^)]*)\)")
ACA_STATUS_HEAD = re.compile(rf"^\S+ {ACA_APP}: (\S.*)$", re.M)
ACA_PLAN = re.compile(
    rf"^Plan: \w+ .*Azure Container Apps app `{ACA_APP}`.*?^plan `[0-9a-f]+` · expires[^\n]*$", re.M | re.S
)
ACA_COST = re.compile(rf"^{ACA_APP}: \$(\d[\d,]*\.\d\d)/hour per running replica$", re.M)
ACA_COST_CONFIG = re.compile(r"^\s+Configuration\s+Azure Container Apps ([\w-]+) \(.*\), ([a-z0-9]+)$", re.M)
ACA_REVISION_LINE = re.compile(r"^`([\w-]+)`\s+\S+ (\w[\w ]*?)\s+(\d+)% traffic", re.M)
# What an ACA reply must not say: Cloud Run's and Cloud TPU's words for what ACA calls replicas, its CLI, its
# monitoring (ACA: replicas, revisions, workload profiles, az, Azure Monitor, Log Analytics)
NOT_ACA_WORDS = (
    (re.compile(r"\binstances?\b", re.I), "instance"),
    (re.compile(r"\bgcloud\b"), "gcloud"),
    (re.compile(r"Cloud (?:Monitoring|Logging)"), "Cloud Monitoring/Logging"),
    (re.compile(r"\bone node\b"), "one node (a TPU slice's words)"),
)


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
    reset_azure(sandbox)
    sandbox._seed(sandbox._spec)


def reset_azure(sandbox: Sandbox) -> None:
    """The sandbox's Azure back to its first state: the environment and its GPU profiles and quota, no app, no
    replica, no request (a replica's run, its requests and the metrics they make belong to the last example)."""
    azure = sandbox.azure
    with azure.standin.lock:
        azure.standin.apps.clear()
        azure.standin.ops.clear()
        azure.standin.requests.clear()
        azure.standin._fail_next.clear()
        azure.replicas.runs.clear()
        azure.replicas.retired.clear()
        azure.replicas.last_request.clear()
        azure.replicas.requests.clear()
        azure.replicas.fail_next_start = ""
        azure.replicas._routed.clear()  # where the app host's spread of requests by weight stands
        azure.users.next_canary = None  # the users of a split (aca_users.py): no armed canary, nothing served
        azure.users.behaviour.clear()
        azure.users._carry.clear()
        azure.users._served.clear()


def aca_leftovers(sandbox: Sandbox) -> list[str]:
    """What of an earlier example the sandbox's Azure still holds (empty after a reset)."""
    azure = sandbox.azure
    with azure.standin.lock:
        left = [f"app `{a}`" for a in azure.standin.apps]
        left += [f"replica of `{r}`" for r in azure.replicas.runs]
        left += [f"{len(azure.replicas.retired)} retired replica(s)"] if azure.replicas.retired else []
        left += [f"requests to `{a}`" for a in azure.replicas.last_request]
        left += [f"users served `{r}`" for r, _ in azure.users._served]
        left += ["an armed canary"] if azure.users.next_canary is not None else []
    return left


def spy_on_arm(standin: AcaStandIn, seen: list[dict[str, Any]]) -> None:
    """Record every revision and app document the ARM stand-in answers (a copy, with the app it belongs to): what
    Azure showed the bot at the moment it asked, which the invariants compare the bot's replies with (the world
    moves on at the sandbox's speed: five minutes of cooldown pass in a tenth of a second). Observation only: the
    stand-in answers exactly as before."""
    revision_doc, app_doc = standin._revision_doc, standin._app_doc

    def revision(app: App, rev: Any) -> dict[str, Any]:
        doc = revision_doc(app, rev)
        seen.append({"kind": "revision", "app": app.name, **copy.deepcopy(doc)})
        return doc

    def app(a: App) -> dict[str, Any]:
        doc = app_doc(a)
        seen.append({"kind": "app", "app": a.name, **copy.deepcopy(doc)})
        return doc

    standin._revision_doc = revision  # type: ignore[method-assign,assignment]
    standin._app_doc = app  # type: ignore[method-assign,assignment]


@dataclass
class Shared:
    """What outlives one example: the event loop and the sandbox."""

    redis_url: str = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    sandbox: Sandbox | None = None
    speed: float = 3000.0
    arm_seen: list[dict[str, Any]] = field(default_factory=list)  # what the ARM stand-in answered (spy_on_arm)

    def start(self) -> Shared:
        from bot.sandbox.clock import SandboxClock
        from bot.settings import load_settings

        sb = Sandbox(clock=SandboxClock(self.speed), image=load_settings().vllm_image)
        self.sandbox = self.loop.run_until_complete(asyncio.to_thread(sb.start))
        spy_on_arm(self.sandbox.azure.standin, self.arm_seen)
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


_ACA_CHANGE = re.compile(r"^\s*([~+-]) (\S+): (.*)$")


def _json(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


def _az_words(values: list[Any]) -> str:
    return " ".join(shlex.quote(str(v)) for v in values)


def aca_unexpressed(plan_text: str) -> list[str]:
    """The change lines of an ACA plan (its new app, or its changes to the running app) that its az equivalent does
    not express: each field an `az containerapp` flag sets must be on the command with the plan's value (a flag's
    default counts when the plan sets the default); a field no flag sets must be named with the YAML route that
    sets it. Read off the text only (the flags as the Azure CLI reference names them), never the code that wrote
    it; a field this oracle does not know counts as unexpressed (look at it)."""
    az = section(plan_text, "az equivalent")
    lines = section(plan_text, "New service") or section(plan_text, "Changes to the running service")
    create = "az containerapp create" in az
    yaml_route = "--yaml" in az
    missing = []
    for line in lines.splitlines():
        m = _ACA_CHANGE.match(line)
        if not m:
            continue
        sign, path, value = m.groups()
        new = _json(value.rsplit(" -> ", 1)[-1]) if sign != "-" else None
        leaf = path.rsplit(".", 1)[-1]
        named = f"no flag sets {path}" in az or (path in az and yaml_route)
        if path.endswith("].args"):
            ok = f"--args {_az_words(new or [])}" in az
        elif path.endswith("].command"):
            ok = f"--command {_az_words(new or [])}" in az
        elif path.endswith("].image"):
            ok = f"--image {shlex.quote(str(new))}" in az
        elif path.endswith(".resources.cpu"):
            ok = f"--cpu {float(new or 0):g}" in az
        elif path.endswith(".resources.memory"):
            ok = f"--memory {new}" in az
        elif re.search(r"\.env\[([\w-]+)\]\.secretRef$", path):
            ok = f"{path.split('[')[-1].split(']')[0]}=secretref:{new}" in az
        elif re.search(r"\.env\[([\w-]+)\]\.value$", path):
            ok = f"{path.split('[')[-1].split(']')[0]}={new}" in az
        elif path.endswith("].probes"):
            startup: dict[str, Any] = next((x for x in new or [] if x.get("type") == "Startup"), {})
            ok = yaml_route and all(f"{k} {startup[k]}" in az for k in ("periodSeconds", "failureThreshold"))
        elif path.endswith("scale.minReplicas"):
            ok = f"--min-replicas {new}" in az
        elif path.endswith("scale.maxReplicas"):
            ok = f"--max-replicas {new}" in az
        elif path == "properties.template.revisionSuffix":
            ok = sign == "-" or f"--revision-suffix {new}" in az
        elif path == "properties.workloadProfileName":
            ok = f"--workload-profile-name {new}" in az
        elif path == "properties.environmentId":
            ok = f"--environment {str(new).rsplit('/', 1)[-1]}" in az
        elif path == "location":  # the environment's region: the app goes where its environment is
            ok = "--environment " in az
        elif path.startswith("identity."):
            ok = "--user-assigned " in az
        elif path == "properties.configuration.activeRevisionsMode":
            ok = f"--revisions-mode {str(new).lower()}" in az
        elif path == "properties.configuration.ingress.external":
            ok = f"--ingress {'external' if new else 'internal'}" in az
        elif path == "properties.configuration.ingress.targetPort":
            ok = f"--target-port {new}" in az
        elif path == "properties.configuration.ingress.transport":
            ok = f"--transport {new}" in az or (new == "auto" and create)  # az's default: auto
        elif path == "properties.configuration.ingress.allowInsecure":
            ok = "--allow-insecure" in az if new else True  # az's default: false
        elif path == "properties.configuration.ingress.traffic":
            if create and new == [{"latestRevision": True, "weight": 100}]:
                ok = True  # a new app's default: all traffic on the latest revision
            else:
                weights = " ".join(
                    f"{'latest' if t.get('latestRevision') else t.get('revisionName')}={t.get('weight', 0)}"
                    for t in new or []
                )
                ok = f"--revision-weight {weights}" in az
        elif re.match(r"properties\.configuration\.secrets\[[\w-]+\]\.(keyVaultUrl|identity)$", path):
            ok = (f"keyvaultref:{new}" if leaf == "keyVaultUrl" else f"identityref:{new}") in az
        elif path.startswith("tags."):
            ok = bool(re.search(rf"--tags (?:\S+ )*{re.escape(shlex.quote(f'{path[5:]}={new}'))}(?:\s|$)", az))
        else:
            ok = False
        if not (ok or named):
            missing.append(line.strip()[:160])
    return missing


class ConsoleModel(RuleBasedStateMachine):
    shared: ClassVar[Shared | None] = None
    collect: ClassVar[list[str] | None] = None  # set: violations are appended here instead of raised
    known: ClassVar[bool] = False  # set (the suite): violations of KNOWN_BUGS go to `known_seen`, not raised
    known_seen: ClassVar[list[str]] = []
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
        # Azure Container Apps: what the ARM stand-in answered during the last step (spy_on_arm), the revisions it
        # ever showed provisioned, running and healthy, fit's reply and its Plan deploy button's plan
        self.arm_step: list[dict[str, Any]] = []
        self.step_window = (0.0, 0.0)
        self.aca_healthy: set[str] = set()
        self.aca_fitted: list[tuple[str, str]] = []
        self.leftovers = aca_leftovers(shared.sandbox)  # of the last example, after the reset (none, rightly)

    def teardown(self) -> None:
        self.loop.run_until_complete(self.session.close(keep_sandbox=True))

    # --- driving ----------------------------------------------------------------------------------------
    def _run(self, coro: Any) -> str:
        shared = type(self).shared
        assert shared is not None
        del shared.arm_seen[:]
        assert shared.sandbox is not None
        began = shared.sandbox.clock.now()
        t0 = time.monotonic()
        out: str = self.loop.run_until_complete(coro)
        t1 = time.monotonic()
        self.loop.run_until_complete(self.session.settle())
        self.arm_step = list(shared.arm_seen)
        self.step_window = (began, shared.sandbox.clock.now())  # the step's span on the sandbox clock
        self.aca_healthy |= {d["name"] for d in self.arm_step if d["kind"] == "revision" and _healthy_doc(d)}
        type(self).steps_run += 1
        if time.monotonic() - t0 > 3:
            log.warning("slow step %r: %.1f s, settle %.1f s", self.log[-1:], t1 - t0, time.monotonic() - t1)
        return out

    def _type(self, line: str) -> None:
        self.log.append(line)
        aca = ACA_APP in line or "-aca-" in line or re.search(r"--gpu (t4|a100)", line)
        type(self).rules_run[" ".join(line.split()[:2]) + (" (ACA)" if aca else "")] += 1
        mark = len(self.session.text)
        self._run(self.session.line(line))
        self.out = self.session.text[mark:]

    def _world(self) -> tuple[int, dict[str, int], bool, int, tuple[int, dict[str, int], bool]]:
        svc = self.session.service()
        sandbox = self.session.sandbox
        revisions = len(sandbox.cloud_run.revisions.get(SERVICE, [])) if sandbox else 0
        app = self._aca_app()
        aca = (len(app.revisions), self._aca_weights(), True) if app is not None else (0, {}, False)
        return revisions, self.session.traffic(), svc is not None, len(sandbox.tpu.queued) if sandbox else 0, aca

    @property
    def _standin(self) -> AcaStandIn:
        assert self.session.sandbox is not None
        return self.session.sandbox.azure.standin

    def _aca_app(self) -> App | None:
        """The ACA app as the stand-in holds it (None: none, or being deleted). Read without advancing it: the
        oracle looks, it does not ask ARM (which would move the stand-in's replicas on)."""
        with self._standin.lock:
            app = self._standin.apps.get(ACA_APP)
            return app if app is not None and app.deleting_since is None else None

    def _aca_weights(self) -> dict[str, int]:
        with self._standin.lock:
            app = self._standin.apps.get(ACA_APP)
            return {r: w for r, w in self._standin.weights(app).items() if w} if app is not None else {}

    def _aca_up_during(self, revision: str, t0: float, t1: float, throughout: bool = False) -> bool:
        """Did a replica of `revision` answer /health (started, ready, not failed, not yet scaled away) at some
        moment between t0 and t1 of the sandbox clock (`throughout`: all along)? Read from the stand-in's replicas,
        running and retired."""
        azure = self.session.sandbox.azure if self.session.sandbox else None
        if azure is None:
            return False
        with azure.standin.lock:
            app = azure.standin.apps.get(ACA_APP)
            rev = app.revisions.get(revision) if app is not None else None
            if rev is None or rev.failed or rev.provisioned_at is None:
                return False
            for run in [*azure.replicas.retired, *azure.replicas.runs.values()]:
                if run.app != ACA_APP or run.revision != revision:
                    continue
                ends = [x for x in (run.stopped, run.failed_at, rev.deactivated_at) if x is not None]
                up, down = max(run.ready_at, rev.provisioned_at), min(ends, default=float("inf"))
                if (up <= t0 and down >= t1) if throughout else (max(t0, up) <= min(t1, down)):
                    return True
        return False

    def _aca_min_replicas(self, revision: str) -> int:
        with self._standin.lock:
            app = self._standin.apps.get(ACA_APP)
            rev = app.revisions.get(revision) if app is not None else None
            scale = (rev.template.get("scale") or {}) if rev is not None else {}
            return int(scale.get("minReplicas", 0) or 0)

    def _aca_exists(self) -> bool:
        return self._aca_app() is not None

    def _last_docs(self) -> dict[str, dict[str, Any]]:
        """The ACA app's revisions as the stand-in last showed them during the step (name -> its document)."""
        return {d["name"]: d for d in self.arm_step if d["kind"] == "revision" and d["app"] == ACA_APP}

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
        self.aca_plans_build_on_what_serves()
        out, seen = self.out, self.arm_step
        if then == "confirm":
            self.confirm()
        else:
            self.interrupt()
        self.out, self.arm_step = out + self.out, seen + self.arm_step

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

    # --- Azure Container Apps: the app an ACA profile deploys, beside the Cloud Run service -------------------
    # What a user does next on the ACA app, in the same rule as a write or an idle spell: nothing, look at its
    # status (most often: what the write did, or what the idle spell left), revisions or cost, or destroy it. The
    # one-line ACA rules alone seldom meet the app in its states: it exists only once a deploy was confirmed.
    AFTER = st.sampled_from(["", "status", "status", "revisions", "cost", "destroy"])

    @rule(
        profile=st.sampled_from(ACA_PROFILES),
        mml=st.sampled_from([None, 8192, 16384, 32768]),
        low=st.sampled_from([None, 0, 1]),
        then=THEN,
        after=AFTER,
    )
    def aca_deploy(self, profile: str, mml: int | None, low: int | None, then: str, after: str = "") -> None:
        """A deploy of an ACA profile (new app, or a new revision of it), then nothing, Confirm or Ctrl-C, then
        what a user does next (`after`)."""
        line = f"/gemma deploy {profile}" + (f" --max-model-len {mml}" if mml else "")
        self._type(line + (f" --min-instances {low}" if low is not None else ""))
        self._then(then)
        self._after(after)

    def _after(self, after: str) -> None:
        """What a user does next on the ACA app (AFTER), in the same rule as a write or an idle spell: the
        invariants first check the world the rule's first part left (as between two rules), then the next step."""
        if not after or not self._aca_exists():
            return
        for inv in self.invariants:
            inv.function(self)
        if after == "destroy":
            self.aca_destroy()
            return
        lines = {"status": f"/gemma status {ACA_APP} --fresh", "revisions": f"/gemma revisions {ACA_APP}"}
        self._type(lines.get(after, f"/gemma cost {ACA_APP}"))

    @rule()
    def aca_status(self) -> None:
        if self._aca_exists():
            self._type(f"/gemma status {ACA_APP} --fresh")

    @rule()
    def aca_revisions(self) -> None:
        if self._aca_exists():
            self._type(f"/gemma revisions {ACA_APP}")

    @rule()
    def aca_cost(self) -> None:
        if self._aca_exists():
            self._type(f"/gemma cost {ACA_APP}")

    @rule()
    def aca_destroy(self) -> None:
        """Delete the ACA app, confirmed by typing its name."""
        if not self._aca_exists():
            return
        shown = len(self.session.responder.buttons)
        self._type(f"/gemma destroy {ACA_APP}")
        if any(b.label.startswith("Destroy") for b, _ in self.session.responder.buttons[shown:]):
            self._aca_destroy_plan_says_what_it_deletes()  # before the click deletes it
            self._note_confirm(destroy=True)
            self.session.modal_answer = ACA_APP
            out, seen = self.out, self.arm_step
            try:
                self._type("click Destroy")
            finally:
                self.session.modal_answer = SERVICE
            self.out, self.arm_step = out + self.out, seen + self.arm_step

    def _aca_destroy_plan_says_what_it_deletes(self) -> None:
        """The destroy plan's count of revisions is ARM's, and of running replicas what ARM showed as it planned."""
        said = re.search(r"app `[\w-]+` \((\d+) revision\(s\), (\d+) replica\(s\) running", self.out)
        app = self._aca_app()
        if said is None or app is None:
            return
        replicas = sum(d["properties"]["replicas"] for d in self._last_docs().values())
        if (int(said.group(1)), int(said.group(2))) != (len(app.revisions), replicas):
            self._fail(
                f"the ACA destroy plan says {said.group(1)} revision(s), {said.group(2)} replica(s) running; ARM holds "
                f"{len(app.revisions)} revision(s) and showed {replicas} replica(s)"
            )

    @rule(low=st.integers(0, 1), high=st.integers(1, 2), then=THEN, after=AFTER)
    def aca_scale(self, low: int, high: int, then: str, after: str = "") -> None:
        """The replica range is in the template: a new revision, built on the one that serves."""
        if self._aca_exists():
            self._type(f"/gemma scale {low} {high} --service {ACA_APP}")
            self._then(then)
            self._after(after)

    @rule(then=THEN, after=AFTER)
    def aca_rollback(self, then: str, after: str = "") -> None:
        """Traffic only: 100% to the revision before the serving one."""
        if self._aca_exists():
            self._type(f"/gemma rollback --service {ACA_APP}")
            self._then(then)
            self._after(after)

    @rule(
        profile=st.sampled_from(ACA_PROFILES),
        mml=st.sampled_from([8192, 16384]),
        percent=st.sampled_from([10, 50]),
        after=AFTER,
    )
    def aca_canary(self, profile: str, mml: int, percent: int, after: str = "") -> None:
        """A canary revision on the latest-revision weight beside the serving one (its Promote comes later, when
        the comparison ends: the `promote` rule clicks it)."""
        if self._aca_exists():
            self._type(f"/gemma deploy {profile} --max-model-len {mml} --canary {percent}")
            self._then("confirm")
            self._after(after)

    @rule(seconds=st.sampled_from([0.05, 0.2, 1.0]), after=AFTER)
    def aca_idle(self, seconds: float, after: str = "status") -> None:
        """An idle spell (0.05 s: 150 simulated seconds, within ACA's 300 s cooldown; 0.2 s and 1 s: past it, so a
        min-0 revision scales to zero), then what a user does next on the ACA app."""
        self.idle(seconds)
        self._after(after)

    @rule(
        case=st.sampled_from([("gemma-4-e4b", "t4"), ("gemma-4-e4b-qat", "t4"), ("gemma-4-12b-qat", "a100-80gb")]),
        press=st.booleans(),
    )
    def aca_fit(self, case: tuple[str, str], press: bool) -> None:
        """Fit on an ACA GPU (priced on its workload profile), and its Plan deploy button if it shows one."""
        model, gpu = case
        shown = len(self.session.responder.buttons)
        self._type(f"/gemma fit {model} --gpu {gpu}")
        fitted = self.out
        new = [i for i, (b, _) in enumerate(self.session.responder.buttons) if i >= shown]
        plan = [i for i in new if self.session.responder.buttons[i][0].label.startswith("Plan deploy")]
        if press and plan:
            self._type(f"click {plan[-1] + 1}")
            self.aca_fitted.append((fitted, self.out))
            self.out = fitted + self.out

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
        if type(self).known and known_bug(what):
            type(self).known_seen.append(what)
            return
        if type(self).collect is not None:
            type(self).collect.append(f"{what}\n    after: {' | '.join(self.log[-12:])}")  # type: ignore[union-attr]
            return
        raise AssertionError(message)

    @invariant()
    def replies_match_the_world(self) -> None:
        """A revision said ready and serving N% (or idle, or holding 100% after a rollback) is, on the stand-in
        that holds it: Cloud Run's, or ARM's for the ACA app (ready: ARM showed it provisioned, running and healthy;
        its share: the app's ingress weight)."""
        traffic = self.session.traffic()
        weights = self._aca_weights()

        def ready(revision: str) -> bool:
            if revision.startswith(f"{ACA_APP}--"):
                return revision in self.aca_healthy
            return self.session.revision_state(revision) is True

        def share(revision: str) -> int:
            return (weights if revision.startswith(f"{ACA_APP}--") else traffic).get(revision, 0)

        def routes(revision: str) -> str:
            return f"ARM weighs {weights}" if revision.startswith(f"{ACA_APP}--") else f"the stand-in routes {traffic}"

        for revision, percent in READY_SERVING.findall(self.out):
            if not ready(revision) or share(revision) != int(percent):
                self._fail(f"said `{revision}` is ready and serving {percent}%; {routes(revision)}")
        for revision, others in ALSO_SERVING.findall(self.out):  # who else serves, beside an ACA revision
            said = {r: int(p) for r, p in re.findall(r"`([\w-]+)` (\d+)%", others)}
            if revision.startswith(f"{ACA_APP}--") and said != {r: w for r, w in weights.items() if r != revision}:
                self._fail(f"said `{revision}` serves beside {said}; {routes(revision)}")
        for revision in READY_IDLE.findall(self.out):
            if not ready(revision) or share(revision):
                self._fail(f"said `{revision}` is ready and idle; {routes(revision)}")
        for revision in ROLLED.findall(self.out):
            if share(revision) != 100:
                self._fail(f"said 100% of traffic is on `{revision}`; {routes(revision)}")

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
            if entry.service == ACA_APP:
                self._aca_record_matches(plan_id, entry)
                self.checked.add(plan_id)
                continue
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

    def _aca_record_matches(self, plan_id: str, entry: Any) -> None:
        """An ACA write's settled record against ARM: ok names a revision ARM showed provisioned, running and
        healthy (and, for a destroy, the app is gone); failed names none that ARM last showed so; a write that
        succeeded changed the app."""
        said = READY_SERVING.search(entry.detail) or READY_IDLE.search(entry.detail)
        named = re.search(r"revision `([\w-]+)`", entry.detail)
        app = self._aca_app()
        if entry.result == "ok" and entry.action == "destroy" and app is not None:
            self._fail(f"audit says the ACA destroy succeeded ({entry.detail[:120]}); ARM still holds `{ACA_APP}`")
        rolled = ROLLED.search(entry.detail)
        if entry.result == "ok" and rolled:  # a rollback or a promote: traffic only
            weights = self._aca_weights()
            if weights != {rolled.group(1): 100}:
                self._fail(f"audit says ACA {entry.action} ok ({entry.detail[:120]}); ARM weighs {weights}")
        elif entry.result == "ok" and entry.action != "destroy":
            revision = said.group(1) if said else ""
            held = app is not None and revision in app.revisions
            if not (held and revision in self.aca_healthy):
                self._fail(
                    f"audit says ACA {entry.action} ok ({entry.detail[:120]}); ARM "
                    + ("never showed it healthy" if held else "holds no such revision")
                )
        if entry.result == "failed" and named:
            last = self._last_docs().get(named.group(1))
            if last is not None and _healthy_doc(last):
                self._fail(f"audit says ACA {entry.action} failed ({entry.detail[:120]}); ARM shows it healthy")
        kind, world, _ = self.before.get(plan_id, ("", None, False))
        if entry.result == "ok" and world is not None and world == self._world() and kind != "destroy":
            self._fail(f"ACA {kind} plan {plan_id} was confirmed, succeeded and changed nothing")

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
            # the plan as shown, up to its footer: what a Confirm printed after it is no part of it (the block would
            # differ, and be checked again against the world the Confirm made)
            block = re.split(r"(?<=\n)(?=[^\n]*· expires in)[^\n]*\n?", block, maxsplit=1)[0]
            if not block.startswith(("Plan: Deploy", "Plan: Scale", "Plan: Redeploy")) or "== az equivalent" in block:
                continue  # a Cloud Run plan (an ACA plan's base: aca_plans_build_on_what_serves)
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
        if not self.log or self.log[-1] != "/gemma status --fresh":
            return  # the Cloud Run service's (the ACA app's: aca_status_says_what_arm_shows)
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

    # --- Azure Container Apps ---------------------------------------------------------------------------------
    @invariant()
    def a_reset_clears_the_aca_world(self) -> None:
        """Each example starts on an Azure with no app, replica or request of an earlier one."""
        if self.leftovers:
            self._fail(f"after the reset the sandbox's Azure still holds {', '.join(self.leftovers)}")
            self.leftovers = []

    @invariant()
    def aca_status_says_what_arm_shows(self) -> None:
        """`/gemma status` of the ACA app says what ARM showed while it asked: ready only when a provisioned,
        running, healthy revision takes traffic; scaled to zero only when a provisioned revision with min replicas
        0 runs no replica; not ready only when no revision with traffic was shown healthy; a split with ARM's
        weights; the app's workload profile named; "does not exist" only when ARM holds no app."""
        if not self.log or not self.log[-1].startswith(f"/gemma status {ACA_APP}"):
            return
        out, arm = self.out, self.arm_step
        if "does not exist" in out:
            if self._aca_exists():
                self._fail(f"status says `{ACA_APP}` does not exist; ARM holds it")
            return
        head = ACA_STATUS_HEAD.search(out)
        docs = {d["name"]: d for d in arm if d["kind"] == "revision" and d["app"] == ACA_APP}
        shown = [d for d in arm if d["kind"] == "revision" and d["app"] == ACA_APP]
        apps = [d for d in arm if d["kind"] == "app" and d["app"] == ACA_APP]
        if head is None or not apps:
            self._fail(f"status of `{ACA_APP}` has no head line, or ARM was not asked ({len(apps)} app reads)")
            return
        state, seen = head.group(1), "; ".join(_doc_text(d) for d in docs.values()) or "no revision"
        weights = _arm_weights(apps[-1])
        seen += f"; weights {weights}"
        serving = [d["name"] for d in shown if _healthy_doc(d) and d["properties"]["trafficWeight"] > 0]
        # Status reads the latest revision; with a split, /health may have reached another: ready then needs a
        # revision with traffic whose replica ARM's runtime had up at some moment of the step
        serving += [r for r, w in weights.items() if w and self._aca_up_during(r, *self.step_window)]
        if state == "ready" and not serving:
            self._fail(f"ACA status says ready; ARM showed {seen}")
        # Scaled to zero / cold: a revision with traffic and min replicas 0 that ARM showed with no replica, or that
        # had no replica up at some moment of the step (its /health through ingress then answers 503)
        cold = [
            d["name"]
            for d in shown
            if d["properties"]["provisioningState"] == "Provisioned"
            and d["properties"]["replicas"] == 0
            and not int(((d["properties"]["template"].get("scale") or {}).get("minReplicas")) or 0)
        ] + [
            r
            for r, w in weights.items()
            if w and not self._aca_min_replicas(r) and not self._aca_up_during(r, *self.step_window, throughout=True)
        ]
        if state.startswith("scaled to zero") and not cold:
            self._fail(f"ACA status says {state}; ARM showed {seen}")
        if (
            state.startswith(("NOT", "rolling out", "starting"))
            and shown
            and all(_healthy_doc(d) and d["properties"]["trafficWeight"] > 0 for d in shown if d["name"] in docs)
        ):
            self._fail(f"ACA status says {state}; ARM showed {seen}")
        profile = apps[-1]["properties"].get("workloadProfileName", "")
        if f"workload profile `{profile}`" not in out:
            self._fail(f"ACA status does not name the app's workload profile `{profile}`")
        split = STATUS_SPLIT.search(out)
        said = {r: int(p) for p, r in re.findall(r"(\d+)% `([\w-]+)`", split.group(1))} if split else {}
        if (len(weights) > 1 or split) and said != weights:
            self._fail(f"ACA status shows the split {said or 'not at all'}; ARM weighed {weights}")
        pinned = re.search(r"Traffic\s+100% `([\w-]+)` \(pinned\)", out)
        if pinned and weights != {pinned.group(1): 100}:
            self._fail(f"ACA status says 100% is pinned to `{pinned.group(1)}`; ARM weighed {weights}")

    @invariant()
    def aca_plans_build_on_what_serves(self) -> None:
        """An ACA plan that changes the running app is against what serves, as ARM weighs it when the plan is shown
        (`_then` checks it before a Confirm changes it): the changes are against the serving revision, named when it
        is not the latest; a canary's remaining share stays on the serving revision; a rollback or promote sends
        100% to a revision ARM holds."""
        app = self._aca_app()
        if app is None:
            return
        weights = self._aca_weights()
        serving = max(weights, key=lambda r: weights[r]) if weights else ""
        for block in (m.group(0) for m in ACA_PLAN.finditer(_unthreaded(self.out))):
            if block in self.diffs_checked or "== Changes to the running service" not in block:
                continue
            self.diffs_checked.add(block)
            first = block.splitlines()[0]
            stays = re.search(r"(\d+)% stays on `([\w-]+)`", first)
            if stays and (stays.group(2) != serving or int(stays.group(1)) + int(_pct(first)) != 100):
                self._fail(f"an ACA canary plan says {stays.group(0)}; ARM weighs {weights}")
            moved = re.search(r"100% of traffic to `([\w-]+)`", first)
            if moved and first.startswith(("Plan: Roll", "Plan: Promote")) and moved.group(1) not in app.revisions:
                self._fail(f"an ACA plan moves 100% of traffic to `{moved.group(1)}`; ARM holds no such revision")
            pinned = weights == {serving: 100} and serving != app.latest
            if first.startswith(("Plan: Deploy", "Plan: Scale", "Plan: Canary")) and pinned:
                if f"serving revision `{serving}`" not in block and f"stays on `{serving}`" not in block:
                    self._fail(f"an ACA plan's changes are against `{app.latest}` while `{serving}` serves, unsaid")

    @invariant()
    def aca_revisions_say_what_arm_shows(self) -> None:
        """`/gemma revisions` of the ACA app: each revision's share is ARM's weight; ready only when ARM showed it
        provisioned, running and healthy."""
        if not self.log or self.log[-1] != f"/gemma revisions {ACA_APP}":
            return
        docs = self._last_docs()
        for name, state, percent in ACA_REVISION_LINE.findall(self.out):
            doc = docs.get(name)
            if doc is None:
                self._fail(f"ACA revisions list `{name}`; ARM showed no such revision")
                continue
            if int(percent) != doc["properties"]["trafficWeight"]:
                self._fail(f"ACA revisions say `{name}` takes {percent}%; ARM weighed {_doc_text(doc)}")
            if state == "ready" and not _healthy_doc(doc):
                self._fail(f"ACA revisions say `{name}` is ready; ARM showed {_doc_text(doc)}")

    @invariant()
    def aca_one_configuration_one_price(self) -> None:
        """An ACA deploy or destroy plan, `/gemma cost` of the app and fit on an ACA GPU each price a replica at
        skills.capacity.aca_prices.aca_price of the workload profile they name, in its region; cost's profile and
        region are the app's as ARM holds it; fit's Plan deploy button plans fit's price."""
        for block in (m.group(0) for m in ACA_PLAN.finditer(_unthreaded(self.out))):
            first = block.splitlines()[0]
            for usd, profile_type in re.findall(r"Each running replica: (\$[\d,]+\.\d\d)/h \(([\w-]+)\)", block):
                self._check_aca_price("an ACA plan's replica", [usd], profile_type, self._standin.location)
            canary = re.search(r"Canary cost: .*?(\$[\d,]+\.\d\d)/h while the canary runs", block)
            canary_type = re.search(r"workload profile ([\w-]+)\)", first)
            if canary and canary_type and "(1 at least" in block:
                self._check_aca_price("a canary plan's cost", [canary.group(1)], canary_type.group(1), None)
            if first.startswith("Plan: Delete"):
                name = re.search(r"workload profile `([\w-]+)`", first)
                profile = self._standin.profiles.get(name.group(1)) if name else None
                said = re.findall(r"(\$[\d,]+\.\d\d|price unknown)/h per running replica", first)
                if profile is not None:
                    self._check_aca_price("an ACA destroy plan", said, profile.type, self._standin.location)
                continue
            profile_type = re.search(r"workload profile ([\w-]+)\)", first)
            region = re.search(r"^✓ (\w+) offers ", block, re.M)
            said = re.findall(r"~(\$[\d,]+\.\d\d)/h;", block) + re.findall(r"Price: (\$[\d,]+\.\d\d)/h", block)
            if profile_type:
                where = region.group(1) if region else self._standin.location
                self._check_aca_price("an ACA deploy plan", said, profile_type.group(1), where)
        cost, config = ACA_COST.search(self.out), ACA_COST_CONFIG.search(self.out)
        if cost and config:
            self._check_aca_price("/gemma cost", [f"${cost.group(1)}"], config.group(1), config.group(2))
            each = aca_price(config.group(1), config.group(2)).per_replica_usd_per_hour or 0.0
            for usd, what, n in re.findall(
                r"^\s+(?:Idle|All replicas busy)[^$]*\$([\d,.]+)/h (with|at) (?:min|max)-replicas (\d+)$",
                self.out,
                re.M,
            ):
                if abs(float(usd.replace(",", "")) - each * int(n)) > 0.005:
                    self._fail(
                        f"/gemma cost says ${usd}/h {what} {n} replica(s); {n} x ${each:.2f}/h = ${each * int(n):.2f}/h"
                    )
            app = self._aca_app()
            if app is not None:
                held = self._standin.profiles.get(app.body.get("properties", {}).get("workloadProfileName", ""))
                if held is not None and (held.type, self._standin.location) != (config.group(1), config.group(2)):
                    self._fail(
                        f"/gemma cost prices `{ACA_APP}` on {config.group(1)} in {config.group(2)}; ARM runs it on "
                        f"{held.type} in {self._standin.location}"
                    )
        fit = re.search(r"^[✓✗●] \S+ (?:fits|does NOT fit)[\w ]* on (t4|a100-80gb)$", self.out, re.M)
        if fit and self.log and "--gpu" in self.log[-1]:
            profile_type = re.search(r"Azure Container Apps workload profile ([\w-]+) \(", self.out)
            said = re.findall(r"^\s+Cost\s+(\$[\d,]+\.\d\d)/h", self.out, re.M)
            if profile_type:
                self._check_aca_price("fit", said, profile_type.group(1), None)
        while self.aca_fitted:
            fitted, plan = self.aca_fitted.pop()
            priced = re.search(r"^\s+Cost\s+(\$[\d,]+\.\d\d)/h", fitted, re.M)
            planned = re.search(r"~(\$[\d,]+\.\d\d)/h;", plan)
            if priced and planned and priced.group(1) != planned.group(1):
                self._fail(f"fit priced {priced.group(1)}/h; its Plan deploy button planned {planned.group(1)}/h")

    def _check_aca_price(self, what: str, said: list[str], profile_type: str, region: str | None) -> None:
        each = aca_price(profile_type, region).per_replica_usd_per_hour
        expected = f"${each:,.2f}" if each is not None else "price unknown"
        if not said:
            self._fail(f"{what} on {profile_type} says no price; aca_price says {expected}/h")
        for usd in said:
            if usd != expected:
                self._fail(f"{what} prices a {profile_type} replica at {usd}/h; aca_price in {region}: {expected}/h")

    @invariant()
    def the_az_equivalent_makes_the_plans_changes(self) -> None:
        """An ACA plan's az equivalent (its cli is az) expresses every field of the new app or change it lists;
        a change to the running app is an update of it, not a create; a destroy deletes the app."""
        for block in (m.group(0) for m in ACA_PLAN.finditer(_unthreaded(self.out))):
            az = section(block, "az equivalent")
            if not az:
                self._fail(f"an ACA plan without its az equivalent: {block.splitlines()[0][:120]}")
                continue
            if block.startswith("Plan: Delete"):
                if f"az containerapp delete --name {ACA_APP}" not in az:
                    self._fail(f"an ACA destroy plan's az equivalent deletes nothing: {az.strip()[:200]}")
                continue
            if "gcloud" in az:
                self._fail("an ACA plan's az equivalent speaks gcloud")
            if "== Changes to the running service" in block and "az containerapp create" in az:
                self._fail(
                    f"a change to the running ACA app `{ACA_APP}` is given as `az containerapp create` (az.py: a "
                    "change is `az containerapp update` with a flag per changed field)"
                )
            missing = aca_unexpressed(block)
            if missing:
                self._fail(f"the az equivalent leaves out {len(missing)} change(s): {'; '.join(missing)[:400]}")

    @invariant()
    def aca_replies_speak_aca(self) -> None:
        """What the bot says of the ACA app (its plans, deploy progress, status, revisions, cost) and of fit on an
        ACA GPU speaks ACA (replicas, revisions, workload profile, az, Azure Monitor): none of Cloud Run's
        instances, gcloud or Cloud Monitoring, nor a TPU slice's node."""
        for name, text in aca_replies(_unthreaded(self.out)):
            text = re.sub(r"--(?:min|max)-instances\b", "", text)  # the bot's deploy flags, which ACA takes too
            said = sorted({word for rx, word in NOT_ACA_WORDS for _ in rx.finditer(text)})
            if said:
                where = "; ".join(
                    line.strip()[:100] for line in text.splitlines() if any(rx.search(line) for rx, _ in NOT_ACA_WORDS)
                )
                self._fail(f"an ACA {name} speaks Cloud Run/TPU: {', '.join(said)} ({where[:300]})")


def _healthy_doc(doc: dict[str, Any]) -> bool:
    """ARM's revision document says provisioned, running and healthy."""
    p = doc["properties"]
    return (p["provisioningState"], p["runningState"], p["healthState"]) == ("Provisioned", "Running", "Healthy")


def _arm_weights(app_doc: dict[str, Any]) -> dict[str, int]:
    """Revision -> weight as ARM's app document routes traffic (the latest-revision weight on its latest ready
    revision), the shares that take traffic."""
    props = app_doc["properties"]
    traffic = (props.get("configuration") or {}).get("ingress", {}).get("traffic") or [
        {"latestRevision": True, "weight": 100}
    ]
    out: dict[str, int] = {}
    for t in traffic:
        name = props.get("latestReadyRevisionName", "") if t.get("latestRevision") else t.get("revisionName", "")
        if name and t.get("weight"):
            out[name] = out.get(name, 0) + int(t["weight"])
    return out


def _pct(title: str) -> int:
    """The share a canary plan's title gives its new revision (0 when none)."""
    m = re.search(r"(\d+)% of traffic to `", title)
    return int(m.group(1)) if m else 0


def _unthreaded(out: str) -> str:
    """The console's output with thread replies' `  | ` taken off (a plan a button makes in a thread reads as one)."""
    return re.sub(r"^  \| ?", "", out, flags=re.M)


def _doc_text(doc: dict[str, Any]) -> str:
    p = doc["properties"]
    return (
        f"`{doc['name']}` {p['provisioningState']}/{p['runningState']}/{p['healthState']}, {p['replicas']} "
        f"replica(s), weight {p['trafficWeight']}"
    )


_ACA_REPLY_SPANS = (
    ("plan", ACA_PLAN),
    ("status", re.compile(rf"^\S+ {ACA_APP}: .*?^(?:fresh data|data .* old \(cached\))$", re.M | re.S)),
    ("cost", re.compile(rf"^{ACA_APP}: \$.*?(?=\n\S|\Z)(?:\n[^\n]*)?", re.S)),
    ("revisions", re.compile(rf"^Revisions of `{ACA_APP}`.*?(?=\n[^`\s]|\Z)", re.M | re.S)),
    ("fit", re.compile(r"^[✓✗●] \S+ (?:fits|does NOT fit)[\w ]* on (?:t4|a100-80gb)$.*?^Estimates from", re.M | re.S)),
)


def aca_replies(out: str) -> list[tuple[str, str]]:
    """(what, text) of each reply about the ACA app in `out`: its plans, status, cost, revisions list, fit on an
    ACA GPU, and its deploy's progress (the lines that name the app and the stage lines of its thread)."""
    found = [(name, m.group(0)) for name, rx in _ACA_REPLY_SPANS for m in rx.finditer(out)]
    canary = f"Canary `{ACA_APP}--" in out and not re.search(r"Canary `vllm-gemma4-\d", out)
    progress = [
        line
        for line in out.splitlines()
        if re.search(rf"(?:\w+) `{ACA_APP}`|`{ACA_APP}--", line)
        or (" →  " in line and "replica starting" in line)
        or (canary and "since the canary took traffic" in line)
    ]
    if progress:
        found.append(("deploy's progress", "\n".join(progress)))
    return found


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
