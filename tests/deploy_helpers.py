"""Helpers for the deploy/operate/plan tests: a recording responder, and running commands and clicks."""

from __future__ import annotations

import json
from typing import Any

from bot.deps import Deps
from handlers.context import ActionContext, CommandContext
from handlers.registry import load_all
from handlers.reply import FileOut, Reply
from handlers.router import run_action, run_command
from skills.targets.cloud_run.render import DeployConfig, probe_for

load_all()


class RecordingResponder:
    """A Responder that keeps what a surface would show (posts/updates by ts, modals, command replies)."""

    channel = "C1"

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.posts: list[tuple[str, Reply, str | None]] = []
        self.updates: list[tuple[str, Reply]] = []
        self.modals: list[dict[str, Any]] = []
        self.files: list[FileOut] = []

    async def reply(self, reply: Reply) -> None:
        self.replies.append(reply)

    async def post(self, reply: Reply, thread_ts: str | None = None) -> str:
        ts = f"{1700000000 + len(self.posts)}.000100"
        self.posts.append((ts, reply, thread_ts))
        return ts

    async def update(self, ts: str, reply: Reply) -> None:
        self.updates.append((ts, reply))

    async def upload(self, file: FileOut, thread_ts: str | None = None) -> None:
        self.files.append(file)

    async def open_modal(self, view: dict[str, Any]) -> None:
        self.modals.append(view)

    def titles(self, ts: str | None = None) -> list[str]:
        return [r.title for t, r in self.updates if ts is None or t == ts]


async def command(
    deps: Deps, text: str, user: str = "UDEPLOYER", trigger_id: str = ""
) -> tuple[Reply | None, RecordingResponder]:
    from handlers.router import parse

    name, args = parse(text)
    responder = RecordingResponder()
    ctx = CommandContext(
        deps=deps,
        responder=responder,
        user_id=user,
        channel_id="C1",
        args=args,
        raw_text=text,
        trigger_id=trigger_id,
    )
    return await run_command(ctx, name), responder


async def click(
    deps: Deps,
    action_id: str,
    value: str,
    user: str = "UDEPLOYER",
    responder: RecordingResponder | None = None,
    form: dict[str, str] | None = None,
) -> tuple[Reply | None, RecordingResponder]:
    responder = responder or RecordingResponder()
    ctx = ActionContext(
        deps=deps,
        responder=responder,
        user_id=user,
        channel_id="C1",
        action_id=action_id,
        value=value,
        message_ts="1699999999.000100",
        thread_ts="1699999999.000100",
        form=form or {},
    )
    return await run_action(ctx), responder


def plan_id_of(reply: Reply | None) -> str:
    assert reply is not None, "no reply"
    for b in reply.buttons:
        if b.action_id in ("gemma_confirm", "gemma_destroy_open"):
            return b.value
    raise AssertionError(f"no confirm button in {reply.title!r}: {[b.action_id for b in reply.buttons]}")


def plan_value(action: str, params: dict[str, Any]) -> str:
    return json.dumps({"action": action, "params": params})


def deploy_config(**kw: object) -> DeployConfig:
    """A 12B QAT service on one L4 with weights from a bucket; `kw` overrides any field."""
    base: dict[str, object] = dict(
        service="vllm-gemma4",
        model="gemma-4-12b-qat",
        hf_repo="google/gemma-4-12b-it-qat-w4a16-ct",
        model_args=["--quantization", "compressed-tensors"],
        gpu="nvidia-l4",
        max_model_len=32768,
        gpu_memory_utilization=0.9,
        kv_cache_dtype="fp8",
        max_num_seqs=8,
        cpu="4",
        memory="16Gi",
        probe=probe_for(400),
        image="vllm/vllm-openai:v0.11.0",
        model_bucket="weights",
    )
    base.update(kw)
    return DeployConfig.model_validate(base)
