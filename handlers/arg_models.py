"""The declared arguments of the commands the MCP server exposes (handlers/declared_args.py): one pydantic model
per command, from which its `/gemma` parser and its MCP tool schema derive. Help texts are the fields'
descriptions; `Arg` says how a person types each one."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from handlers.args import count, number_list, whole_number
from handlers.declared_args import Arg, Typed

_SERVICE_HELP = "the Cloud Run service (default: the configured one)"


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")  # an unknown argument is an error naming it, as an unknown option


class ServiceArgs(_Args):
    """`[SERVICE]`: revisions, destroy, metrics, cost."""

    service: Annotated[str | None, Arg(metavar="SERVICE", nargs="?")] = Field(None, description=_SERVICE_HELP)


class StatusArgs(ServiceArgs):
    fresh: Annotated[bool, Arg(flags=("--fresh",), switch=True)] = Field(False, description="skip the cached answer")


class _LogArgs(ServiceArgs):
    pass


def _since(default: str) -> Any:
    return Field(default, description=f"how far back: 90s, 30m, 2h, 1d (default {default})")


class LogsArgs(_LogArgs):
    since: Annotated[str, Arg(flags=("--since",), metavar="DURATION")] = _since("30m")
    severity: Annotated[str | None, Arg(flags=("--severity",), metavar="LEVEL")] = Field(
        None, description="lowest severity shown: INFO, WARNING, ERROR, ..."
    )
    revision: Annotated[str | None, Arg(flags=("--revision",), metavar="REVISION")] = Field(
        None, description="only this revision's logs"
    )


class DiagnoseArgs(_LogArgs):
    since: Annotated[str, Arg(flags=("--since",), metavar="DURATION")] = _since("1h")
    revision: Annotated[str | None, Arg(flags=("--revision",), metavar="REVISION")] = Field(
        None, description="only this revision's logs"
    )


# The write commands' arguments are the plan builder's own params models (skills/actions/params.py: the same
# checks for a typed command, a plan button, the agent and MCP); here, how a person types each field.
SCALE_TYPED: Typed = {
    "min_instances": Arg(metavar="MIN", parse=whole_number, help="minimum instances (0 scales to zero)"),
    "max_instances": Arg(metavar="MAX", parse=whole_number, help="maximum instances"),
    "service": Arg(flags=("--service",), metavar="SERVICE", help=_SERVICE_HELP),
}
ROLLBACK_TYPED: Typed = {
    "revision": Arg(metavar="REVISION", nargs="?", help="a ready revision (default: the previous one)"),
    "service": Arg(flags=("--service",), metavar="SERVICE", help=_SERVICE_HELP),
}
DESTROY_TYPED: Typed = {"service": Arg(metavar="SERVICE", nargs="?", help=_SERVICE_HELP)}
# A deploy's (and config's) overrides: the fields of DeployParams, each typed as `--field-name VALUE` with the field's
# description as its help; a metavar derives from the field's type (N, a Literal's choices, the name for text)
# except where the type says too little:
DEPLOY_TYPED: Typed = {
    "memory": Arg(metavar="SIZE"),  # 32Gi, 16G
    "cpu": Arg(metavar="N"),  # vCPUs, kept as text ("8", "0.5")
    "accelerator_type": Arg(metavar="TYPE"),  # v6e-4
}


class QuotaArgs(_Args):
    gpu: Annotated[str, Arg(metavar="GPU", nargs="?")] = Field("nvidia-l4", description="GPU type (default: nvidia-l4)")


class AuditArgs(_Args):
    n: Annotated[int, Arg(metavar="N", nargs="?", parse=count(1, 50))] = Field(
        10, ge=1, le=50, description="how many (1-50, default 10)"
    )


class QueryArgs(_Args):
    prompt: Annotated[list[str], Arg(metavar="PROMPT", nargs="*")] = Field(
        default_factory=list, description="sent to the model as it is"
    )


class EvalArgs(_Args):
    scenarios: Annotated[list[str], Arg(metavar="SCENARIO", nargs="*")] = Field(
        default_factory=list, description="bundled scenarios (default: all)"
    )


class BenchArgs(_Args):
    compare: Annotated[Literal["compare"] | None, Arg(metavar="compare", nargs="?", choices=("compare",))] = Field(
        None, description="compare the last two stored sweeps"
    )
    concurrency: Annotated[list[int] | None, Arg(flags=("--concurrency",), metavar="1,8,32", parse=number_list)] = (
        Field(None, description="concurrent streams per cell")
    )
    contexts: Annotated[list[int] | None, Arg(flags=("--context",), metavar="128,2048,8192", parse=number_list)] = (
        Field(None, description="prompt tokens")
    )
    output_tokens: Annotated[int | None, Arg(flags=("--output",), metavar="N", parse=count(1))] = Field(
        None, ge=1, description="output tokens"
    )
    requests_per_cell: Annotated[int | None, Arg(flags=("--requests",), metavar="N", parse=count(1))] = Field(
        None, ge=1, description="requests per cell"
    )


class NoArgs(_Args):
    """Commands that take no arguments (models)."""
