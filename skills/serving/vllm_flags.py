"""The vLLM serve flags the bot manages, as one model: parsed from a container's args, rendered back to args.

Every surface that reads or writes vLLM flags (the fit planner, the service renderer, the plan builder, the
spec diff, the startup check, the log analyzers, the bench) goes through `VllmFlags`, so they agree on names,
defaults and spelling.

Defaults are vLLM's own. `vllm/engine/arg_utils.py` `EngineArgs` takes each field's default from the config
dataclass that owns it, and `EngineArgs.add_cli_args` turns every bool field into an
`argparse.BooleanOptionalAction` (so `--enforce-eager` has a `--no-enforce-eager`):
  ModelConfig (vllm/config/model.py):       model, served_model_name, dtype="auto", quantization=None,
                                            max_model_len=None (derived from the model's config.json),
                                            enforce_eager=False
  CacheConfig (vllm/config/cache.py):       kv_cache_dtype="auto" (= the activation dtype),
                                            gpu_memory_utilization (0.9 in v0.11, 0.92 on later main),
                                            cpu_offload_gb=0 (UVAOffloadConfig in newer releases)
  ParallelConfig (vllm/config/parallel.py): tensor_parallel_size=1
  SchedulerConfig (vllm/config/scheduler.py): max_num_seqs / max_num_batched_tokens / enable_chunked_prefill
                                            = None in EngineArgs, filled in per usage context and GPU
  FrontendArgs (vllm/entrypoints/openai/cli_args.py): host, port, enable_auto_tool_choice=False,
                                            tool_call_parser, reasoning_parser, chat_template = None

ONE rule for defaults: a flag is written only when its value differs from vLLM's default. Where vLLM has no
fixed default (it derives the value from the model, the GPU or the usage context, or the default changed
between releases, as gpu_memory_utilization did) the field's default here is None, "vLLM decides", so every
value the bot sets is written. Why this rule: `--kv-cache-dtype auto` and `--dtype auto` mean exactly what
leaving them out means, so writing them only made two spellings of one configuration, which is how the
planner (omitting them) and the renderer (writing them) came to disagree; and values whose default moves
between vLLM versions stay pinned because they are written. Parsing maps both spellings to one model, so a
service deployed with the old explicit `--kv-cache-dtype auto` diffs as unchanged.

Flags the bot does not manage (an operator's extras) are kept verbatim and in order after the managed ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from skills.errors import InvalidInput, explain_error

# vllm/config/cache.py CacheDType (v0.24): the values `--kv-cache-dtype` accepts.
CacheDType = Literal["auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"]
# vllm/config/model.py ModelDType: the values `--dtype` accepts.
ModelDType = Literal["auto", "half", "float16", "bfloat16", "float", "float32"]


class VllmFlagsError(InvalidInput):
    """A managed flag with a value vLLM would refuse (or one the bot cannot read)."""


@dataclass(frozen=True)
class FlagSpec:
    field: str
    flag: str
    boolean: bool = False


# Render order: the order the renderer has always used, so running services keep their args' order.
SPECS: tuple[FlagSpec, ...] = (
    FlagSpec("model", "--model"),
    FlagSpec("served_model_name", "--served-model-name"),
    FlagSpec("host", "--host"),
    FlagSpec("port", "--port"),
    FlagSpec("max_model_len", "--max-model-len"),
    FlagSpec("gpu_memory_utilization", "--gpu-memory-utilization"),
    FlagSpec("kv_cache_dtype", "--kv-cache-dtype"),
    FlagSpec("max_num_seqs", "--max-num-seqs"),
    FlagSpec("enable_chunked_prefill", "--enable-chunked-prefill", boolean=True),
    FlagSpec("max_num_batched_tokens", "--max-num-batched-tokens"),
    FlagSpec("enable_auto_tool_choice", "--enable-auto-tool-choice", boolean=True),
    FlagSpec("tool_call_parser", "--tool-call-parser"),
    FlagSpec("reasoning_parser", "--reasoning-parser"),
    FlagSpec("chat_template", "--chat-template"),
    FlagSpec("quantization", "--quantization"),
    FlagSpec("dtype", "--dtype"),
    FlagSpec("tensor_parallel_size", "--tensor-parallel-size"),
    FlagSpec("enforce_eager", "--enforce-eager", boolean=True),
    FlagSpec("cpu_offload_gb", "--cpu-offload-gb"),
)
BY_FLAG = {s.flag: s for s in SPECS}
BY_FIELD = {s.field: s for s in SPECS}
# Flags taking a value that the bot may see with a short alias (vLLM's own `-tp`, `-q`).
ALIASES = {"-tp": "--tensor-parallel-size", "-q": "--quantization"}

_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgG])")


class VllmFlags(BaseModel):
    """The managed vLLM serve flags; each default is vLLM's (None: vLLM derives it, see the module doc)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    model: str | None = None  # ModelConfig.model (the image's default checkpoint when unset)
    served_model_name: str | None = None  # ModelConfig.served_model_name (defaults to model)
    host: str | None = None  # FrontendArgs.host
    port: int | None = Field(default=None, ge=1, le=65535)  # FrontendArgs.port (8000)
    max_model_len: int | None = Field(default=None, ge=1)  # ModelConfig: derived from config.json
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)  # CacheConfig: changed across releases
    kv_cache_dtype: CacheDType = "auto"  # CacheConfig.cache_dtype
    max_num_seqs: int | None = Field(default=None, ge=1)  # SchedulerConfig: per usage context and GPU
    enable_chunked_prefill: bool | None = None  # SchedulerConfig: on by default in the V1 engine
    max_num_batched_tokens: int | None = Field(default=None, ge=1)  # SchedulerConfig: per usage context and GPU
    enable_auto_tool_choice: bool = False  # FrontendArgs.enable_auto_tool_choice
    tool_call_parser: str | None = None  # FrontendArgs.tool_call_parser
    reasoning_parser: str | None = None  # FrontendArgs.reasoning_parser (StructuredOutputsConfig in newer)
    chat_template: str | None = None  # FrontendArgs.chat_template
    quantization: str | None = None  # ModelConfig.quantization (None: from the checkpoint's config)
    dtype: ModelDType = "auto"  # ModelConfig.dtype
    tensor_parallel_size: int = Field(default=1, ge=1)  # ParallelConfig.tensor_parallel_size
    enforce_eager: bool = False  # ModelConfig.enforce_eager
    cpu_offload_gb: float = Field(default=0, ge=0)  # CacheConfig / UVAOffloadConfig.cpu_offload_gb
    # Not flags: a leading positional (`vllm serve MODEL`) and the flags the bot does not manage, verbatim.
    positional: list[str] = Field(default_factory=list)
    extra: list[str] = Field(default_factory=list)

    @field_validator("max_model_len", "max_num_batched_tokens", mode="before")
    @classmethod
    def _human_int(cls, v: Any) -> Any:
        # vLLM's human_readable_int (vllm/engine/arg_utils.py): 32k = 32,000, 32K = 32 x 1024.
        m = _HUMAN_INT.fullmatch(v) if isinstance(v, str) else None
        if not m:
            return v
        power = "kmg".index(m.group(2).lower()) + 1
        base = 1024 if m.group(2).isupper() else 1000
        return int(float(m.group(1)) * base**power)

    # --- parsing ---------------------------------------------------------------------------------------

    @classmethod
    def parse(cls, args: list[str] | tuple[str, ...], replacing: frozenset[str] = frozenset()) -> VllmFlags:
        """Container args -> flags. `--flag value` and `--flag=value`; `--x` / `--no-x` for vLLM's booleans;
        the last of a repeated flag wins (as argparse does). Unmanaged tokens are kept verbatim, in order.
        Fields in `replacing` are about to be overwritten: their current values are dropped unread, so a
        redeploy can repair a malformed value instead of being refused for it."""
        tokens = [str(a) for a in args]
        values: dict[str, Any] = {}
        positional: list[str] = []
        extra: list[str] = []
        i = 0
        while i < len(tokens):
            a = tokens[i]
            name, eq, inline = a.partition("=")
            name = ALIASES.get(name, name)
            spec = BY_FLAG.get(name)
            negated = BY_FLAG.get("--" + name[5:]) if name.startswith("--no-") else None
            if (spec and spec.boolean) or (negated and negated.boolean):
                if eq:
                    raise VllmFlagsError(
                        f"vLLM flag `{a}` takes no value.", f"Write `{name}` or `--no-{name[2:]}` instead."
                    )
                on = spec is not None
                values[(spec or negated).field] = on  # type: ignore[union-attr]
            elif spec:
                if not eq:
                    if i + 1 >= len(tokens) or tokens[i + 1].startswith("--"):
                        raise VllmFlagsError(f"vLLM flag `{name}` needs a value.", f"Write `{name} VALUE`.")
                    i += 1
                    inline = tokens[i]
                values[spec.field] = inline
            elif not extra and not values and not a.startswith("-"):
                positional.append(a)  # `vllm serve MODEL ...`: before any flag
            else:
                extra.append(a)
            i += 1
        values = {k: v for k, v in values.items() if k not in replacing}
        try:
            return cls.model_validate({**values, "positional": positional, "extra": extra})
        except ValidationError as e:
            raise _error(e, values) from None

    @classmethod
    def parse_or_none(cls, args: list[str] | tuple[str, ...]) -> VllmFlags | None:
        """For readers of a running service (analyzers, bench): unreadable args mean "unknown", not a crash."""
        try:
            return cls.parse(args)
        except VllmFlagsError:
            return None

    # --- rendering -------------------------------------------------------------------------------------

    def to_args(self) -> list[str]:
        """Deterministic args: positionals, managed flags in SPECS order (only those that differ from vLLM's
        default), then the unmanaged ones verbatim."""
        out = list(self.positional)
        for flag, value in self.managed_items():
            out += [flag] if value is None else [flag, value]
        return out + list(self.extra)

    def managed_items(self) -> list[tuple[str, str | None]]:
        """(flag, value) for each managed flag that differs from vLLM's default; value None for a bare flag."""
        out: list[tuple[str, str | None]] = []
        for spec in SPECS:
            value = getattr(self, spec.field)
            if value is None or value == _default(spec.field):
                continue
            if spec.boolean:
                out.append((spec.flag if value else f"--no-{spec.flag[2:]}", None))
            else:
                out.append((spec.flag, _fmt(value)))
        return out

    def display_items(self) -> list[tuple[str, str]]:
        """What a diff shows: one (flag, value) per managed flag in force and per unmanaged flag ('true' for a
        bare flag), positionals as arg[i]."""
        items = [(f"arg[{i}]", p) for i, p in enumerate(self.positional)]
        items += [(f, "true" if v is None else v) for f, v in self.managed_items()]
        return items + pair_tokens(self.extra)

    # --- editing ---------------------------------------------------------------------------------------

    def with_(self, **changes: Any) -> VllmFlags:
        """A validated copy with `changes` (None resets a field to vLLM's default)."""
        data = self.model_dump(exclude_unset=True)
        for k, v in changes.items():
            if k not in BY_FIELD:
                raise KeyError(k)
            if v is None:
                data.pop(k, None)
            else:
                data[k] = v
        try:
            return VllmFlags.model_validate(data)
        except ValidationError as e:
            raise _error(e, changes) from None

    def set_fields(self) -> dict[str, Any]:
        """The managed fields explicitly given (parsed or set), by field name."""
        return {k: getattr(self, k) for k in self.model_fields_set if k in BY_FIELD}

    def merged(self, other: VllmFlags) -> VllmFlags:
        """self with every field `other` sets, and `other`'s unmanaged flags appended."""
        out = self.with_(**other.set_fields())
        return out.model_copy(update={"extra": [*out.extra, *other.extra]}) if other.extra else out

    def without(self, other: VllmFlags) -> VllmFlags:
        """self with the fields `other` sets reset to vLLM's defaults (another checkpoint's catalog flags)."""
        return self.with_(**dict.fromkeys(other.set_fields()))

    @property
    def model_path(self) -> str | None:
        """--model, else `vllm serve MODEL`'s positional."""
        pos = [p for p in self.positional if p != "serve"]
        return self.model or (pos[0] if pos else None)


def _default(field: str) -> Any:
    return VllmFlags.model_fields[field].default


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _error(e: ValidationError, given: dict[str, Any]) -> VllmFlagsError:
    err = e.errors()[0]
    field = str(err["loc"][0]) if err["loc"] else ""
    spec = BY_FIELD.get(field)
    flag = spec.flag if spec else field
    return VllmFlagsError(
        f"vLLM flag `{flag} {given.get(field, '')}`: {explain_error({**err, 'loc': ()}).lower()}.",
        "Fix the value in the service's container args (vLLM would refuse it at start-up).",
    )


def pair_tokens(tokens: list[str]) -> list[tuple[str, str]]:
    """Unmanaged tokens as (flag, value) for display: `--x v` and `--x=v` pair up, a bare flag is 'true', a
    stray positional is arg[i]. Only for showing; rendering keeps the tokens themselves."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(tokens):
        a = tokens[i]
        if a.startswith("-"):
            if "=" in a:
                k, v = a.split("=", 1)
                out.append((k, v))
            elif i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
                out.append((a, tokens[i + 1]))
                i += 1
            else:
                out.append((a, "true"))
        else:
            out.append((f"arg[{i}]", a))
        i += 1
    return out


# --- the planner's vocabulary (skills/serving/profiles.py KvDtype, FitRequest.dtype) to vLLM's ------------------


def kv_flag(planner_kv: str) -> CacheDType:
    """The planner's bf16/fp16/auto all mean vLLM's `auto` (the activation dtype); fp8 is fp8."""
    return "fp8" if planner_kv == "fp8" else "auto"


def planner_kv(flags: VllmFlags) -> Literal["auto", "fp8"]:
    """vLLM's --kv-cache-dtype in the planner's words: any fp8 variant is fp8, the rest is auto."""
    return "fp8" if flags.kv_cache_dtype.startswith("fp8") else "auto"


def planner_dtype(flags: VllmFlags) -> Literal["auto", "half", "bfloat16"]:
    """vLLM's --dtype in the planner's words (half = float16)."""
    return {"half": "half", "float16": "half", "bfloat16": "bfloat16"}.get(flags.dtype, "auto")  # type: ignore[return-value]
