# ruff: noqa: E501  (log lines are quoted as they appear)
"""One-click fixes for the findings that used to give written steps only: log lines -> finding -> proposed
action -> plan (field diff, gcloud, planner verdict) -> the rendered spec carries the fix; through the buttons
the same plan still needs a deployer's Confirm. Bad parameters, from a button or from the agent, are refused."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.deps import Deps
from bot.sandbox.cloud_logging_api import CloudLoggingStandIn
from bot.sandbox.cloud_run_api import CloudRunStandIn
from bot.sandbox.server import serve
from bot.settings import Settings
from bot.wiring import build_deps, close_deps
from handlers.reply import CONFIRM_ACTION, PLAN_ACTION
from skills.audit import latest
from skills.capacity.catalog import load_catalog
from skills.deploy.plan_builder import build_plan
from skills.diagnosis.diagnose import diagnose
from skills.diagnosis.remediation import ProposedAction, sanitize_action
from skills.errors import InvalidInput
from skills.ports import LogEntry, ServiceInfo
from skills.targets.cloud_run.render import DeployConfig, main_container, probe_for, render_service
from skills.targets.plan import Plan
from tests.deploy_helpers import click, command, plan_id_of

SERVICE = "vllm-gemma4"
BUCKET = "acme-weights"
T0 = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)

FUSE = ["PermissionError: [Errno 13] Permission denied: '/mnt/models/gemma-4-12B-it-qat-w4a16-ct/config.json'"]
HF_OFFLINE = [
    "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache and outgoing "
    "traffic has been disabled. To enable hf.co look-ups and downloads online, set 'local_files_only' to False."
]
HF_GATED = [
    "huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url "
    "https://huggingface.co/google/gemma-4-12b-it/resolve/main/config.json. Access to model google/gemma-4-12b-it "
    "is restricted. You must have access to it and be authenticated to access it."
]
TOOLS = [
    'ERROR 01-05 10:00:02 [serving_chat.py:201] "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
]
BF16 = [
    "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has "
    "compute capability 7.5. You can use float16 instead by explicitly setting the `dtype` flag in CLI, for "
    "example: --dtype=half."
]
# The catalog's short name used as the bucket folder (the weights live under the repo's own folder name).
MODEL_PATH = ["ValueError: Invalid repository ID or local directory specified: '/mnt/models/gemma-4-12b-qat'."]
QUOTA = ["Quota violated: NvidiaL4GpuAllocNoZonalRedundancyPerProjectRegion requested: 3 allowed: 2"]


def entries(lines: list[str]) -> list[LogEntry]:
    return [LogEntry(timestamp=T0 + timedelta(seconds=i), severity="ERROR", text=t) for i, t in enumerate(lines)]


def proposals(lines: list[str], kind: str, service: ServiceInfo | None = None) -> list[ProposedAction]:
    d = diagnose(entries(lines), service=service)
    assert d.root_kinds() == [kind]
    f = d.findings[0]
    assert f.remediation.steps, "the written steps stay"
    for a in f.remediation.actions:  # what the analyzers propose is what the agent path accepts, unchanged
        clean, note = sanitize_action(a)
        assert clean is not None and clean.params == a.params, note
    return f.remediation.actions


def spec_for(model: str = "gemma-4-12b-qat", *, bucket: str | None = BUCKET, gpu: str = "nvidia-l4") -> dict[str, Any]:
    m = load_catalog().model(model)
    cfg = DeployConfig(
        service=SERVICE,
        model=m.name,
        hf_repo=m.hf_repo,
        model_args=list(m.vllm_args),
        gpu=gpu,
        max_model_len=16384,
        gpu_memory_utilization=0.9,
        max_num_seqs=8,
        cpu="8",
        memory="32Gi",
        probe=probe_for(400),
        image="vllm/vllm-openai:v0.25.1-cu129",
        model_bucket=bucket,
    )
    return render_service(cfg)


def container(spec: dict[str, Any]) -> dict[str, Any]:
    return main_container(spec)


def env_of(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container(spec).get("env") or []}


def arg(spec: dict[str, Any], flag: str) -> str | None:
    args = [str(a) for a in container(spec)["args"]]
    return args[args.index(flag) + 1] if flag in args else None


@pytest.fixture
def fix_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"deploy_poll_s": 0.01, "model_bucket": BUCKET})


@pytest.fixture
async def deps(fix_settings: Settings, redis_client: Any) -> AsyncIterator[Deps]:
    d = build_deps(fix_settings)
    yield d
    await close_deps(d)


async def seed(deps: Deps, spec: dict[str, Any]) -> None:
    """Create the (broken) running service through the real client, as a deploy would."""
    op = await deps.runtime.apply_service(SERVICE, spec, create=True)
    assert (await deps.runtime.wait_operation(op, 30)).done


async def plan_of(deps: Deps, action: ProposedAction) -> Plan:
    plan = await build_plan(action.action, action.params, deps.runtime, deps.writes.env, user_id="UDEPLOYER")
    assert plan.blocked() == "", plan.blocked()
    return plan


def changed(plan: Plan) -> dict[str, tuple[str | None, str | None]]:
    return {c.path: (c.old, c.new) for c in plan.changes}


# --- each kind: lines -> finding -> action -> plan -> rendered fix ------------------------------------------


async def test_fuse_permission_denied_fixes_mount_options(deps: Deps, cloud_run: CloudRunStandIn) -> None:
    broken = spec_for()
    broken["template"]["volumes"][0]["gcs"]["mountOptions"] = ["uid=0", "max-conns-per-host=100"]
    await seed(deps, broken)
    (action,) = proposals(FUSE, "gcs_fuse_permission_denied")
    assert action.params == {"fix_fuse_mount_options": True}
    plan = await plan_of(deps, action)
    opts = plan.spec["template"]["volumes"][0]["gcs"]["mountOptions"]  # type: ignore[index]
    assert opts[:2] == ["uid=1001", "gid=1001"] and "uid=0" not in opts
    assert {"max-conns-per-host=100", "stat-cache-ttl=3600s", "type-cache-ttl=3600s"} <= set(opts)
    assert plan.spec["template"]["volumes"][0]["gcs"]["readOnly"] is True  # type: ignore[index]
    old, new = changed(plan)["template.volumes[models].gcs.mountOptions"]
    assert old == "uid=0 max-conns-per-host=100" and new is not None and new.startswith("uid=1001 gid=1001")
    assert "mount-options=uid=1001;gid=1001;max-conns-per-host=100" in plan.gcloud
    assert "--clear-volumes" in plan.gcloud  # gcloud would otherwise add a second volume of the same name
    assert plan.verdict == "fits"


async def test_fuse_iam_denial_has_no_mount_fix(deps: Deps) -> None:
    lines = [
        "gcsfuse: Error while mounting gcsfuse: googleapi: Error 403: vllm-sa@p.iam.gserviceaccount.com does not "
        "have storage.objects.list access to the Google Cloud Storage bucket."
    ]
    assert proposals(lines, "gcs_fuse_permission_denied") == []  # IAM grants stay a human's written step


async def test_fuse_fix_without_a_volume_is_a_clear_error(deps: Deps, cloud_run: CloudRunStandIn) -> None:
    await seed(deps, spec_for(bucket=None))
    with pytest.raises(InvalidInput, match="mounts no GCS FUSE volume"):
        await build_plan("redeploy", {"fix_fuse_mount_options": True}, deps.runtime, deps.writes.env)


async def test_hf_offline_without_files_pulls_from_the_hub(deps: Deps, cloud_run: CloudRunStandIn) -> None:
    broken = spec_for(bucket=None)
    broken["template"]["containers"][0]["env"] = [{"name": "HF_HUB_OFFLINE", "value": "1"}]  # the reported mistake
    await seed(deps, broken)
    hub, bucket = proposals(HF_OFFLINE, "hf_auth_failed")
    assert (hub.params, bucket.params) == ({"model_source": "hub"}, {"model_source": "bucket"})
    plan = await plan_of(deps, hub)
    env = env_of(plan.spec or {})
    assert "HF_HUB_OFFLINE" not in env
    assert env["HF_TOKEN"]["valueSource"]["secretKeyRef"] == {"secret": "hf-token", "version": "latest"}
    assert arg(plan.spec or {}, "--model") == "google/gemma-4-12B-it-qat-w4a16-ct"
    diff = changed(plan)
    assert diff["template.containers[0].env[HF_HUB_OFFLINE].value"] == ("1", None)
    assert "--clear-env-vars" in plan.gcloud and "--set-secrets=HF_TOKEN=hf-token:latest" in plan.gcloud

    # The other proposal: the weights from the configured bucket, mounted as the image's user, offline.
    plan = await plan_of(deps, bucket)
    spec = plan.spec or {}
    assert arg(spec, "--model") == "/mnt/models/gemma-4-12B-it-qat-w4a16-ct"
    assert env_of(spec)["HF_HUB_OFFLINE"]["value"] == "1"
    (vol,) = spec["template"]["volumes"]
    assert vol["gcs"]["bucket"] == BUCKET and vol["gcs"]["readOnly"] is True
    assert {"uid=1001", "gid=1001"} <= set(vol["gcs"]["mountOptions"])
    assert container(spec)["volumeMounts"] == [{"name": vol["name"], "mountPath": "/mnt/models"}]


async def test_hf_gated_injects_the_token_from_secret_manager(deps: Deps, cloud_run: CloudRunStandIn) -> None:
    literal = "hf_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z"
    broken = spec_for(bucket=None)
    broken["template"]["containers"][0]["env"] = [{"name": "HF_TOKEN", "value": literal}]
    await seed(deps, broken)
    token, bucket = proposals(HF_GATED, "hf_auth_failed")
    assert (token.params, bucket.params) == ({"hf_token_from_secret": True}, {"model_source": "bucket"})
    plan = await plan_of(deps, token)
    ref = env_of(plan.spec or {})["HF_TOKEN"]
    assert ref == {"name": "HF_TOKEN", "valueSource": {"secretKeyRef": {"secret": "hf-token", "version": "latest"}}}
    assert any("literal HF_TOKEN" in n for n in plan.notes)
    shown = plan.model_dump_json(exclude={"spec"})  # what is rendered to Slack: diff, gcloud, notes
    assert literal not in shown and "[REDACTED:" in shown


async def test_tool_parser_missing_enables_gemma4_tool_calling(deps: Deps, cloud_run: CloudRunStandIn) -> None:
    broken = spec_for()
    args = broken["template"]["containers"][0]["args"]
    i = args.index("--enable-auto-tool-choice")
    del args[i : i + 5]  # --enable-auto-tool-choice --tool-call-parser gemma4 --reasoning-parser gemma4
    await seed(deps, broken)
    (action,) = proposals(TOOLS, "tool_parser_missing")
    assert action.params == {"enable_tool_calling": True}
    plan = await plan_of(deps, action)
    spec = plan.spec or {}
    assert "--enable-auto-tool-choice" in container(spec)["args"]
    assert arg(spec, "--tool-call-parser") == "gemma4" and arg(spec, "--reasoning-parser") == "gemma4"
    diff = changed(plan)
    assert diff["template.containers[0].args --tool-call-parser"] == (None, "gemma4")
    assert diff["template.containers[0].args --enable-auto-tool-choice"] == (None, "true")
    assert "--tool-call-parser,gemma4,--reasoning-parser,gemma4" in plan.gcloud


async def test_unknown_parser_in_this_image_moves_to_the_image_the_compatibility_data_names(
    deps: Deps, cloud_run: CloudRunStandIn
) -> None:
    # Issue 31: not a guess any more: the newest image vllm_images.yaml names for the model on this GPU, which
    # the planner checks again before the plan exists.
    spec = spec_for()
    spec["template"]["containers"][0]["image"] = "vllm/vllm-openai:v0.12.0"  # from before the gemma4 parsers
    await seed(deps, spec)
    lines = ["KeyError: 'invalid tool call parser: gemma4 (chose from { hermes,llama3_json,mistral,pythonic })'"]
    (action,) = proposals(lines, "container_exited_at_start")
    assert action.params == {"image": "vllm/vllm-openai:v0.25.1-cu129"}
    plan = await plan_of(deps, action)
    assert changed(plan)["template.containers[0].image"] == (
        "vllm/vllm-openai:v0.12.0",
        "vllm/vllm-openai:v0.25.1-cu129",
    )


async def test_bf16_unsupported_runs_half(deps: Deps, cloud_run: CloudRunStandIn) -> None:
    await seed(deps, spec_for())
    (action,) = proposals(BF16, "bf16_unsupported")
    assert action.params == {"dtype": "half"}
    plan = await plan_of(deps, action)
    assert arg(plan.spec or {}, "--dtype") == "half"
    assert changed(plan)["template.containers[0].args --dtype"] == (None, "half")
    assert "--dtype,half" in plan.gcloud and plan.verdict in ("fits", "fits_with_changes")


async def test_planner_still_decides_dtype_on_a_gpu_without_bf16(deps: Deps, cloud_run: CloudRunStandIn) -> None:
    await seed(deps, spec_for())
    # Cloud Run offers no GPU without bf16 (its API refuses a T4), so put the running service there directly:
    # the planner's decision is what is under test.
    cloud_run.services[SERVICE]["template"]["nodeSelector"]["accelerator"] = "nvidia-tesla-t4"
    plan = await build_plan("redeploy", {"dtype": "bfloat16"}, deps.runtime, deps.writes.env)
    assert plan.verdict == "fits_with_changes" and "--dtype half" in plan.fit_changes
    assert arg(plan.spec or {}, "--dtype") == "half"  # what runs is what the planner says can run


async def test_model_path_not_found_uses_the_catalog_path(deps: Deps, cloud_run: CloudRunStandIn) -> None:
    wrong, right = "/mnt/models/gemma-4-12b-qat", "/mnt/models/gemma-4-12B-it-qat-w4a16-ct"
    broken = spec_for()
    c = broken["template"]["containers"][0]
    c["args"][c["args"].index("--model") + 1] = wrong
    await seed(deps, broken)
    (action,) = proposals(MODEL_PATH, "model_not_found")
    assert action.params == {"model": "gemma-4-12b-qat"}
    plan = await plan_of(deps, action)
    assert arg(plan.spec or {}, "--model") == right
    assert changed(plan)["template.containers[0].args --model"] == (wrong, right)
    assert f"--model,{right}" in plan.gcloud and plan.verdict == "fits"
    # A path that is already the catalog's but holds no files: pull from the Hub instead.
    empty = ["OSError: /mnt/models/gemma-4-12B-it-qat-w4a16-ct does not appear to have a file named config.json."]
    (hub,) = proposals(empty, "model_not_found")
    assert hub.params == {"model_source": "hub"}
    # A repo id that matches no catalog model (13b?) is not guessed at.
    typo = [
        "huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error. Repository Not Found for url: https://huggingface.co/google/gemma-4-13b-it/resolve/main/config.json."
    ]
    assert proposals(typo, "model_not_found") == []
    # Letter case alone is never "fixed" (GCS is case-sensitive; the bucket's spelling may be the right one).
    cased = [
        "ValueError: Invalid repository ID or local directory specified: '/mnt/models/gemma-4-12b-it-qat-w4a16-ct'."
    ]
    d = diagnose(entries(cased))
    assert d.findings[0].remediation.actions == [] and "letter case" in d.findings[0].remediation.steps[0]


async def test_model_switch_carries_checkpoint_flags_and_the_planner_verdict(
    deps: Deps, cloud_run: CloudRunStandIn
) -> None:
    running = spec_for()
    c = running["template"]["containers"][0]
    c["args"][c["args"].index("--model") + 1] = "/mnt/models/gemma-4-12B-it-qat-w4a16-ct"  # the bucket's spelling
    await seed(deps, running)
    hub = await build_plan("redeploy", {"model_source": "hub"}, deps.runtime, deps.writes.env)
    assert arg(hub.spec or {}, "--model") == "google/gemma-4-12B-it-qat-w4a16-ct"
    back = await build_plan(
        "redeploy", {"model": "gemma-4-12b-qat", "max_model_len": 8192}, deps.runtime, deps.writes.env
    )
    assert arg(back.spec or {}, "--model") == "/mnt/models/gemma-4-12B-it-qat-w4a16-ct"  # case kept
    assert arg(spec_for(), "--quantization") == "compressed-tensors"
    fp8 = await build_plan("redeploy", {"model": "12b-fp8"}, deps.runtime, deps.writes.env)
    spec = fp8.spec or {}
    assert arg(spec, "--model") == "/mnt/models/gemma-4-12B-it-FP8-Dynamic"
    assert arg(spec, "--quantization") is None  # the QAT checkpoint's flag goes with it
    assert spec["annotations"]["gemma-sre/model"] == "gemma-4-12b-fp8" and fp8.verdict != "does_not_fit"
    big = await build_plan("redeploy", {"model": "gemma-4-31b"}, deps.runtime, deps.writes.env)
    assert big.verdict == "does_not_fit" and big.blocked()  # bf16 31B on one L4: cannot be confirmed


async def test_gpu_quota_scales_within_the_stated_quota(deps: Deps, cloud_run: CloudRunStandIn) -> None:
    cloud_run.seed_service(SERVICE, min_instances=0, max_instances=3)
    svc = await deps.runtime.get_service(SERVICE)
    (action,) = proposals(QUOTA, "gpu_quota_exceeded", service=svc)
    assert (action.action, action.params) == ("scale", {"min_instances": 0, "max_instances": 2})
    plan = await plan_of(deps, action)
    assert plan.spec["template"]["scaling"]["maxInstanceCount"] == 2  # type: ignore[index]
    none_allowed = ["Quota violated: NvidiaL4GpuAllocNoZonalRedundancyPerProjectRegion requested: 1 allowed: 0"]
    assert proposals(none_allowed, "gpu_quota_exceeded", service=svc) == []  # only a quota request helps


# --- bad parameters: refused with a clear error, nothing changes ------------------------------------------

BAD = [
    ({"dtype": "float32"}, "dtype"),
    ({"dtype": "half --trust-remote-code"}, "dtype"),
    ({"enable_tool_calling": "--tool-call-parser evil"}, "enable_tool_calling"),
    ({"fix_fuse_mount_options": False}, "fix_fuse_mount_options"),
    ({"hf_token_from_secret": False}, "hf_token_from_secret"),
    ({"model_source": "s3://evil"}, "model_source"),
    ({"model": "/etc/passwd"}, "model"),
    ({"model": "gemma-4-12b --trust-remote-code"}, "model"),
    ({"model": "gemma-9-xl"}, "Unknown model"),
]


@pytest.mark.parametrize(("params", "why"), BAD, ids=[str(p) for p, _ in BAD])
async def test_invalid_fix_params_are_refused(
    deps: Deps, cloud_run: CloudRunStandIn, params: dict[str, Any], why: str
) -> None:
    clean, note = sanitize_action(ProposedAction(action="redeploy", params=params, reason="from the model"))
    assert clean is None and note.startswith("invalid parameters for redeploy") and why in note
    cloud_run.seed_service(SERVICE)
    with pytest.raises(InvalidInput, match=why):
        await build_plan("redeploy", params, deps.runtime, deps.writes.env)
    reply, _ = await click(deps, PLAN_ACTION, json.dumps({"action": "redeploy", "params": params}))
    assert reply is not None and reply.title.startswith(":warning:") and "redeploy" in reply.title
    assert not [r for r in cloud_run.requests if r[0] != "GET"]


async def test_agent_cannot_smuggle_args_and_noop_fixes_are_refused(deps: Deps, cloud_run: CloudRunStandIn) -> None:
    smuggled = ProposedAction(action="redeploy", params={"args": ["--trust-remote-code"], "image": "evil/vllm"})
    clean, note = sanitize_action(smuggled)
    # `image` is a field since issue 31, but only for images in the compatibility data.
    assert clean is None and "Unknown image `evil/vllm`" in note
    clean, note = sanitize_action(ProposedAction(action="redeploy", params={"args": ["--trust-remote-code"]}))
    assert clean is None and "without any parameter" in note
    with pytest.raises(InvalidInput, match="args is not a known option"):
        await build_plan("redeploy", {"dtype": "half", "args": ["--x"]}, deps.runtime, deps.writes.env)
    await seed(deps, spec_for())  # already mounts as uid/gid 1001 and has tool calling
    for params in ({"fix_fuse_mount_options": True}, {"enable_tool_calling": True}):
        with pytest.raises(InvalidInput, match="would change nothing"):
            await build_plan("redeploy", params, deps.runtime, deps.writes.env)


async def test_bucket_source_needs_a_configured_bucket(
    settings: Settings, redis_client: Any, cloud_run: CloudRunStandIn
) -> None:
    d = build_deps(settings.model_copy(update={"model_bucket": None}))
    try:
        op = await d.runtime.apply_service(SERVICE, spec_for(bucket=None), create=True)
        await d.runtime.wait_operation(op, 30)
        with pytest.raises(InvalidInput, match="No model bucket"):
            await build_plan("redeploy", {"model_source": "bucket"}, d.runtime, d.writes.env)
    finally:
        await close_deps(d)


# --- /gemma diagnose shows the buttons; a click opens the plan; Confirm needs a deployer -------------------


@pytest.fixture
def logging_api() -> Any:
    standin = CloudLoggingStandIn()
    with serve(standin.app()) as url:
        standin.base_url = url  # type: ignore[attr-defined]
        yield standin


def _log_entry(text: str, at: datetime) -> dict[str, Any]:
    return {
        "insertId": f"id{at.timestamp()}",
        "logName": "projects/test-proj/logs/run.googleapis.com%2Fstderr",
        "resource": {"type": "cloud_run_revision", "labels": {"service_name": SERVICE, "location": "us-central1"}},
        "timestamp": at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "severity": "ERROR",
        "textPayload": text,
    }


async def test_diagnose_command_offers_the_fixes_as_plan_buttons(
    fix_settings: Settings, redis_client: Any, cloud_run: CloudRunStandIn, logging_api: CloudLoggingStandIn
) -> None:
    now = datetime.now(UTC) - timedelta(minutes=5)
    lines = FUSE + TOOLS + BF16 + HF_OFFLINE + MODEL_PATH
    logging_api.entries += [_log_entry(t, now + timedelta(seconds=i)) for i, t in enumerate(lines)]
    st = fix_settings.model_copy(update={"cloud_logging_api_endpoint": logging_api.base_url})  # type: ignore[attr-defined]
    deps = build_deps(st)
    try:
        broken = spec_for()
        broken["template"]["volumes"][0]["gcs"]["mountOptions"] = ["max-conns-per-host=100"]
        c = broken["template"]["containers"][0]
        i = c["args"].index("--enable-auto-tool-choice")
        del c["args"][i : i + 5]
        await seed(deps, broken)

        reply, _ = await command(deps, "diagnose --since 1h")
        assert reply is not None
        buttons = {b.value: b for b in reply.buttons if b.action_id == PLAN_ACTION}
        offered = [json.loads(v) for v in buttons]
        for expected in (
            {"action": "redeploy", "params": {"fix_fuse_mount_options": True}},
            {"action": "redeploy", "params": {"enable_tool_calling": True}},
            {"action": "redeploy", "params": {"dtype": "half"}},
            {"action": "redeploy", "params": {"model_source": "hub"}},
            {"action": "redeploy", "params": {"model": "gemma-4-12b-qat"}},
        ):
            assert expected in offered, expected
        label = next(b.label for v, b in buttons.items() if "enable_tool_calling" in v)
        assert label == "Plan redeploy: enable_tool_calling=True"
        # The written steps are still there.
        assert any("--tool-call-parser gemma4" in (s.text or "") for s in reply.sections)

        # Click the tool-calling button: the plan shows the diff and gcloud; a non-deployer cannot confirm it.
        value = next(v for v in buttons if "enable_tool_calling" in v)
        plan_reply, _ = await click(deps, PLAN_ACTION, value)
        assert plan_reply is not None and plan_reply.title.startswith(":clipboard: Plan: Redeploy")
        code = "\n".join(s.code or "" for s in plan_reply.sections)
        assert "+ template.containers[0].args --tool-call-parser: gemma4" in code
        assert "gcloud run deploy vllm-gemma4" in code
        plan_id = plan_id_of(plan_reply)
        writes_before = len([r for r in cloud_run.requests if r[0] != "GET"])
        refusal, _ = await click(deps, CONFIRM_ACTION, plan_id, user="UOTHER")
        assert refusal is not None and "not allowed" in refusal.title
        assert len([r for r in cloud_run.requests if r[0] != "GET"]) == writes_before
        done, _ = await click(deps, CONFIRM_ACTION, plan_id)
        assert done is None
        args = cloud_run.services[SERVICE]["template"]["containers"][0]["args"]
        assert args[args.index("--tool-call-parser") + 1] == "gemma4" and "--enable-auto-tool-choice" in args
        audit = await latest(deps.redis, deps.settings.key("audit"))
        assert audit[0].action == "redeploy" and audit[0].result == "ok" and audit[0].user_id == "UDEPLOYER"
        assert audit[0].params.get("enable_tool_calling") is True

        # The FUSE button after that: the plan is computed against the service as it now runs.
        value = next(v for v in buttons if "fix_fuse_mount_options" in v)
        plan_reply, _ = await click(deps, PLAN_ACTION, value)
        done, _ = await click(deps, CONFIRM_ACTION, plan_id_of(plan_reply))
        assert done is None
        opts = cloud_run.services[SERVICE]["template"]["volumes"][0]["gcs"]["mountOptions"]
        assert opts[:2] == ["uid=1001", "gid=1001"]
    finally:
        await close_deps(deps)


async def test_redeploy_reads_vllm_defaults_through_the_flags_model(deps: Deps) -> None:
    """A service deployed by hand from fit's args has no `--kv-cache-dtype` (vLLM's auto): asking for auto
    changes nothing, where the old hand-written patch wrote `--kv-cache-dtype auto` as a change."""
    spec = spec_for()
    c = spec["template"]["containers"][0]
    assert "--kv-cache-dtype" not in c["args"]  # auto is vLLM's default: not written
    c["args"] = [*c["args"], "--swap-space", "8", "--seed=7"]  # the operator's own flags
    await seed(deps, spec)
    with pytest.raises(InvalidInput, match="would change nothing"):
        await build_plan("redeploy", {"kv_cache_dtype": "auto"}, deps.runtime, deps.writes.env)
    plan = await build_plan("redeploy", {"max_model_len": 8192}, deps.runtime, deps.writes.env)
    assert arg(plan.spec or {}, "--max-model-len") == "8192"
    assert container(plan.spec or {})["args"][-3:] == ["--swap-space", "8", "--seed=7"]  # kept, in order
    assert [p for p in changed(plan) if " --" in p] == ["template.containers[0].args --max-model-len"]


async def test_redeploy_repairs_a_malformed_flag_and_names_one_it_cannot(deps: Deps) -> None:
    spec = spec_for()
    c = spec["template"]["containers"][0]
    c["args"][c["args"].index("--max-model-len") + 1] = "lots"
    await seed(deps, spec)
    with pytest.raises(InvalidInput, match="--max-model-len lots"):
        await build_plan("redeploy", {"max_num_seqs": 4}, deps.runtime, deps.writes.env)
    plan = await build_plan("redeploy", {"max_model_len": 8192}, deps.runtime, deps.writes.env)
    assert changed(plan)["template.containers[0].args --max-model-len"] == ("lots", "8192")
