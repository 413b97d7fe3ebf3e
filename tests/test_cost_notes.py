"""What /gemma cost says beside the price: whether the instance scales to zero or bills around the clock, and
where a $/M-token figure comes from (a stored sweep, by id and model) or that there is none yet."""

from __future__ import annotations

from skills.bench.cells import CellResult
from skills.bench.loadgen import BenchSpec, SweepResult
from skills.bench.report import measured
from skills.capacity.cost import cost_report, hourly_cost
from skills.ports import ServiceInfo

L4 = {"name": "vllm-gemma4", "gpu_type": "nvidia-l4", "gpu_count": 1, "cpu": "8", "memory": "32Gi"}


def test_scale_to_zero_and_always_on_are_each_said() -> None:
    assert "Scale to zero: $0 while idle." in hourly_cost(ServiceInfo(**L4, min_instances=0)).notes
    always = hourly_cost(ServiceInfo(**L4, min_instances=1)).notes
    assert "min-instances 1: billed around the clock even without traffic." in always


def test_per_token_cost_names_its_sweep_or_says_there_is_none() -> None:
    info = ServiceInfo(**L4)
    assert any(n.startswith("No benchmark stored yet") for n in cost_report(hourly_cost(info), None).notes)
    cell = CellResult(concurrency=1, context=128, requests=10, ok=10, success_rate=1.0, duration_s=10,
                      req_per_s=1.0, output_tok_per_s=80.0)  # fmt: skip
    sweep = SweepResult(id="sw-41", model="gemma-4-12b-qat", started_at="2026-12-01T00:00:00Z", spec=BenchSpec(),
                        cells=[cell])  # fmt: skip
    notes = cost_report(hourly_cost(info), measured(sweep)).notes
    assert any("sweep sw-41 of gemma-4-12b-qat" in n for n in notes), notes


def test_one_instance_at_most_costs_one_instance_and_a_lone_container_is_no_sidecar() -> None:
    one = hourly_cost(ServiceInfo(**L4, max_instances=1))
    assert one.max_usd_per_hour == one.usd_per_hour
    # A single container that declares no port (Cloud Run then gives it 8080) is the serving one, not a sidecar.
    spec = {"template": {"containers": [{"name": "vllm", "resources": {"limits": {"cpu": "8", "memory": "32Gi"}}}]}}
    lone = hourly_cost(ServiceInfo(**L4, max_instances=1, spec=spec))
    assert lone.usd_per_hour == one.usd_per_hour
    assert not any(n.startswith("Sidecar containers") for n in lone.notes)
