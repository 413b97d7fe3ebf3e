"""In the sandbox (`./dev console` with no credentials) the preflight stand-ins are wired: a deploy of a missing
checkpoint or a missing image tag is refused at plan time with the fix, and works again once healthy."""

from __future__ import annotations

from tests.test_sandbox_console import _console, _env


def test_sandbox_refuses_a_missing_checkpoint_or_tag_at_plan_time() -> None:
    script = "\n".join(
        [
            "/gemma sandbox",
            "/gemma sandbox checkpoint-missing",
            "/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384",
            "click Confirm",
            "/gemma sandbox preflight-healthy",
            "/gemma sandbox tag-missing",
            "/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384",
            "/gemma sandbox preflight-healthy",
            "/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384",
            "quit",
        ]
    )
    result = _console(script + "\n", _env())
    out, err = result.stdout, result.stderr
    assert result.returncode == 0, err
    assert "checkpoint-missing" in out and "preflight, at plan time" in out  # listed with the scenarios
    plans = out.split("Plan: Deploy")
    assert len(plans) == 4, out
    missing_ckpt, missing_tag, healthy = plans[1], plans[2], plans[3]
    assert "✗ checkpoint `google/gemma-4-12B-it-qat-w4a16-ct` was not found on the Hub" in missing_ckpt
    assert "Fix: the catalog's repo id" in missing_ckpt
    assert "Preflight failed" in missing_ckpt
    assert "✗ image `vllm/vllm-openai:v0.25.1-cu129` does not exist" in missing_tag
    assert "MANIFEST_UNKNOWN" in missing_tag and "Fix: check the tag's spelling" in missing_tag
    assert "✓ checkpoint" in healthy and "✓ image" in healthy and "Preflight failed" not in healthy
    assert "revision created" not in out  # nothing was deployed from the refused plans
    assert "Traceback" not in err


def test_sandbox_quota_max_instances_and_a_check_timing_out() -> None:
    """The other preflight checks in the sandbox: max instances above the GPU quota (3 L4s) and zero quota block
    Confirm with their fixes; a Hub that holds its answer past the time limit is 'could not check', a warning that
    leaves Confirm. The retired `licence-not-accepted` scenario is no scenario (Gemma 4 is not gated)."""
    script = "\n".join(
        [
            "/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384 --max-instances 5",
            "/gemma sandbox licence-not-accepted",
            "/gemma sandbox quota-zero",
            "/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384",
            "/gemma sandbox preflight-healthy",
            "/gemma sandbox hub-slow",
            "/gemma deploy gemma4-12b-qat-l4 --max-model-len 16384",
            "/gemma sandbox preflight-healthy",
            "quit",
        ]
    )
    result = _console(script + "\n", _env(PREFLIGHT_TIMEOUT_S="1"))
    out, err = result.stdout, result.stderr
    assert result.returncode == 0, err
    plans = out.split("Plan: Deploy")
    assert len(plans) == 4, out
    above, quota, slow = plans[1], plans[2], plans[3]
    assert "fewer than max instances 5" in above and "Max instances must be set to 3 or fewer" in above, above
    assert "Fix: lower max instances to 3 (`--max-instances 3`), or request quota" in above
    assert "Preflight failed" in above
    assert "Unknown scenario `licence-not-accepted`" in out  # retired: no catalog checkpoint is gated
    assert "✗ the project has no nvidia-l4 quota" in quota and "Preflight failed" in quota
    assert "? could not check: no answer within 1 s (checkpoint)" in slow
    assert "Preflight failed" not in slow and "do not block Confirm" in slow
    assert "Traceback" not in err
