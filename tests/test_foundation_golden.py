"""Golden files of the Slack message JSON: a rendering change shows up as a reviewable diff.

Regenerate after an intended change with: UPDATE_GOLDEN=1 ./dev test tests/test_foundation_golden.py
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.sandbox.examples import DATA as EXAMPLES
from handlers.alerts.gcp import Notification, to_alerts
from handlers.commands.fit import render_fit
from handlers.commands.logs import render_diagnosis
from handlers.commands.status import render_status
from handlers.incident_render import header_reply
from handlers.registry import COMMANDS, load_all
from handlers.render_slack import to_blocks
from handlers.render_text import to_text
from handlers.reply import Reply
from handlers.router import help_reply
from skills.capacity.fit import FitRequest, check_fit
from skills.diagnosis.diagnose import diagnose
from skills.incidents.model import Alert, new_incident
from skills.logs.fetch import parse_lines
from skills.observe.status import ModelProbe, StatusReport, status_notes
from skills.ports import Condition, ProbeResult, ServiceInfo

GOLDEN = Path(__file__).parent / "golden"
DATA = EXAMPLES
AT = datetime(2026, 11, 20, 14, 0, tzinfo=UTC)


def _service(**kw: object) -> ServiceInfo:
    base: dict[str, object] = dict(
        name="vllm-gemma4",
        uri="https://vllm-gemma4-abc123-uc.a.run.app",
        ready=True,
        terminal_condition=Condition(type="Ready", state="CONDITION_SUCCEEDED"),
        latest_created_revision="vllm-gemma4-00005-abc",
        latest_ready_revision="vllm-gemma4-00005-abc",
        min_instances=0,
        max_instances=1,
        gpu_type="nvidia-l4",
        gpu_count=1,
        cpu="8",
        memory="32Gi",
        image="vllm/vllm-openai:v0.11.0",
        concurrency=8,
    )
    base.update(kw)
    return ServiceInfo.model_validate(base)


def _probe(ok: bool = True, ms: float = 12.0, err: str = "") -> ProbeResult:
    return ProbeResult(ok=ok, status_code=200 if ok else 503, latency_ms=ms, error=err)


def _report(service: ServiceInfo, model: ModelProbe) -> StatusReport:
    cold, notes = status_notes(service, model)  # the skill's own reading of the state
    return StatusReport(service=service, model=model, cold=cold, notes=notes, fetched_at=AT)


_UP = ModelProbe(base_url="https://x", health=_probe(), models=["google/gemma-4-12b-it"], models_probe=_probe(ms=20.5))
_DOWN = ModelProbe(
    base_url="https://x",
    health=_probe(False, 5000, "no answer within 5 s"),
    models=[],
    models_probe=_probe(False, 5000, "no answer within 5 s"),
)

CASES: dict[str, Reply] = {
    "status_ready": render_status(_report(_service(), _UP)),
    "status_failed_revision": render_status(
        _report(
            _service(
                ready=False,
                terminal_condition=Condition(
                    type="Ready",
                    state="CONDITION_FAILED",
                    reason="REVISION_FAILED",
                    message="Revision 'vllm-gemma4-00006-xyz' is not ready and cannot serve traffic. The "
                    "user-provided container failed the configured startup probe checks.",
                ),
                latest_created_revision="vllm-gemma4-00006-xyz",
            ),
            _UP,
        )
    ),
    "status_cold": render_status(
        _report(
            _service(),
            _DOWN.model_copy(update={"health": ProbeResult(ok=False, latency_ms=5000, error="no answer within 5 s")}),
        )
    ),
}


def _diagnosis(scenario: str) -> Reply:
    lines = (DATA / "scenarios" / f"{scenario}.jsonl").read_text().splitlines()
    entries, _ = parse_lines(lines)
    return render_diagnosis("vllm-gemma4", diagnose(entries))


def _incident(payload: str, state_file: str | None = None) -> Reply:
    def alert(name: str) -> Alert:
        return to_alerts(Notification.model_validate_json((DATA / "alerts" / name).read_text()))[0]

    opened = alert(payload)
    inc = new_incident("1-0", opened, "C0ALERTS", True, AT)
    inc.apply("1-0", opened, AT)
    if state_file:
        inc.apply("2-0", alert(state_file), AT)
    return header_reply(inc, "vllm-gemma4")


CASES["fit_26b_qat_l4_fits"] = render_fit(
    check_fit(FitRequest(model="gemma-4-26b-a4b-qat", gpu="nvidia-l4", kv_cache_dtype="fp8"))
)
CASES["fit_31b_qat_l4_does_not_fit"] = render_fit(check_fit(FitRequest(model="gemma-4-31b-qat", gpu="nvidia-l4")))
CASES["diagnose_kv_cache_insufficient"] = _diagnosis("example-kv-cache-insufficient")
CASES["diagnose_startup_probe_timeout"] = _diagnosis("example-startup-probe-timeout")
CASES["incident_gcp_open"] = _incident("gcp-monitoring-open.json")
CASES["incident_gcp_closed"] = _incident("gcp-monitoring-open.json", "gcp-monitoring-closed.json")


def _normalise(reply: Reply) -> dict[str, object]:
    # The footer of a status reply carries the data's age, which depends on the clock: keep it out.
    reply = reply.model_copy(update={"context": None})
    text, blocks = to_blocks(reply)
    return {"text": text, "blocks": blocks}


@pytest.mark.parametrize("name", sorted(CASES))
def test_slack_json_matches_golden(name: str) -> None:
    actual = _normalise(CASES[name])
    path = GOLDEN / f"{name}.json"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(json.dumps(actual, indent=2, sort_keys=True) + "\n")
    # A missing golden file fails: writing it here would make the test pass without checking anything.
    assert path.exists(), f"{path.name} is missing; create it with UPDATE_GOLDEN=1"
    assert actual == json.loads(path.read_text())


def test_help_lists_every_command_once_and_fits_block_kit() -> None:
    load_all()
    _, blocks = to_blocks(help_reply())
    lines = "\n".join(b["text"]["text"] for b in blocks if "text" in b).splitlines()
    usage_lines = [line for line in lines if line.startswith("`/gemma ")]
    assert len(usage_lines) == len(COMMANDS)  # one line each
    body = "\n".join(usage_lines)
    for name in ("status", "fit", "deploy", "scale", "logs", "diagnose", "ask", "analyze", "bench", "metrics"):
        assert f"`/gemma {name}" in body, name
    assert all(len(b.get("text", {}).get("text", "")) <= 3000 for b in blocks)


def test_block_kit_limits_hold_for_huge_replies() -> None:
    huge = Reply(title="x" * 5000)
    for _ in range(80):
        huge.add(text="y" * 4000, fields=[(f"k{j}", "v" * 3000) for j in range(15)])
    _, blocks = to_blocks(huge)
    assert len(blocks) <= 50
    for b in blocks:
        if "text" in b:
            assert len(b["text"]["text"]) <= 3000
        for f in b.get("fields", []):
            assert len(f["text"]) <= 2000
        assert len(b.get("fields", [])) <= 10
    assert "x" * 100 in to_text(huge)


def test_console_text_has_no_slack_markup() -> None:
    reply = Reply(title=":warning: Deploy refused").add(
        text="see <https://console.cloud.google.com/run|the console> :x: at 10:30:00", fields=[("  a: b", "c")]
    )
    text = to_text(reply)
    assert text.splitlines()[0] == "! Deploy refused"
    assert "the console (https://console.cloud.google.com/run) ✗ at 10:30:00" in text
    assert ":warning:" not in text and "<https" not in text
