"""The simulated revision lifecycle: a new Cloud Run revision starts, loads its weights and becomes ready,
or dies the way vLLM dies, on the sandbox clock, writing its log lines to the Logging simulator.

How it ends is decided from the revision's own settings, not scripted: the capacity planner's as-deployed
check (skills.capacity.fit.check_as_deployed) says whether the weights, the KV cache for one full sequence, the
CUDA-graph warm-up and the host RAM for loading fit; the startup probe's budget is compared with the
planner's cold-start estimate; a GCS FUSE mount without uid=1001 cannot be read; a Hub download without
HF_TOKEN is refused (gated model); an image whose vLLM predates the model, or whose CUDA build the GPU's
driver cannot run, fails as the compatibility data (skills/data/vllm_images.yaml) says it would. Phases:
pulling the image and starting the container, weights loading (vLLM's shard progress), warm-up, then ready
or failed. Nothing here sleeps: `tick()` writes what is due by
the clock, and whoever polls (the Cloud Run and Logging simulators, the sandbox's ticker) calls it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.sandbox import startup_lines as sl
from bot.sandbox.clock import SandboxClock
from bot.sandbox.cloud_logging_api import CloudLoggingStandIn
from bot.sandbox.vllm_sim import SimConfig
from skills.capacity.catalog import load_catalog
from skills.capacity.deployed import check_as_deployed
from skills.capacity.fit_types import FitRequest
from skills.capacity.image_compat import load_image_data, parse_image, version
from skills.serving.sizes import gib
from skills.serving.vllm_flags import VllmFlags, planner_dtype, planner_kv
from skills.targets.cloud_run.render import ANNOTATION_MODEL

PULL_S = 60.0  # estimate: image pull and container start before vLLM prints anything (simulated seconds)
WARMUP_S = 100.0  # torch.compile / CUDA graphs / warm-up after the weights (field notes: ~100 s)

Finish = Callable[[str, str, str, str], None]  # (service, revision, "ready" | "failed", condition message)


@dataclass
class Startup:
    service: str
    revision: str
    lines: list[sl.Line]
    end_at: float  # simulated seconds after start when the revision is decided
    outcome: str  # ready | failed
    message: str = ""
    kind: str = ""  # the failure kind (for scenario alerts)
    started: float = 0.0  # clock.now() at creation
    wall_start: float = field(default_factory=time.time)
    written: int = 0
    backdated: bool = False  # seeded: it started long ago in real time too
    served: SimConfig | None = None  # ready: what its vLLM reports (model, context, KV cache)


def _container(template: dict[str, Any]) -> dict[str, Any]:
    containers = template.get("containers") or [{}]
    return next((c for c in containers if c.get("ports")), containers[0])


def _model(svc: dict[str, Any], flags: VllmFlags) -> tuple[str, str]:
    """(catalog model name, the --model path vLLM was given). The path is what actually loads; the bot's
    annotation only helps when the path names no catalog model (a hand deploy may not have updated it)."""
    catalog = load_catalog()
    path = flags.model_path or ""
    tail = path.rstrip("/").rsplit("/", 1)[-1].lower()
    for m in catalog.models.values():
        if tail and (m.hf_repo.lower() == path.lower() or m.hf_repo.rsplit("/", 1)[-1].lower() == tail):
            return m.name, path
    named = (svc.get("annotations") or {}).get(ANNOTATION_MODEL)
    if named in catalog.models:
        return str(named), path or catalog.models[str(named)].hf_repo
    return "gemma-4-12b-qat", path or "google/gemma-4-12b-it"


def deployed_config(svc: dict[str, Any]) -> dict[str, Any]:
    """What vLLM and Cloud Run will run with, read from the service JSON the way the runtime would."""
    template = svc.get("template") or {}
    c = _container(template)
    # Args vLLM would refuse read as its defaults here (a stand-in must not crash on an operator's typo).
    flags = VllmFlags.parse_or_none([str(a) for a in c.get("args") or []]) or VllmFlags()
    limits = (c.get("resources") or {}).get("limits") or {}
    model, path = _model(svc, flags)
    probe = c.get("startupProbe") or {}
    env = {e.get("name"): e for e in c.get("env") or []}
    mounts = [v for v in template.get("volumes") or [] if "gcs" in v]
    options = ";".join(";".join(v["gcs"].get("mountOptions") or []) for v in mounts)
    return {
        "model_name": model,
        "model": path,
        "image": str(c.get("image") or ""),
        "gpu": (template.get("nodeSelector") or {}).get("accelerator") or "nvidia-l4",
        "gpu_count": int(limits.get("nvidia.com/gpu") or 1),
        "memory_gib": gib(str(limits.get("memory") or "16Gi")),
        "max_model_len": flags.max_model_len,
        "gpu_memory_utilization": flags.gpu_memory_utilization or 0.9,
        "kv_cache_dtype": planner_kv(flags),
        "enforce_eager": flags.enforce_eager,
        "cpu_offload_gb": flags.cpu_offload_gb,
        "max_num_seqs": flags.max_num_seqs,
        "max_num_batched_tokens": flags.max_num_batched_tokens,
        "dtype": planner_dtype(flags),
        # Without one, Cloud Run's default TCP startup probe: timeoutSeconds 240, periodSeconds 240,
        # failureThreshold 1 (https://cloud.google.com/run/docs/configuring/healthchecks, "The default TCP
        # startup probe").
        "probe_initial_s": float(probe.get("initialDelaySeconds") or 0),
        "probe_period_s": float(probe.get("periodSeconds") or 240),
        "probe_threshold": int(probe.get("failureThreshold") or 1),
        "fuse": bool(mounts),
        "fuse_uid_ok": not mounts or ("uid=1001" in options and "gid=1001" in options),
        "hf_token": "HF_TOKEN" in env,
    }


def _image_problem(cfg: dict[str, Any]) -> str | None:
    """How the image fails here, by the compatibility data (skills/data/vllm_images.yaml), as on Cloud Run:
    "too_old" (its vLLM predates the model family), the GPU driver's CUDA version when the image's CUDA build
    needs a newer driver, or None (fits, or a custom tag we cannot place)."""
    data = load_image_data()
    ref = parse_image(cfg["image"], data)
    if ref.vllm is None:
        return None
    fam = data.families.get(load_catalog().model(cfg["model_name"]).family)
    if fam is not None and ref.vllm < version(fam.min_vllm):
        return "too_old"
    drv = data.cloud_run_gpus.get(cfg["gpu"])
    need = data.cuda_min_driver.get(ref.cuda_major) if ref.cuda_major else None
    if drv is not None and need is not None and drv.driver_major < need:
        return drv.driver_cuda
    return None


def plan_startup(
    svc: dict[str, Any], service: str, revision: str, gated: Callable[[str], bool] = lambda _repo: False
) -> Startup:
    """`gated`: whether the Hub gates a repo (the sandbox asks its Hub stand-in); only such a pull without
    HF_TOKEN fails (Gemma 4 is not gated: skills/data/catalog.yaml, hub_gated)."""
    """The revision's start-up as a timeline of log lines and its outcome."""
    cfg = deployed_config(svc)
    check = check_as_deployed(
        FitRequest(
            model=cfg["model_name"],
            gpu=cfg["gpu"],
            gpu_count=cfg["gpu_count"],
            max_model_len=cfg["max_model_len"],
            gpu_memory_utilization=cfg["gpu_memory_utilization"],
            kv_cache_dtype=cfg["kv_cache_dtype"],
            cpu_offload_gb=cfg["cpu_offload_gb"],
            enforce_eager=cfg["enforce_eager"],
            host_memory_gib=cfg["memory_gib"],
            # the KV accounting of the image's vLLM release, with the batch the flags set (sliding-window layers
            # reserve --max-num-batched-tokens per request), as the plan of this spec counted it
            vllm_image=cfg["image"] or None,
            max_num_seqs=cfg["max_num_seqs"],
            max_num_batched_tokens=cfg["max_num_batched_tokens"],
            dtype=cfg["dtype"],
            # a Hub id (not a mounted path) is downloaded onto the in-memory filesystem, as on Cloud Run
            weights_from_hub=not cfg["model"].startswith("/"),
        )
    )
    cfg["max_model_len"] = cfg["max_model_len"] or check.max_len_that_fits
    lines = [sl.Line(0.0, sl.INSTANCE_START, log="varlog/system")]
    t = PULL_S
    lines += sl.engine_config_lines(t, cfg)
    t += 3.0
    load_s = max(check.load_s, 30.0)
    shards = max(2, min(12, round(check.weights_gib / 3)))
    probe_end = cfg["probe_initial_s"] + cfg["probe_threshold"] * cfg["probe_period_s"]
    ready_at = t + load_s + WARMUP_S
    container_failed = sl.CONTAINER_FAILED.format(rev=revision)

    def fail(kind: str, extra: list[sl.Line], message: str = container_failed) -> Startup:
        # Cloud Run's probe may give up before vLLM gets as far as its error: then that is the story.
        end = max(x.at for x in extra)
        if end > probe_end:
            return probe_timeout()
        return Startup(service, revision, lines + extra, end + 1.0, "failed", message, kind)

    def probe_timeout() -> Startup:
        done = int(max(0, probe_end - t) / load_s * shards) if probe_end > t else 0
        progress = sl.shard_lines(t, load_s, shards, upto=min(done, shards - 1)) if done else []
        probe = sl.probe_lines(cfg["probe_initial_s"], cfg["probe_period_s"], cfg["probe_threshold"])
        # The instance is killed at the probe's end: nothing vLLM would have printed later, one progress bar.
        before = [x for x in lines if x.at <= probe_end and "checkpoint shards" not in x.text]
        merged = sorted(before + progress + probe, key=lambda x: x.at)
        end = max(x.at for x in probe)
        return Startup(
            service,
            revision,
            merged,
            end + 1.0,
            "failed",
            sl.PROBE_FAILED.format(rev=revision),
            "startup_probe_timeout",
        )

    image_problem = _image_problem(cfg)
    if image_problem == "too_old":
        # The image's Transformers cannot read the checkpoint's config: it dies before the engine starts.
        early = [x for x in lines if "Resolved architecture" not in x.text and x.at <= t - 3.0 + 0.8]
        lines[:] = early
        return fail("container_exited_at_start", sl.unknown_architecture_lines(t - 2.0, "gemma4"))
    if image_problem is not None:
        return fail("cuda_incompatible", sl.driver_too_old_lines(t + 0.5, image_problem))
    gpu = load_catalog().gpu(cfg["gpu"])
    if not gpu.bf16 and cfg["dtype"] != "half":  # auto is the checkpoint's bfloat16, as the planner reads it
        return fail("bf16_unsupported", sl.bf16_lines(t + 0.5, gpu.name, gpu.compute_capability))
    if cfg["fuse"] and not cfg["fuse_uid_ok"]:
        return fail("gcs_fuse_permission_denied", sl.fuse_denied_lines(t + 0.5, cfg["model"]))
    if not cfg["fuse"] and not cfg["hf_token"] and gated(cfg["model"]):
        return fail("hf_auth_failed", sl.gated_lines(t + 1.5, cfg["model"]))
    if check.failure == "host_memory":
        half = shards // 2 or 1
        limit = int(cfg["memory_gib"] * 1024)
        used = int(max(check.host_need_gib * 1024, limit + 1))
        extra = sl.shard_lines(t, load_s, shards, upto=half)
        return fail(
            "container_memory_exceeded", extra + sl.host_memory_lines(t + half * load_s / shards + 1, limit, used)
        )
    if check.failure == "gpu_oom_at_load":
        k = max(1, int(shards * check.budget_gib / max(check.weights_gib, 0.1)) - 1)
        extra = sl.shard_lines(t, load_s, shards, upto=min(k, shards - 1))
        at = t + min(k, shards - 1) * load_s / shards + 1
        free = max(check.gpu_memory_gib - check.budget_gib, 0.3)
        return fail(
            "gpu_oom_at_load",
            extra + sl.cuda_oom_lines(at, check.weights_gib / shards, check.gpu_memory_gib, free, False),
        )
    lines += sl.shard_lines(t, load_s, shards)
    t += load_s
    lines.append(sl.loaded_line(t + 0.5, check.weights_gib, load_s))
    if check.failure == "kv_cache_insufficient":
        return fail(
            "kv_cache_insufficient",
            sl.kv_failure_lines(
                t + 1.0, cfg["max_model_len"], check.kv_needed_gib, check.kv_free_gib, check.max_len_that_fits
            ),
        )
    if check.failure == "graph_warmup_oom":
        outside = check.gpu_memory_gib * (1 - cfg["gpu_memory_utilization"])
        return fail(
            "gpu_oom_at_load",
            sl.cuda_oom_lines(t + 1.0, check.graph_warmup_gib, check.gpu_memory_gib, outside * 0.95, True),
        )
    if ready_at > probe_end:
        return probe_timeout()
    lines += sl.ready_lines(ready_at - 2.5, check.kv_free_gib, check.kv_tokens)
    # What this revision's vLLM answers once it serves: the figures its start-up lines printed.
    served = SimConfig(
        model_id=cfg["model"],
        max_model_len=cfg["max_model_len"],
        num_gpu_blocks=check.kv_blocks,
        kv_cache_size_tokens=check.kv_tokens,
        cache_dtype=cfg["kv_cache_dtype"],
        gpu_memory_utilization=cfg["gpu_memory_utilization"],
        uptime_s=0.0,
    )
    return Startup(service, revision, lines, ready_at, "ready", served=served)


class RevisionLifecycle:
    """Runs every starting revision on the clock; `finish` tells the Cloud Run simulator how each ended."""

    def __init__(
        self, clock: SandboxClock, logging: CloudLoggingStandIn, project: str, location: str, finish: Finish
    ) -> None:
        self.clock = clock
        self.logging = logging
        self.project = project
        self.location = location
        self.finish = finish
        self.active: dict[str, Startup] = {}
        self.finished: dict[str, Startup] = {}
        self.on_finished: list[Callable[[Startup], None]] = []
        self.backdate = False  # seeding: the revision started long ago and is ready now
        self.uri = ""  # every simulated service is answered by the one vLLM simulator on 127.0.0.1
        self._lock = threading.RLock()
        self.gated: Callable[[str], bool] = lambda _repo: False  # the sandbox points it at its Hub stand-in

    def started(self, svc: dict[str, Any], service: str, revision: str) -> None:
        """Cloud Run made a new revision (called by the simulator, under its lock: no callbacks here)."""
        s = plan_startup(svc, service, revision, self.gated)
        s.started = self.clock.now()
        if self.uri:
            svc["uri"] = self.uri
        with self._lock:
            if self.backdate:
                s.started -= s.end_at
                s.wall_start = time.time() - s.end_at
                s.backdated = True
            self.active[revision] = s

    def tick(self) -> None:
        """Write the lines that are due and decide the revisions whose time has come."""
        now = self.clock.now()
        done: list[Startup] = []
        with self._lock:
            for rev, s in list(self.active.items()):
                elapsed = now - s.started
                due = [x for x in s.lines[s.written :] if x.at <= elapsed]
                if due:
                    self.logging.append([self.entry(s, x) for x in due])
                    s.written += len(due)
                if elapsed >= s.end_at:
                    del self.active[rev]
                    self.finished[rev] = s
                    done.append(s)
        for s in done:
            self.finish(s.service, s.revision, s.outcome, s.message)
            for callback in list(self.on_finished):
                callback(s)

    def entry(self, s: Startup, line: sl.Line) -> dict[str, Any]:
        # Stamped with the wall-clock moment the line became due (never in the future), so time windows work.
        wall = min(s.wall_start + self.clock.real_seconds(line.at), time.time())
        if s.backdated:
            wall = s.wall_start + line.at
        ts = datetime.fromtimestamp(wall, UTC)
        text = line.text
        if line.vllm:
            text = f"{line.vllm} {ts:%m-%d %H:%M:%S} {text}"
        stamp = ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return {
            "insertId": uuid.uuid4().hex[:12],
            "logName": f"projects/{self.project}/logs/run.googleapis.com%2F{line.log.replace('/', '%2F')}",
            "resource": {
                "type": "cloud_run_revision",
                "labels": {
                    "service_name": s.service,
                    "revision_name": s.revision,
                    "configuration_name": s.service,
                    "location": self.location,
                    "project_id": self.project,
                },
            },
            "timestamp": stamp,
            "receiveTimestamp": (ts + timedelta(milliseconds=300)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "severity": line.severity,
            "textPayload": text,
        }
