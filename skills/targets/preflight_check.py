"""One preflight check's outcome, as a plan carries it: passed, failed (with the fix; blocks Confirm), or could
not be checked (with why; a warning that does not block); and what the checks read of a target (PreflightTarget)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

CheckStatus = Literal["ok", "fail", "unknown"]
_MARK = {"ok": "✓", "fail": "✗", "unknown": "?"}


class PreflightCheck(BaseModel):
    name: str  # checkpoint | weights | image | region | quota
    status: CheckStatus
    text: str  # what was found, one sentence
    fix: str = ""  # for a failure: what to change

    def line(self) -> str:
        if self.status == "fail":
            return f"✗ {self.text}" + (f" Fix: {self.fix}" if self.fix else "")
        if self.status == "unknown":
            return f"? could not check: {self.text}"
        return f"{_MARK[self.status]} {self.text}"


def preflight_blocked(checks: list[PreflightCheck]) -> str:
    """Why Confirm is refused ('' when no check failed)."""
    failed = [c for c in checks if c.status == "fail"]
    if not failed:
        return ""
    return "Preflight failed: " + " ".join(c.line() for c in failed)


UNKNOWN_NOTE = "Checks that could not run are warnings: they do not block Confirm."


class PreflightTarget(BaseModel):
    """What a rendered service needs to exist, read from its spec."""

    image: str
    model: str | None = None  # catalog name
    family: str | None = None
    hf_repo: str | None = None  # weights pulled from the Hub
    bucket: str | None = None  # or read from this bucket ...
    prefix: str = ""  # ... under this folder
    gpu: str
    region: str
    project: str | None = None
    max_instances: int = 1
    hf_token_secret: str = "hf-token"
    # Cloud TPU: the TPU plan's zone search already checked the zone offers the slice and has quota, and the
    # vLLM/CUDA compatibility data is about GPUs: only the checkpoint and the image's existence are checked here.
    platform: str = "cloud-run"
    # The shared checks (skills/deploy/preflight.py) that apply; a target answers the others itself, in the
    # plan's own preflight lines (Azure Container Apps: the environment's profile, the region, its GPU quota).
    shared_checks: tuple[str, ...] = ("region", "image", "quota")
