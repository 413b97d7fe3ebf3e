# ruff: noqa: E501  (log lines are quoted as they appear)
"""What the memory findings say carries the log's own numbers, read once: the host limit and use from Cloud
Run's line or Ray's memory monitor (its GB are 10^9 bytes), a service's limit by the one reader of sizes when the
log names none, and the GPU out-of-memory fix from the --gpu-memory-utilization the engine started with."""

from __future__ import annotations

from skills.diagnosis.diagnose import diagnose
from skills.ports import ServiceInfo
from tests.test_diagnose_kinds import V1_ARGS, entries


def test_cloud_runs_line_gives_the_limit_and_what_was_used() -> None:
    d = diagnose(
        entries(
            (
                "ERROR",
                "Memory limit of 16384 MiB exceeded with 16921 MiB used. Consider increasing the memory limit, see https://cloud.google.com/run/docs/configuring/memory-limits",
            )
        )
    )
    f = d.findings[0]
    assert f.kind == "container_memory_exceeded" and "(16384 MiB)" in f.title
    assert any("it used 16921 MiB" in s for s in f.remediation.steps), f.remediation.steps


def test_rays_monitor_counts_decimal_gigabytes() -> None:
    # vllm-project/vllm issue 2669 (Ray worker out of memory), as the user pasted it.
    line = (
        "Memory on the node (IP: 169.254.181.2, ID: 708c7baf966d59aa3f08299830c349ca055293ebb1c33d8e72cd3336) where the task "
        "(actor ID: 0dab4ab45f6c947201afac6d01000000, name=RayWorkerVllm.__init__, pid=308, memory used=11.15GB) was running "
        "was 12.49GB / 13.15GB (0.950003), which exceeds the memory usage threshold of 0.95. Ray killed this worker "
        "(ID: 79a553ea91fe46f95e8384ddf8a8f0a01e3418a975ecd0af983c7bb2) because it was the most recently scheduled task"
    )
    f = diagnose(entries(("ERROR", line))).findings[0]
    assert f.kind == "container_memory_exceeded"
    assert "(12541 MiB)" in f.title  # 13.15 x 10^9 bytes
    assert any("it used 11911 MiB" in s for s in f.remediation.steps), f.remediation.steps  # 12.49 x 10^9 bytes


def test_a_limit_the_log_does_not_name_is_the_services_read_as_a_kubernetes_quantity() -> None:
    svc = ServiceInfo(name="vllm-gemma4", memory="32G", cpu="8")
    f = diagnose(
        entries(("ERROR", "Container terminated because it exceeded the memory limit.")), service=svc
    ).findings[0]
    assert "(30518 MiB)" in f.title  # 32G is 32 x 10^9 bytes, not 32 GiB (32768 MiB)


def test_a_gpu_oom_at_load_lowers_the_utilisation_the_engine_started_with() -> None:
    lines = [
        V1_ARGS,  # 'gpu_memory_utilization': 0.9
        "(EngineCore_DP0 pid=312) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 21.96 GiB of which 1.02 GiB is free.",
    ]
    f = diagnose(entries(*lines)).findings[0]
    assert f.kind == "gpu_oom_at_load"
    assert "Lower `--gpu-memory-utilization` from 0.9 to 0.85." in f.remediation.steps
    assert {"gpu_memory_utilization": 0.85} in [a.params for a in f.remediation.actions]


def test_a_gpu_oom_at_the_smallest_length_proposes_no_shorter_one() -> None:
    args = V1_ARGS.replace("'max_model_len': 32768", "'max_model_len': 4096")
    oom = "(EngineCore_DP0 pid=312) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB."
    f = diagnose(entries(args, oom)).findings[0]
    assert f.kind == "gpu_oom_at_load"
    assert not [a for a in f.remediation.actions if "max_model_len" in a.params]  # 4096 is the floor already


def test_a_kv_cache_already_in_fp8_is_not_told_to_use_fp8() -> None:
    args = V1_ARGS.replace("'kv_cache_dtype': 'auto'", "'kv_cache_dtype': 'fp8'")
    kv = (
        "(EngineCore_DP0 pid=312) ValueError: To serve at least one request with the models's max seq len (32768), "
        "(5.00 GiB KV cache is needed, which is larger than the available KV cache memory (2.10 GiB). Based on the "
        "available memory, the estimated maximum model length is 13760. Try increasing `gpu_memory_utilization` or "
        "decreasing `max_model_len` when initializing the engine."
    )
    f = diagnose(entries(args, kv)).findings[0]
    assert f.kind == "kv_cache_insufficient"
    assert not [a for a in f.remediation.actions if a.params.get("kv_cache_dtype") == "fp8"], f.remediation.actions
