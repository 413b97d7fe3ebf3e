# ruff: noqa: E501  (log lines are quoted as they appear)
"""Issue 31's classes, each on real lines with their source: a fatal start without vLLM's summary line (the
fallback), an import error inside another line, vLLM's own validation after argparse, Hugging Face's 403
"Forbidden for url" and a 401 that means "not found", other Google services' GPU quota wordings, a kernel the
image cannot run under a compile wrapper, and saturation that is saturation (not a burst that drains)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from skills.diagnosis.diagnose import diagnose
from skills.diagnosis.findings import Diagnosis
from skills.diagnosis.remediation import sanitize_action
from skills.ports import LogEntry, ServiceInfo

T0 = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)


def run(*lines: str, service: ServiceInfo | None = None) -> Diagnosis:
    return diagnose(
        [LogEntry(timestamp=T0 + timedelta(seconds=i), text=t) for i, t in enumerate(lines)], service=service
    )


# https://github.com/ovg-project/kvcached/issues/187 (a model's KV layout, no summary line)
KV_LAYOUT = [
    "(EngineCore_DP0 pid=924148) NotImplementedError: Hybrid models with more than one KV cache type are not supported yet.",
    "(EngineCore_DP0 pid=924148) INFO 10-25 00:09:40 [gpu_model_runner.py:2914] Model loading took 65.9650 GiB and 191.578513 seconds",
]
# https://github.com/vllm-project/vllm/issues/1455 (a kernel's shape constraint)
HEAD_SIZE = [
    '  File "/jfs/zjq/project/vllm/vllm/model_executor/layers/attention.py", line 162, in single_query_cached_kv_attention',
    "    attention_ops.paged_attention_v1(",
    "RuntimeError: Unsupported head size: 32",
]
# https://github.com/vllm-project/vllm/issues/6387 (torch's [rank0]: prefix, cut before its error)
RANK0 = [
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "/home/u/.gemma/lib/python3.10/site-packages/vllm/engine/async_llm_engine.py", line 431, in from_engine_args',
    "[rank0]:     engine = cls(",
    '[rank0]:   File "/home/u/.gemma/lib/python3.10/site-packages/vllm/engine/async_llm_engine.py", line 360, in __init__',
]
# https://github.com/vllm-project/vllm/issues/4665 (older engine: a Ray worker's traceback while profiling)
RAY_WORKER = [
    "(RayWorkerWrapper pid=2115) ERROR 05-08 00:45:04 worker_base.py:157]     return func(*args, **kwargs)",
    'ERROR 05-08 00:45:04 worker_base.py:157]   File "/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py", line 138, in determine_num_available_blocks',
    "ERROR 05-08 00:45:04 worker_base.py:157]     self.model_runner.profile_run()",
]
# https://github.com/vllm-project/vllm/issues/14404: a worker crashing on a step of a running server
SERVING_CRASH = [
    "(VllmWorker rank=5 pid=33503) ERROR 03-06 06:49:30 [multiproc_executor.py:375] WorkerProc hit an exception: %s",
    "(VllmWorker rank=5 pid=33503) ERROR 03-06 06:49:30 [multiproc_executor.py:375] Traceback (most recent call last):",
    '(VllmWorker rank=5 pid=33503) ERROR 03-06 06:49:30 [multiproc_executor.py:375]   File "/workspace/vllm/vllm/v1/executor/multiproc_executor.py", line 371, in worker_busy_loop',
    '(VllmWorker rank=5 pid=33503) ERROR 03-06 06:49:30 [multiproc_executor.py:375]   File "/workspace/vllm/vllm/v1/worker/gpu_worker.py", line 226, in execute_model',
]


@pytest.mark.parametrize(
    ("lines", "quoted"),
    [
        (KV_LAYOUT, "NotImplementedError: Hybrid models with more than one KV cache type"),
        (HEAD_SIZE, "RuntimeError: Unsupported head size: 32"),
        (RANK0, "Traceback (most recent call last):"),
        (RAY_WORKER, "return func(*args, **kwargs)"),
    ],
    ids=["kv_layout_notimplemented", "kernel_shape", "rank0_cut_traceback", "older_engine_worker"],
)
def test_a_fatal_start_without_the_summary_line_is_reported_quoting_its_first_decisive_line(
    lines: list[str], quoted: str
) -> None:
    d = run(*lines)
    assert d.root_kinds() == ["engine_startup_failed"]
    assert quoted in d.findings[0].evidence[0]
    assert quoted.split(":")[0] in d.findings[0].title or "Traceback" in quoted or "return func" in quoted


def test_the_fallback_says_nothing_when_a_specific_kind_applies_and_keeps_the_causal_order() -> None:
    # vLLM #40291: an OOM while creating weights, in the V1 format; then Cloud Run's probe line.
    d = run(
        "(EngineCore pid=6849) ERROR 04-19 15:32:42 [core.py:1108] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 84.00 MiB. GPU 0 has a total capacity of 31.35 GiB of which 93.06 MiB is free.",
        'STARTUP HTTP probe failed 1 time consecutively for container "vllm" on port 8080 path "/health".',
    )
    assert d.root_kinds() == ["gpu_oom_at_load"]
    assert {f.kind: f.caused_by for f in d.findings}.get("startup_probe_timeout") == "gpu_oom_at_load"
    assert "engine_startup_failed" not in d.kinds()


def test_the_fallback_is_the_cause_of_the_probe_timeout_it_explains() -> None:
    d = run(
        *HEAD_SIZE, 'STARTUP HTTP probe failed 1 time consecutively for container "vllm" on port 8080 path "/health".'
    )
    assert d.root_kinds() == ["engine_startup_failed"]
    assert {f.kind: f.caused_by for f in d.findings}["startup_probe_timeout"] == "engine_startup_failed"


def test_a_crash_while_serving_or_after_ready_is_not_a_start_up_failure() -> None:
    assert run(*SERVING_CRASH).findings == []
    ready = ["INFO:     Application startup complete.", *HEAD_SIZE]
    assert run(*ready).findings == []


def test_an_import_error_inside_a_warning_is_a_broken_install_unless_the_server_goes_on() -> None:
    # https://github.com/vllm-project/vllm/issues/5501 (vllm/_custom_ops.py's warning)
    warn = "WARNING 06-13 11:42:20 _custom_ops.py:11] Failed to import from vllm._C with ImportError('/usr/local/lib/python3.8/dist-packages/vllm/_C.abi3.so: undefined symbol: _ZN5torch7LibraryC1ENS0_4KindESsSt8optionalIN3c1011DispatchKeyEEPKcj')"
    d = run(warn)
    assert d.root_kinds() == ["container_exited_at_start"]
    assert "undefined symbol" in d.findings[0].title
    # ... then a RuntimeError from torch (vLLM #5736's wording): still one cause, the import error first.
    d = run(warn, "RuntimeError: operator torchvision::nms does not exist")
    assert d.root_kinds() == ["container_exited_at_start"] and "_C.abi3.so" in d.findings[0].evidence[0]
    assert run(warn, "INFO:     Application startup complete.").findings == []


def test_vllms_own_validation_after_argparse_exits_at_start() -> None:
    # https://github.com/vllm-project/vllm/issues/47600 (vllm/entrypoints/chat_utils.py)
    d = run(
        "ValueError: The supplied chat template string (examples/tool_chat_template_gemma4.jinja) appears path-like, but doesn't exist! Tried: examples/tool_chat_template_gemma4.jinja and /micromamba/envs/VLLM/lib/python3.12/site-packages/vllm/transformers_utils/chat_templates/examples/tool_chat_template_gemma4.jinja"
    )
    assert d.root_kinds() == ["container_exited_at_start"]
    assert "appears path-like" in d.findings[0].title


def test_hugging_face_403_forbidden_is_an_access_refusal() -> None:
    # https://github.com/huggingface/diffusers/issues/4447 (requests' HTTPError, then GatedRepoError)
    d = run(
        "HTTPError: 403 Client Error: Forbidden for url: https://huggingface.co/DeepFloyd/IF-I-XL-v1.0/resolve/main/model_index.json"
    )
    assert d.root_kinds() == ["hf_auth_failed"]


@pytest.mark.parametrize(
    "lines",
    [
        # https://github.com/Jiaxuan-Li/EVCap/issues/10
        [
            "huggingface_hub.utils._errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-67ff8411-0b02c71d2dabd17f4c82e40d;760e6e3c-72d4-4e1b-a52c-57badd559390)",
            "Repository Not Found for url: https://huggingface.co/vicuna-13b-v1.3/resolve/main/tokenizer.model.",
        ],
        # https://github.com/boson-ai/higgs-audio/issues/123 (with the Hub's advice and "Invalid username or password.")
        [
            "huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-68a1df1f-3274fba05f177c4f00891218;d37ebc83-0dd4-4ea6-b71f-4d08e297cfa1)",
            "Repository Not Found for url: https://huggingface.co/api/models/xcodec_tps25_0215/revision/main.",
            "If you are trying to access a private or gated repo, make sure you are authenticated. For more details, see https://huggingface.co/docs/huggingface_hub/authentication",
            "Invalid username or password.",
        ],
    ],
    ids=["bare", "with_auth_advice"],
)
def test_a_401_for_a_repo_that_does_not_exist_is_one_cause(lines: list[str]) -> None:
    assert run(*lines).root_kinds() == ["model_not_found"]


def test_a_gated_refusal_stays_an_auth_problem_even_with_not_found_wording_nearby() -> None:
    d = run(
        "401 Client Error. Cannot access gated repo for url https://huggingface.co/google/gemma-2-2b-it/resolve/main/config.json.",
        "Access to model google/gemma-2-2b-it is restricted. You must have access to it and be authenticated to access it. Please log in.",
    )
    assert d.root_kinds() == ["hf_auth_failed"]


@pytest.mark.parametrize(
    "line",
    [
        # https://github.com/GoogleCloudPlatform/stable-diffusion-on-gcp/issues/12 (Vertex AI, 429 RESOURCE_EXHAUSTED)
        '    "message": "The following quota metrics exceed quota limits: aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus",',
        # https://github.com/huggingface/Google-Cloud-Containers/issues/126 (GKE autoscaler, GPU pod)
        "Node scale up in zones us-central1-c associated with this pod failed: GCE quota exceeded. Pod is at risk of not being scheduled.",
        # https://github.com/fastai/course-v3/pull/165 (Compute Engine)
        " - Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 0.0 globally.",
    ],
    ids=["vertex_metric", "gke_gce_quota", "compute_engine"],
)
def test_other_google_services_gpu_quota_wordings(line: str) -> None:
    d = run(line)
    assert d.root_kinds() == ["gpu_quota_exceeded"]
    assert "not Cloud Run's" in d.findings[0].title


def test_a_gemini_api_rate_limit_is_not_gpu_quota() -> None:
    # https://github.com/googleapis/python-genai/issues/2065
    assert (
        run(
            "ClientError: 429 RESOURCE_EXHAUSTED. {'error': {'code': 429, 'message': 'Resource has been exhausted (e.g. check quota).', 'status': 'RESOURCE_EXHAUSTED'}}"
        ).findings
        == []
    )


def test_a_kernel_the_image_cannot_run_under_a_compile_wrapper_is_not_a_torch_compile_failure() -> None:
    # Compile frames as in vLLM's own tracebacks (tests/data/field_logs vllm15992), then Triton's wording of
    # cudaErrorInvalidKernelImage (https://github.com/vllm-project/vllm/issues/18580).
    d = run(
        'ERROR 04-03 05:54:58 [core.py:380]   File "/home/ubuntu/code/vllm/vllm/compilation/compiler_interface.py", line 229, in hijacked_compile_fx_inner',
        'ERROR 04-03 05:54:58 [core.py:380]   File "/usr/lib/python3.12/site-packages/torch/_inductor/compile_fx.py", line 569, in compile_fx_inner',
        "ERROR 04-03 05:54:58 [core.py:380] RuntimeError: Triton Error [CUDA]: device kernel image is invalid",
    )
    assert d.root_kinds() == ["cuda_incompatible"]
    assert {f.kind: f.caused_by for f in d.findings}.get("torch_compile_failed") == "cuda_incompatible"


def test_cuda_incompatible_proposes_the_image_the_compatibility_data_names() -> None:
    svc = ServiceInfo(name="vllm-gemma4", gpu_type="nvidia-l4", image="vllm/vllm-openai:v0.25.1",
                      args=["--model", "google/gemma-4-31b-it"])  # fmt: skip
    d = run("RuntimeError: The NVIDIA driver on your system is too old (found version 12020).", service=svc)
    f = d.findings[0]
    assert f.kind == "cuda_incompatible" and "CUDA 12.2" in f.title
    [action] = f.remediation.actions
    assert action.params == {"image": "vllm/vllm-openai:v0.25.1-cu129"}
    clean, note = sanitize_action(action)
    assert clean is not None and clean.params == action.params, note


def test_an_image_too_old_for_the_model_proposes_a_catalog_image() -> None:
    # vLLM #14696's wording (tests/data/field_logs), for Gemma 4.
    d = run(
        "ValueError: The checkpoint you are trying to load has model type `gemma4` but Transformers does not recognize this architecture. This could be because of an issue with the checkpoint, or because your version of Transformers is out of date."
    )
    f = d.findings[0]
    assert f.kind == "container_exited_at_start"
    assert [a.params for a in f.remediation.actions] == [{"image": "vllm/vllm-openai:v0.25.1-cu129"}]


def _stats(waiting: int, i: int) -> str:
    return (
        f"(APIServer pid=851) INFO 04-28 22:54:{i:02d} [loggers.py:257] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        f"Avg generation throughput: 5.4 tokens/s, Running: 1 reqs, Waiting: {waiting} reqs, GPU KV cache usage: 76.5%, "
        "Prefix cache hit rate: 92.0%"
    )


def test_a_queue_that_persists_across_intervals_is_saturation() -> None:
    # https://github.com/intel/llm-scaler/issues/391: Waiting: 14 interval after interval.
    d = run(*(_stats(14, 10 * i) for i in range(3)))
    assert d.root_kinds() == ["request_queue_saturated"]


def test_a_burst_that_drains_with_every_request_answered_is_not_saturation() -> None:
    ok = '(APIServer pid=851) INFO:     10.109.20.86:59146 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
    burst = [_stats(w, 10 * i) for i, w in enumerate((24, 18, 11, 6, 2))] + [ok] * 24 + [_stats(0, 59)]
    assert run(*burst).findings == []


def test_one_waiting_request_on_a_healthy_server_is_not_saturation() -> None:
    # https://github.com/vllm-project/vllm/issues/3094: one stats line, 3 pending, on a server under users.
    line = "INFO 02-28 21:48:18 metrics.py:161] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 44.9 tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 3 reqs, GPU KV cache usage: 82.1%, CPU KV cache usage: 0.0%"
    assert run(line).findings == []
    assert run(_stats(1, 0), _stats(1, 10), _stats(0, 20)).findings == []


def test_preemption_alone_is_kv_cache_pressure_not_saturation() -> None:
    # vLLM's docs (Optimization and Tuning > Preemption) quote the older scheduler's warning: requests are preempted
    # when the KV cache is short, and recomputed once it frees; nothing is waiting or timing out here.
    preempted = (
        "WARNING 05-09 00:49:33 scheduler.py:1057 Sequence group 0 is preempted by PreemptionMode.RECOMPUTE mode "
        "because there is not enough KV cache space. This can affect the end-to-end performance. Increase "
        "gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory."
    )
    assert run(*[preempted] * 5).findings == []
    # with a queue that stays, it is saturation, and the preemption is named in its steps
    d = run(*[preempted] * 3, *(_stats(14, 10 * i) for i in range(3)))
    assert d.root_kinds() == ["request_queue_saturated"]
    assert any("preempted" in s for s in d.findings[0].remediation.steps)
