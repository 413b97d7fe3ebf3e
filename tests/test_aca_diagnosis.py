"""Issue 55 item 2: Azure Container Apps failures diagnosed from ACA's own wordings (tests/data/aca_logs, sources in
its manifest.yaml), through the entry point the bot uses, with the entries the ACA adapter would give.

- An image the replica cannot pull and a workload profile the environment lacks are kinds of their own, with why
  (credentials, tag, firewall, rate limit) when the registry said it.
- Probe failures, GPU quota and memory kills reuse their kinds, with ACA's fixes (az commands, ACA's probe limits).
- Exit code 137 alone, a CPU core quota and a refused profile property are given no cause; a healthy ACA start-up
  (revision events, image pulled, vLLM start-up, probes failing while it loads and then passing) raises nothing.

Only the tuning folder is read here; the held-out third is scored by `python -m tests.aca_samples heldout`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.sandbox.startup_lines import engine_config_lines, loaded_line, ready_lines, shard_lines
from skills.diagnosis.analyzers.startup import ACA_MAX_DELAY_S, ACA_MAX_PERIOD_S, ACA_MAX_THRESHOLD
from skills.diagnosis.diagnose import diagnose, diagnose_service
from skills.ports import Condition, LogBatch, LogEntry, LogQuery, ServiceInfo
from tests.aca_samples import SYSTEM, TUNING, Sample, entries, samples

TUNED = samples(TUNING)
CONSOLE = "ContainerAppConsoleLogs_CL/stdout"


class _Logs:
    """The Logs port answering what the ACA adapter read (the bot's diagnose_service fetches through it)."""

    def __init__(self, batch: list[LogEntry]) -> None:
        self.batch = batch

    async def fetch(self, query: LogQuery) -> LogBatch:
        return LogBatch(entries=self.batch)


async def _root_kinds(batch: list[LogEntry], service: ServiceInfo | None = None) -> list[str]:
    query = LogQuery(service="vllm-gemma4", since=datetime.now(UTC) - timedelta(hours=1))
    return (await diagnose_service(_Logs(batch), query, token_budget=800, service=service)).root_kinds()


@pytest.mark.parametrize("sample", TUNED, ids=[s.file for s in TUNED])
async def test_each_tuning_sample_is_diagnosed_as_labelled(sample: Sample) -> None:
    got = await _root_kinds(entries(TUNING / sample.file))
    assert sorted(got) == sorted(sample.root_causes), sample.source


def test_a_probe_that_gave_up_after_a_memory_kill_is_its_consequence() -> None:
    d = diagnose(entries(TUNING / "public_viewer_next_build_killed_137.log"), token_budget=800)
    probe = next(f for f in d.findings if f.kind == "startup_probe_timeout")
    assert probe.caused_by == "container_memory_exceeded"
    memory = d.findings[0]
    assert memory.kind == "container_memory_exceeded" and "az containerapp update" in str(memory.remediation)
    assert "Cloud Run" not in str(memory.remediation)


def test_exit_code_137_alone_is_not_a_memory_finding() -> None:
    line = "ContainerTerminated: Container 'gemma' was terminated with exit code '137'"
    assert diagnose([LogEntry(text=line, severity="WARNING", log_name=SYSTEM)]).kinds() == []


@pytest.mark.parametrize(
    ("file", "why", "fix"),
    [
        ("quotes_api_imagepullunauthorized_json.log", "(auth)", "AcrPull"),
        ("azd_quotes_api_manifest_unknown.log", "(not found)", "show-tags"),
        ("elb_dashboard_redis_docker_hub_429.log", "(rate limited)", "az acr import"),
        ("store_api33_errimagepull_ghcr_403.log", "(auth)", "az containerapp registry set"),
    ],
)
def test_an_image_pull_says_why_and_the_fix_for_it(file: str, why: str, fix: str) -> None:
    d = diagnose(entries(TUNING / file), token_budget=800)
    pull = d.findings[0]
    assert pull.kind == "aca_image_pull_failed" and why in pull.title
    assert fix in str(pull.remediation) and "--type system" in str(pull.remediation)


def test_a_liveness_probe_after_a_failed_pull_is_not_its_own_cause() -> None:
    d = diagnose(entries(TUNING / "store_api33_errimagepull_ghcr_403.log"), token_budget=800)
    assert d.root_kinds() == ["aca_image_pull_failed"]


def test_a_probe_fix_on_aca_stays_within_acas_probe_limits() -> None:
    d = diagnose(entries(TUNING / "aca1561_startup_probe_connection_refused.log"), token_budget=800)
    probe = d.findings[0]
    assert probe.kind == "startup_probe_timeout" and "Container Apps" in probe.remediation.summary
    params = probe.remediation.actions[0].params
    assert params["startup_failure_threshold"] <= ACA_MAX_THRESHOLD
    assert params["startup_period_s"] <= ACA_MAX_PERIOD_S
    text = str(probe.remediation)
    assert f"{ACA_MAX_DELAY_S + ACA_MAX_PERIOD_S * ACA_MAX_THRESHOLD} s" in text and "--yaml app.yaml" in text


def test_azure_gpu_quota_names_the_quota_and_the_azure_fix() -> None:
    d = diagnose(entries(TUNING / "skypilot464_azure_quota_ncasv3_t4.log"), token_budget=800)
    quota = d.findings[0]
    assert quota.kind == "gpu_quota_exceeded"
    assert "Standard NCASv3_T4 Family Cores" in quota.title and "limit 0" in quota.title
    assert "az containerapp env list-usages" in str(quota.remediation) and "Cloud Run" not in str(quota.remediation)


def test_the_workload_profile_finding_names_the_gpu_profile() -> None:
    d = diagnose(entries(TUNING / "azcli30526_workloadprofileinvalidtype_t4.log"), token_budget=800)
    f = d.findings[0]
    assert f.kind == "aca_workload_profile_missing" and "GPU" in f.title.upper()
    assert "az containerapp env workload-profile list" in str(f.remediation)


async def test_a_failed_revisions_provisioning_error_is_read_from_the_service() -> None:
    # The ACA target's failed revision: ARM's provisioningError, in the service's terminal condition; no log line.
    line = (TUNING / "azd_quotes_api_manifest_unknown.log").read_text().splitlines()[0]
    svc = ServiceInfo(
        name="vllm-gemma4",
        terminal_condition=Condition(type="Ready", state="CONDITION_FAILED", reason="Failed", message=line),
    )
    assert await _root_kinds([], service=svc) == ["aca_image_pull_failed"]


def _healthy_start() -> list[LogEntry]:
    """An ACA replica's start as the adapter gives it: image pull events (yeongseon lab), startup probes failing while
    vLLM loads, then vLLM's start-up as the sandbox writes it (bot/sandbox/startup_lines.py, vLLM's own wordings)."""
    t0 = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
    system = [
        *entries(TUNING / "healthy_labs_acr_pe_pulled_started.log"),
        *[
            LogEntry(
                text="ProbeFailed: Probe of StartUp failed with status code: 1", severity="WARNING", log_name=SYSTEM
            )
            for _ in range(3)
        ],
    ]
    lines = [
        *engine_config_lines(
            0,
            {
                "model": "google/gemma-4-12b-it",
                "max_model_len": 32768,
                "gpu_memory_utilization": 0.95,
                "kv_cache_dtype": "auto",
            },
        ),
        *shard_lines(5, 120, 5),
        loaded_line(130, 23.1, 120),
        *ready_lines(190, 40.2, 220_000),
    ]
    vllm = [
        LogEntry(text=f"{ln.vllm} 12-05 10:00:00 {ln.text}" if ln.vllm else ln.text, log_name=CONSOLE) for ln in lines
    ]
    ready = [LogEntry(text="RevisionReady: Revision ready", severity="INFO", log_name=SYSTEM)]
    out = [*system, *vllm, *ready]
    return [e.model_copy(update={"timestamp": t0 + timedelta(seconds=i)}) for i, e in enumerate(out)]


async def test_a_healthy_aca_start_raises_nothing() -> None:
    batch = _healthy_start()
    assert any("Application startup complete" in e.text or "Uvicorn running" in e.text for e in batch)
    assert await _root_kinds(batch) == []


def test_cloud_run_logs_keep_cloud_runs_probe_fix() -> None:
    line = 'STARTUP HTTP probe failed 20 times consecutively for container "vllm" on path "/health"'
    d = diagnose([LogEntry(text=line, severity="ERROR")], token_budget=500)
    assert d.findings[0].kind == "startup_probe_timeout"
    assert "Cloud Run" in d.findings[0].remediation.summary
