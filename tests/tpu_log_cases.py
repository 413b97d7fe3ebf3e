# ruff: noqa: E501  (log lines are quoted as they appear)
"""Real log lines of Cloud TPU failures, each from where it was reported (tests/test_diagnose_kinds.py runs them
with every other kind: each case gives exactly its kind). The source is next to each case."""

from __future__ import annotations

TPU_CASES: dict[str, list[list[str | tuple]]] = {
    "tpu_hbm_oom": [
        [  # erfanzar/EasyDeL#142 (Gemma 7B on a v5e chip)
            "XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 30.21G of 15.48G hbm. Exceeded hbm capacity by 14.73G.",
            "Total hbm usage >= 30.73G:",
        ],
        [  # vllm-project/vllm#16521 (gemma-3 on TPU, vLLM V1)
            "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: Error loading program: Attempting to reserve 1.04G at the bottom of memory. That was not possible. There are 905.37M free, 0B reserved, and 905.37M reservable. If fragmentation is eliminated, the maximum reservable bytes would be 905.37M, so compaction wouldn't help.",
        ],
        [  # google-deepmind/gemma#85 (gemma-2b on a TPU server)
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 15.65G. That was not possible. There are 11.08G free.; (0x0x0_HBM0)",
        ],
        [  # tpu-inference tpu_inference/worker/tpu_worker.py determine_available_memory (its log and error format)
            "(EngineCore pid=312) INFO 11-27 10:00:05 [tpu_worker.py:557] Memory statistics | total_hbm_limit_gb=30.75GiB | total_hbm_limit_cap_gb=27.68GiB | total_hbm_used_gb=57.18GiB | total_hbm_avail_gb=-29.5GiB",
            "(EngineCore pid=312) ValueError: total_hbm_used_gb=57.18GiB exceeds total_hbm_limit_cap_gb=27.68GiB by 29.5GiB. Please consider increasing --gpu-memory-utilization from 0.9 to a larger value.",
        ],
    ],
    "tpu_compile_timeout": [
        [  # tpu-inference PR #2722 (gemma-4-31B-it nightly: ~415 s compiling, check gave up at 960 s)
            "(EngineCore pid=106339) INFO 06-03 07:40:50 [compilation_manager.py:100] Precompile worker0 backbone --> {'num_tokens': 32, 'num_reqs': 8}",
            "(EngineCore pid=106339) INFO 06-03 07:40:52 [compilation_manager.py:105] Compilation finished in 1.98 [secs].",
            "TIMEOUT: Waited 961 seconds (limit was 960). The string 'Application startup complete.' was NOT found.",
        ],
        [  # tpu-inference PR #1729's precompile lines; the check's message as tests/e2e/benchmarking/bench_utils.sh prints it
            "(EngineCore_DP0 pid=118047) INFO 02-14 05:36:07 [compilation_manager.py:75] Precompile worker0 gather_logprobs --> {'num_reqs': 32}",
            "(EngineCore_DP0 pid=118047) INFO 02-14 05:36:07 [compilation_manager.py:81] Compilation finished in 0.23 [secs].",
            "TIMEOUT: Waited 1801 seconds (limit was 1800). The string 'Application startup complete.' was NOT found.",
        ],
    ],
    "tpu_unsupported": [
        [  # vllm-project/vllm#43239 (gemma-4-E4B-it on v6e 1x1, image vllm/vllm-tpu:gemma4)
            "Precompile input_embeddings_merger --> {'num_tokens': 16}",
            '  File "/workspace/tpu_inference/tpu_inference/models/vllm/vllm_model_wrapper.py", line 384, in embed_input_ids_func',
            '  File "/usr/local/lib/python3.12/site-packages/torchax/ops/jaten.py", line 107, in _aten_copy',
            "AttributeError: 'Tensor' object has no attribute '_elem'",
        ],
        [  # tpu-inference#2453 (Gemma-4-26B-A4B-IT on TPU: EngineCore failed to start after MoE weight padding)
            "(EngineCore pid=2234024) INFO 04-30 01:09:01 [utils.py:326] non-default args: {'model': 'google/gemma-4-26B-A4B-it', 'max_model_len': 4096, 'tensor_parallel_size': 8}",
            "(EngineCore pid=2234024) INFO 04-30 01:11:38 [moe_weights.py:194] w13_weight_w3 shape after padding: (128, 2816, 1024)",
            "(EngineCore pid=2234024) ERROR 04-30 01:11:39 [core.py:1136] EngineCore failed to start.",
            '(EngineCore pid=2234024) ERROR 04-30 01:11:39 [core.py:1136]   File "/workspace/tpu_inference/tpu_inference/layers/jax/moe/moe_weights.py", line 212, in process_weights',
        ],
    ],
    "tpu_no_capacity": [
        [  # hashicorp/terraform-provider-google#21243 (google_tpu_v2_vm)
            'Error: Error waiting to create Vm: Error waiting for Creating Vm: Error code 8, message: There is no more capacity in the zone "us-central1-c"; you can try in another zone where Cloud TPU Nodes are offered (see https://cloud.google.com/tpu/docs/regions) [EID: 0x9f48947a7d57c8d]',
        ],
        [  # thevasudevgupta/gsoc-wav2vec2#11
            'ERROR: (gcloud.compute.tpus.execution-groups.create) There is no more capacity in the zone "europe-west4-a"; you can try in another zone where Cloud TPU Nodes are offered (see https://cloud.google.com/tpu/docs/regions) [EID: 0xba393c906974e61]',
        ],
        [  # skypilot-org/skypilot#4579 (v5p-8 in us-central1-a)
            "W 01-16 17:42:36 instance_utils.py:112] Got return code 8 in us-central1-a: 'Insufficient reserved capacity. Contact customer support to increase your reservation. [EID: 0x7adf6d58c08b0aa4]'",
        ],
    ],
    "tpu_quota_exceeded": [
        [  # field SOP (public-code index): a zone quota error for v5e serving
            "\"Quota 'TPUV5sLitepodServingPerProjectPerZoneForTPUAPI' exhausted. Limit 4 in zone us-central1-a\"",
        ],
        [  # marin-community/marin#87 (inactive queued resources holding preemptible quota), wrapped as pasted
            "Quota 'TPUV4sPreemptiblePodPerProjectPerRegionForTPUAPI' exhausted.",
            "      Limit 20800 in region us-central2",
        ],
        [  # BioMedBERT/biomedbert nohup.out
            "ERROR: (gcloud.compute.tpus.create) RESOURCE_EXHAUSTED: Quota limit 'TPUV2sPodPerProjectPerRegionForTPUAPI,TPUV2sPodPerProjectPerZoneForTPUAPI' has been exceeded. Limit: 0,0 in region us-central1,zone us-central1-a.",
        ],
    ],
    "tpu_preempted": [
        [  # `gcloud compute tpus tpu-vm describe` of a preempted spot node (tpu_v2 Node.State PREEMPTED)
            "acceleratorType: v6e-4",
            "schedulingConfig:",
            "  spot: true",
            "state: PREEMPTED",
        ],
        [  # `gcloud compute tpus queued-resources describe --format=json` (QueuedResourceState SUSPENDED by SERVICE)
            '{"name": "projects/p/locations/us-east5-a/queuedResources/gemma", "state": {"state": "SUSPENDED", "stateInitiator": "SERVICE", "suspendedData": {}}}',
        ],
    ],
}
