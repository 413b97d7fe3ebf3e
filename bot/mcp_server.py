"""`gemma-sre mcp`: the bot's skills as an MCP server (the official `mcp` SDK's low-level Server), for the coding
agents operators drive their deployments from.

Tools come from bot/mcp_tools.py (their schemas are the commands' declared argument models); a call's arguments
are checked against that model before anything runs, and a bad one is an error naming the field. Who calls:
over stdio, MCP_STDIO_USER (the local user's own process); over streamable HTTP, the Slack user id that the
bearer token names in MCP_TOKENS (bot/mcp_http.py answers 401 before MCP sees a request without one). Each caller
has its own rate limits, counted in the shared store. Resources: the model catalog and the open incidents; one
prompt: "diagnose my service".
"""

from __future__ import annotations

import base64
import json
import logging
import re
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS
from pydantic import ValidationError

from bot.mcp_http import caller_for
from bot.mcp_plans import PlanPoster, plan_view
from bot.mcp_result import ToolResult
from bot.mcp_tools import Call, McpTool, build_tools
from skills.capacity.fit import load_catalog
from skills.deploy.service_name import check_service_name
from skills.durations import parse_duration
from skills.errors import InvalidInput, UserFacingError, explain_validation
from skills.incidents.lifecycle_store import IncidentLifecycle
from skills.incidents.store import IncidentStore
from skills.logs.redact import redact
from skills.text import shorten

if TYPE_CHECKING:
    from bot.deps import Deps
    from skills.incidents.model import Incident

log = logging.getLogger(__name__)

CATALOG_URI = "gemma-sre://catalog"
INCIDENTS_URI = "gemma-sre://incidents/open"
# The pages after the first: the URI a page's "next" names (a client that knows templates may list it too).
INCIDENTS_PAGES = INCIDENTS_URI + "{?cursor}"
DIAGNOSE_PROMPT = "diagnose-my-service"
ERROR_CHARS = 600  # an error says what was wrong; the caller has what it sent
INCIDENTS_PAGE = 50
_ALERT_FIELDS = {"name", "severity", "state", "summary"}


def tool_hints(tool: McpTool) -> types.ToolAnnotations:
    """Hints for clients that list read-only tools apart (they decide nothing here: the server enforces)."""
    if tool.kind == "write":
        # A write tool only stores a plan and posts it: nothing in the cloud changes on its call.
        return types.ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)
    return types.ToolAnnotations(read_only_hint=tool.kind in ("read", "follow"), open_world_hint=True)


class RateLimits:
    """Per caller and minute, in the shared store: calls, and of those the ones that cost or plan a write."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    async def check(self, caller: str, costly: bool) -> None:
        st = self.deps.settings
        minute = int(time.time() // 60)
        limits = [("calls", st.mcp_calls_per_min)] + ([("costly", st.mcp_costly_per_min)] if costly else [])
        for name, limit in limits:
            key = st.key("mcp-rate", name, caller, str(minute))
            n = int(await self.deps.redis.incr(key))
            if n == 1:
                await self.deps.redis.expire(key, 120)
            if n > limit:
                what = "tool calls" if name == "calls" else "calls that cost or plan a write"
                raise UserFacingError(
                    f"Rate limit: at most {limit} {what} per minute for {caller}.",
                    f"Try again in {60 - int(time.time()) % 60} s.",
                )


class McpApp:
    """The server's state: the wired dependencies, the tools, and how writes are proposed."""

    def __init__(self, deps: Deps, poster: PlanPoster, stdio_caller: str) -> None:
        self.deps = deps
        self.poster = poster
        self.stdio_caller = stdio_caller
        self.tools = build_tools()
        self.limits = RateLimits(deps)
        self._listed: types.ListToolsResult | None = None

    def caller(self, ctx: Any) -> str:
        """Over HTTP, the Slack user the bearer token names (checked by bot/mcp_http.py before MCP saw the
        request); over stdio, MCP_STDIO_USER."""
        request = getattr(ctx, "request", None)
        headers = getattr(request, "headers", None)
        if headers is not None:
            caller = caller_for(self.deps.settings.mcp_tokens, headers.get("authorization", ""))
            if caller is None:  # the middleware lets nothing through without one; never fall back to stdio's
                raise UserFacingError("This request carries no known bearer token.")
            return caller
        return self.stdio_caller

    async def list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        if self._listed is None:  # the declarations do not change while the server runs: built once
            self._listed = self._tool_list()
        return self._listed

    def _tool_list(self) -> types.ListToolsResult:
        refusal = self.poster.refusal()
        tools = []
        for t in self.tools.values():
            description = t.description
            if t.kind == "write" and refusal:
                description += f" Unavailable on this server: {refusal}"
            schema, hints = t.input_schema(), tool_hints(t)
            tools.append(types.Tool(name=t.name, description=description, input_schema=schema, annotations=hints))
        return types.ListToolsResult(tools=tools)

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = self.tools.get(params.name)
        if tool is None:  # the spec's protocol error for an unknown tool, with the names that exist
            raise MCPError(
                INVALID_PARAMS, _brief(f"Unknown tool: {params.name}. Tools: {', '.join(sorted(self.tools))}")
            )
        try:
            caller = self.caller(ctx)
        except UserFacingError as exc:
            return _error(str(exc))
        try:
            args = tool.args.model_validate(params.arguments or {})
        except ValidationError as exc:
            return _error(f"Bad arguments for {tool.name}: {explain_validation(exc, flag_style=False)}")
        try:
            await self.limits.check(caller, tool.kind in ("cost", "write"))
            call = Call(deps=self.deps, caller=caller)
            if tool.kind == "write":
                call.propose = lambda kind, p: self._propose(ctx, kind, p, caller)
            result = await tool.run(call, args)
        except UserFacingError as exc:
            return _error(str(exc))
        except Exception as exc:
            incident = uuid.uuid4().hex[:8]
            log.error("mcp tool %s failed [%s]: %s", tool.name, incident, type(exc).__name__, exc_info=exc)
            return _error(f"{tool.name} failed unexpectedly (error id {incident}); the server's log has the details.")
        return types.CallToolResult(
            content=[types.TextContent(text=redact(result.text))], structured_content=redacted(result.structured)
        )

    async def _propose(self, ctx: Any, kind: str, params: dict[str, Any], caller: str) -> ToolResult:
        plan, channel = await self.poster.propose(kind, params, caller)
        where = (
            f"Posted to {self.poster.channel} (channel {channel}, message {plan.message_ts}) for a deployer to "
            "confirm with its buttons."
            if channel
            else "Slack is not configured here (SLACK_BOT_TOKEN), so it is not posted: only the client's "
            "confirmation (MCP elicitation, where MCP_ELICIT_CONFIRM is on) can run it; otherwise it expires."
        )
        asked = await self.poster.ask_human(ctx.session, plan, caller, ctx.request_id)
        state = "confirmed" if asked.startswith("Confirmed") else "pending"
        blocked = plan.blocked()
        text = f"Plan {plan.id} ({state}): {plan.summary}. {where}"
        text += f" Blocked: {blocked}" if blocked else ""
        text += f" {asked}" if asked else ""
        text += " Follow it with plan_status."
        structured = {
            "state": state,
            "plan": plan_view(plan),
            "posted": {"channel": self.poster.channel, "channel_id": channel, "message_ts": plan.message_ts}
            if channel
            else None,
            "elicitation": asked or None,
        }
        return ToolResult(structured, shorten(text, 1500))

    # --- resources and prompts ------------------------------------------------------------------------
    async def list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=CATALOG_URI,
                    name="model-catalog",
                    description="Models and GPUs the capacity planner knows (what fit and deploy accept)",
                    mime_type="application/json",
                ),
                types.Resource(
                    uri=INCIDENTS_URI,
                    name="open-incidents",
                    description=(
                        f"Incidents not resolved, newest first, {INCIDENTS_PAGE} a page: total says how many there "
                        "are, shown how many this page holds, next the URI of the following page (null on the last)"
                    ),
                    mime_type="application/json",
                ),
            ]
        )

    async def list_resource_templates(self, ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=INCIDENTS_PAGES,
                    name="open-incidents-page",
                    description=f"A later page of {INCIDENTS_URI}: the cursor its previous page's next names",
                    mime_type="application/json",
                )
            ]
        )

    async def read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == CATALOG_URI:
            data: Any = load_catalog().model_dump(mode="json")
        elif uri == INCIDENTS_URI or uri.startswith(INCIDENTS_URI + "?cursor="):
            data = await self._open_incidents(uri.removeprefix(INCIDENTS_URI).removeprefix("?cursor="))
        else:
            raise MCPError(
                INVALID_PARAMS,
                _brief(f"Unknown resource: {uri}. Resources: {CATALOG_URI}, {INCIDENTS_URI}, {INCIDENTS_PAGES}"),
            )
        text = redact(json.dumps(data, default=str))
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
        )

    async def _open_incidents(self, cursor: str) -> dict[str, Any]:
        """Not resolved (open, acknowledged or snoozed), newest first, as `/gemma incidents` lists them: a page
        of INCIDENTS_PAGE after `cursor` ('' for the first), with how many there are and the next page's URI.
        The cursor is where the last page ended (when it opened, its id), so an incident opened or resolved
        between two reads neither repeats nor skips one."""
        after = _cursor_key(cursor) if cursor else None
        lifecycle = IncidentLifecycle(IncidentStore(self.deps.redis, self.deps.settings.key_prefix))
        listed = await lifecycle.listed(limit=sys.maxsize)  # every kept incident: the total is the store's
        open_ = [i for i in listed if i.status != "resolved" and not i.incident.test]
        open_.sort(key=lambda i: _order(i.incident), reverse=True)
        rest = [i for i in open_ if after is None or _order(i.incident) < after]
        page = rest[:INCIDENTS_PAGE]
        more = len(rest) - len(page)
        findings = await lifecycle.lead_findings([i.incident.id for i in page])
        return {
            "incidents": [
                {
                    "id": i.incident.id,
                    "status": i.status,
                    "service": i.incident.service,
                    "severity": i.incident.severity,
                    # What tells incidents of one alert apart (as /gemma incidents shows them).
                    "revision": i.incident.revision,
                    "started_at": i.incident.started_at.isoformat(),
                    "finding": findings.get(i.incident.id, ""),
                    "opened_at": i.incident.opened_at.isoformat(),
                    "last_event_at": i.incident.last_event_at.isoformat(),
                    "alerts": [m.model_dump(mode="json", include=_ALERT_FIELDS) for m in i.incident.members.values()],
                    "slack": {"channel": i.incident.channel, "ts": i.incident.ts},
                }
                for i in page
            ],
            "total": len(open_),
            "shown": len(page),
            "newer": len(open_) - len(rest),  # on the pages before this one
            "more": more,  # on the pages after it
            "next": f"{INCIDENTS_URI}?cursor={_cursor(page[-1].incident)}" if more else None,
        }

    async def list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name=DIAGNOSE_PROMPT,
                    description="Diagnose my vLLM service on Cloud Run: status, known failures in the logs, a fix",
                    arguments=[
                        types.PromptArgument(name="service", description="the Cloud Run service", required=False),
                        types.PromptArgument(name="since", description="how far back: 30m, 2h (default 1h)"),
                    ],
                )
            ]
        )

    async def get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != DIAGNOSE_PROMPT:
            raise MCPError(INVALID_PARAMS, _brief(f"Unknown prompt: {params.name}. Prompts: {DIAGNOSE_PROMPT}"))
        args = params.arguments or {}
        service = args.get("service") or self.deps.settings.vllm_service_name
        since = args.get("since") or "1h"
        try:  # both are spliced into the prompt's text and tool calls: only a service name and a duration
            check_service_name(service)
            parse_duration(since, flag="since")
        except InvalidInput as exc:
            raise MCPError(INVALID_PARAMS, _brief(f"{exc.message} {exc.hint}".strip())) from None
        text = (
            f"Diagnose the Cloud Run service `{service}` that serves Gemma 4 with vLLM. Call the gemma-sre tools in "
            f'this order: status {{"service": "{service}"}} (is it ready, which revision serves), then diagnose '
            f'{{"service": "{service}", "since": "{since}"}} (known vLLM / Cloud Run failures with evidence), then '
            f'logs {{"service": "{service}", "since": "{since}", "severity": "WARNING"}} if the cause is unclear, '
            "and fit for the model and GPU it runs when memory is involved. Say what failed, the evidence, and the "
            "fix. If the fix is a change to the service, propose it with the matching write tool (redeploy, scale, "
            "rollback): that only posts a plan for a human deployer to confirm in Slack; report the plan id and "
            "follow it with plan_status. Never claim a change was made until plan_status says it succeeded."
        )
        return types.GetPromptResult(
            description=f"Diagnose {service}",
            messages=[types.PromptMessage(role="user", content=types.TextContent(text=text))],
        )

    def server(self) -> Server[Any]:
        return Server(
            "gemma-sre",
            version=_version(),
            instructions=(
                "SRE tools for a self-hosted Gemma 4 on vLLM on Cloud Run. Read-only tools run at once; health, "
                "query, bench and eval need a deployer; write tools only propose a plan that a human deployer "
                "confirms in Slack (plan_status follows it)."
            ),
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_resource_templates,
            on_read_resource=self.read_resource,
            on_list_prompts=self.list_prompts,
            on_get_prompt=self.get_prompt,
        )


def redacted(value: Any) -> Any:
    """Every string in a result redacted (skills/logs/redact.py), as in everything the bot says: an agent's
    model is one more place a secret must not reach."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redacted(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redacted(v) for v in value]
    return value


def _order(inc: Incident) -> tuple[float, str]:
    """Newest first is this, descending (the incident index's score, then the id for a tie)."""
    return (inc.opened_at.timestamp(), inc.id)


def _cursor(inc: Incident) -> str:
    ts, inc_id = _order(inc)
    return base64.urlsafe_b64encode(f"{ts!r} {inc_id}".encode()).decode().rstrip("=")


def _cursor_key(cursor: str) -> tuple[float, str]:
    try:  # opaque to the client; whatever it sends is only ever parsed, never quoted back
        ts, inc_id = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode().split(" ", 1)
        return (float(ts), inc_id)
    except ValueError:  # binascii.Error and UnicodeDecodeError included
        raise MCPError(
            INVALID_PARAMS, f"Not a cursor this server gave: read {INCIDENTS_URI} for the first page."
        ) from None


_LONG_WORD = re.compile(r"\S{81,}")


def _brief(text: str) -> str:
    """An error as a caller reads it: redacted, any unbroken run of over 80 characters (a quoted argument, most
    often) cut to its start, the whole cut to ERROR_CHARS: what was sent is never echoed back."""
    text = _LONG_WORD.sub(lambda m: m.group(0)[:60] + "…", redact(text))
    return shorten(text, ERROR_CHARS)


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=_brief(text))], is_error=True)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gemma-sre")
    except PackageNotFoundError:
        return "0"
