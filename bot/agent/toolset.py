"""The agent's tools, each a thin wrapper over a skill. Read-only tools return compact text for the model;
change tools (scale, redeploy, rollback, deploy, destroy) have argument schemas only: the loop turns a call
into a proposed action and never runs it.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.agent.tools import Tool, ToolRegistry
from skills.actions.params import DeployParams, RedeployParams, RollbackParams, ScaleParams
from skills.capacity.fit import FitRequest, check_fit
from skills.diagnosis.diagnose import diagnose
from skills.diagnosis.findings import Diagnosis
from skills.errors import UserFacingError
from skills.incidents.changes import as_text as changes_text
from skills.incidents.changes import what_changed
from skills.incidents.runbooks import read_runbook
from skills.logs.condense import condense
from skills.observe.model_metrics import collect_model_metrics
from skills.observe.status import collect_status
from skills.ports import LogEntry, LogQuery
from skills.targets.cloud_run.render import main_container

if TYPE_CHECKING:
    from bot.agent.ports import AgentPorts

Severity = Literal["DEFAULT", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoArgs(_Args):
    pass


class RevisionsArgs(_Args):
    limit: int = Field(default=5, ge=1, le=20, description="how many recent revisions")


class LogsArgs(_Args):
    since_minutes: int = Field(default=60, ge=1, le=10080, description="look back this many minutes")
    min_severity: Severity = Field(default="WARNING", description="lowest severity to include")
    revision: str | None = Field(default=None, description="only this revision")
    contains: str | None = Field(default=None, max_length=200, description="only lines containing this text")


class FindingsArgs(_Args):
    since_minutes: int = Field(default=60, ge=1, le=10080, description="look back this many minutes")


class MetricsArgs(_Args):
    pass


class ChangesArgs(_Args):
    started_minutes_ago: int = Field(default=0, ge=0, le=10080, description="when the trouble started (0: now)")


class RunbookArgs(_Args):
    kind: str = Field(max_length=60, description="a finding kind, e.g. kv_cache_insufficient")


class FitArgs(_Args):
    model: str = Field(description="catalog model name, e.g. gemma-4-12b-it-qat")
    gpu: str = Field(default="nvidia-l4", description="GPU type")
    max_model_len: int | None = Field(default=None, ge=256)


class DestroyArgs(_Args):
    reason: str = ""


class _Proposal(_Args):
    reason: str = Field(default="", description="why, citing the evidence")


class ScaleTool(ScaleParams, _Proposal):
    pass


class RedeployTool(RedeployParams, _Proposal):
    pass


class RollbackTool(RollbackParams, _Proposal):
    pass


class DeployTool(DeployParams, _Proposal):
    pass


class Toolset:
    """Read-only views of one service for one investigation (log fetches are shared between tools)."""

    def __init__(self, deps: AgentPorts, service: str | None = None) -> None:
        self.deps = deps
        self.settings = deps.settings
        self.service = service or deps.settings.vllm_service_name
        self._logs_cache: dict[tuple[int, str, str | None], list[LogEntry]] = {}

    def registry(self) -> ToolRegistry:
        tools = [
            Tool(
                "service_status",
                "Cloud Run readiness, revisions, scaling and model-server health.",
                NoArgs,
                self._status,
            ),
            # Offered only where the serving target has revisions (skills/targets/port.py capabilities).
            *(
                [Tool("list_revisions", "Recent revisions with readiness and traffic.", RevisionsArgs, self._revisions)]
                if self.deps.runtime.capabilities.revisions
                else []
            ),
            Tool(
                "service_config",
                "The running configuration: image, vLLM args, resources, startup probe.",
                NoArgs,
                self._config,
            ),
            Tool(
                "model_metrics",
                "The model server's /metrics summary: KV cache, queue, latency.",
                MetricsArgs,
                self._metrics,
            ),
        ]
        if self.deps.logs is not None:
            tools.append(
                Tool(
                    "get_logs",
                    "Condensed logs (templates with counts, first/last seen) for a window and severity.",
                    LogsArgs,
                    self._logs_tool,
                    narrow_hint="a smaller since_minutes, a higher min_severity, a revision or `contains`",
                )
            )
            tools.append(
                Tool(
                    "diagnose",
                    "Deterministic findings for known vLLM/Cloud Run failures.",
                    FindingsArgs,
                    self._findings_tool,
                )
            )
        tools += [
            Tool(
                "what_changed",
                "Revisions created before the trouble, each diffed against the last healthy revision, who made it "
                "(or made outside the bot), closest first, and the likely cause.",
                ChangesArgs,
                self._changes,
            ),
            Tool("read_runbook", "The team's runbook for a finding kind (Markdown).", RunbookArgs, self._runbook),
        ]
        tools.append(
            Tool(
                "capacity_fit",
                "Will a model fit a GPU: weights, KV cache tokens, cold start, and what to change if not.",
                FitArgs,
                self._fit,
            )
        )
        tools += [
            Tool(
                "scale",
                "PROPOSE changing min/max instances (a human approves).",
                ScaleTool,
                None,
                modifies=True,
            ),
            Tool(
                "redeploy",
                "PROPOSE a redeploy with changed vLLM/Cloud Run settings (a human approves).",
                RedeployTool,
                None,
                modifies=True,
            ),
            Tool(
                "rollback",
                "PROPOSE routing traffic back to an earlier revision (a human approves).",
                RollbackTool,
                None,
                modifies=True,
            ),
            Tool(
                "deploy",
                "PROPOSE deploying a named profile (a human approves).",
                DeployTool,
                None,
                modifies=True,
            ),
            Tool(
                "destroy",
                "Delete the service. Never proposed by the assistant.",
                DestroyArgs,
                None,
                modifies=True,
            ),
        ]
        return ToolRegistry(tools)

    # --- read-only tools ---------------------------------------------------------------------------------

    async def _status(self, _: NoArgs) -> str:
        return await self.status_text()

    async def status_text(self) -> str:
        report = await collect_status(
            self.deps.runtime,
            self.deps.model_server,
            self.service,
            base_url_override=self.settings.vllm_base_url,
        )
        s = report.service
        view: dict[str, Any] = {
            "service": s.name,
            "ready": s.ready,
            "cold": report.cold,
            "notes": report.notes,
            "latest_created_revision": s.latest_created_revision,
            "latest_ready_revision": s.latest_ready_revision,
            "scaling": {"min": s.min_instances, "max": s.max_instances, "concurrency": s.concurrency},
            "gpu": f"{s.gpu_count} x {s.gpu_type}" if s.gpu_type else "none",
            "conditions": [
                c.model_dump(exclude_defaults=True) for c in s.conditions if c.state != "CONDITION_SUCCEEDED"
            ],
        }
        if report.model is not None:
            m = report.model
            view["model_server"] = {"health": m.health.model_dump(exclude_defaults=True), "models": m.models}
        return _dumps(view)

    async def _revisions(self, args: RevisionsArgs) -> str:
        revs = await self.deps.runtime.list_revisions(self.service, limit=args.limit)
        return _dumps([r.model_dump(mode="json", exclude_defaults=True) for r in revs])

    async def _config(self, _: NoArgs) -> str:
        info = await self.deps.runtime.get_service(self.service)
        view: dict[str, Any] = {
            "image": info.image,
            "args": info.args,
            "cpu": info.cpu,
            "memory": info.memory,
            "gpu": f"{info.gpu_count} x {info.gpu_type}" if info.gpu_type else "none",
            "min_instances": info.min_instances,
            "max_instances": info.max_instances,
            "concurrency": info.concurrency,
        }
        if info.spec:
            container = main_container(info.spec)
            view["startup_probe"] = container.get("startupProbe", {})
            # Names only: values may be secrets, and the model does not need them.
            view["env"] = sorted(e.get("name", "") for e in container.get("env", []))
        return _dumps(view)

    async def _metrics(self, _: MetricsArgs) -> str:
        return await self.metrics_text()

    async def metrics_text(self) -> str:
        base = await self.deps.endpoint.base_url()
        m = await collect_model_metrics(self.deps.model_server, base)
        return _dumps(m.model_dump(mode="json", exclude_none=True, exclude={"scraped_at"}))

    async def _changes(self, args: ChangesArgs) -> str:
        now = datetime.now(UTC)
        start = now - timedelta(minutes=args.started_minutes_ago)
        wc = await what_changed(
            self.deps.runtime, self.deps.redis, self.settings.key("audit"), self.service, start, now=now
        )
        return "\n".join(changes_text(wc))

    async def _runbook(self, args: RunbookArgs) -> str:
        return read_runbook(args.kind, self.settings.runbooks_dir)

    async def _fit(self, args: FitArgs) -> str:
        r = check_fit(FitRequest(model=args.model, gpu=args.gpu, max_model_len=args.max_model_len))
        keep = {"verdict", "weights_gib", "kv_cache_tokens", "max_concurrency", "cold_start_s", "changes"}
        view = r.model_dump(mode="json", include=keep | {"alternatives", "warnings", "notes", "vllm_args"})
        return _dumps(view)

    async def fetch_logs(self, minutes: int, severity: str, revision: str | None = None) -> list[LogEntry]:
        key = (minutes, severity, revision)
        if key not in self._logs_cache:
            if self.deps.logs is None:
                raise UserFacingError("Logs are not available (no Cloud Logging adapter is configured).")
            query = LogQuery(
                service=self.service,
                since=datetime.now(UTC) - timedelta(minutes=minutes),
                revision=revision,
                min_severity=severity,
                max_entries=self.settings.log_max_entries,
                max_bytes=self.settings.log_max_bytes,
            )
            batch = await self.deps.logs.fetch(query)
            self._logs_cache[key] = batch.entries
        return self._logs_cache[key]

    async def _logs_tool(self, args: LogsArgs) -> str:
        entries = await self.fetch_logs(args.since_minutes, args.min_severity, args.revision)
        if args.contains:
            needle = args.contains.lower()
            entries = [e for e in entries if needle in e.text.lower()]
        return await self.logs_text(entries)

    async def logs_text(self, entries: list[LogEntry]) -> str:
        if not entries:
            return "No log lines matched."
        digest = await asyncio.to_thread(condense, entries, self.settings.agent_tool_result_tokens)
        return digest.text

    async def _findings_tool(self, args: FindingsArgs) -> str:
        return findings_text(await self.diagnosis(args.since_minutes))

    async def diagnosis(self, minutes: int) -> Diagnosis:
        """Findings and the condensed digest of every line in the window (one fetch, CPU work in a thread)."""
        entries = await self.fetch_logs(minutes, "DEFAULT")
        budget = self.settings.agent_tool_result_tokens
        return await asyncio.to_thread(diagnose, entries, token_budget=budget)


def findings_text(diag: Diagnosis) -> str:
    if not diag.findings:
        return "No known failure pattern found."
    return _dumps(
        [
            f.model_dump(mode="json", include={"kind", "title", "severity", "caused_by", "evidence", "remediation"})
            for f in diag.findings
        ]
    )


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str, ensure_ascii=False)
