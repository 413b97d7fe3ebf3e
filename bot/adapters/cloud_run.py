"""Runtime port on Cloud Run Admin API v2 through `google-cloud-run` (REST transport, sync client in a thread).

Reads (service, revision, operation) ride out transient failures — 429, 5xx, timeouts, dropped connections —
with the shared retry policy (skills/retrying.py: tenacity, exponential jitter) within `retry_budget_s`, then
raise TransientCloudError so a watcher with time left keeps watching. The library's own 503 retry is switched
off so there is one policy, and the clock and sleep are injectable so tests never wait. Writes are not retried
(a 429 on a create is usually GPU quota).

An update sends the whole service; any top-level or template field the request leaves out is taken from the
running service, so a caller that does not manage a field (service account, labels, VPC access, ...) never
drops it by omission.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from google.api_core import exceptions as gexc
from google.api_core.client_options import ClientOptions

from bot.adapters.blocking import BlockingPool
from bot.adapters.google_auth import cloud_credentials
from bot.settings import Settings
from skills.deploy.service_name import check_service_name
from skills.errors import InvalidInput, NotFound, TransientCloudError, UserFacingError
from skills.logs.redact import redact
from skills.ports import (
    Condition,
    OperationProgress,
    RevisionInfo,
    ServiceInfo,
    TrafficTarget,
)
from skills.retrying import RetryPolicy, retry_call
from skills.targets.cloud_run.diff import OUTPUT_ONLY_FIELDS
from skills.targets.cloud_run.render import strip_output_only

if TYPE_CHECKING:  # run_v2 is imported where used: a slow import a request may never need
    from google.cloud import run_v2

log = logging.getLogger(__name__)
T = TypeVar("T")
Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]
_TRANSIENT_API = (gexc.TooManyRequests, gexc.ServerError, gexc.DeadlineExceeded, gexc.RetryError)
# The REST transport rides on `requests`, whose timeouts and connection errors are OSErrors.
_TRANSIENT = (*_TRANSIENT_API, OSError, TimeoutError)


def is_transient(exc: BaseException) -> bool:
    """429, 5xx, deadline and connection failures: worth another try; 4xx other than 429 are not."""
    return isinstance(exc, _TRANSIENT)


def keep_unmanaged(current: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """`body` plus every top-level and template field of `current` that body leaves out (absent = keep)."""
    out = copy.deepcopy(body)
    for key, value in current.items():
        if key not in out and key not in OUTPUT_ONLY_FIELDS and key != "name":
            out[key] = copy.deepcopy(value)
    tmpl, cur_tmpl = out.get("template"), current.get("template")
    if isinstance(tmpl, dict) and isinstance(cur_tmpl, dict):
        for key, value in cur_tmpl.items():
            if key not in tmpl and key != "revision":  # an explicit revision name cannot be reused
                tmpl[key] = copy.deepcopy(value)
    return out


def explain_api_error(exc: gexc.GoogleAPICallError, what: str) -> UserFacingError:
    """One clear sentence per Cloud Run API failure, with what to do next."""
    msg = (exc.message or str(exc)).strip()
    # The REST transport prefixes "PATCH https://…/services/x?$alt=…: "; the sentence needs only the reason.
    msg = redact(re.sub(r"^(GET|POST|PATCH|PUT|DELETE) \S+: ", "", msg))  # an API error may quote a credential
    if isinstance(exc, gexc.NotFound):
        return NotFound(
            f"{what}: not found.", "Check VLLM_SERVICE_NAME, GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION."
        )
    if isinstance(exc, gexc.PermissionDenied | gexc.Unauthenticated | gexc.Forbidden | gexc.Unauthorized):
        return UserFacingError(
            f"{what}: permission denied ({msg}).",
            "Grant the bot's service account roles/run.developer (and roles/iam.serviceAccountUser to deploy).",
        )
    if isinstance(exc, gexc.Conflict | gexc.AlreadyExists | gexc.Aborted):
        return UserFacingError(f"{what}: conflict ({msg}).", "Another change is in progress; try again in a minute.")
    if isinstance(exc, gexc.TooManyRequests | gexc.ResourceExhausted):
        return UserFacingError(
            f"{what}: quota or rate limit ({msg}).",
            "For GPUs, request Cloud Run GPU quota for the region (IAM & Admin > Quotas); otherwise retry shortly.",
        )
    if isinstance(exc, gexc.InvalidArgument | gexc.BadRequest | gexc.FailedPrecondition):
        return UserFacingError(
            f"{what}: Cloud Run rejected the request ({msg}).", "Fix the setting it names and re-plan."
        )
    if isinstance(exc, gexc.ServerError):
        return UserFacingError(
            f"{what}: Cloud Run had a server error ({msg}).", "Retry in a minute; check status.cloud.google.com."
        )
    return UserFacingError(f"{what}: {msg}")


def _cond(c: Any) -> Condition:
    return Condition(type=c.type_, state=c.state.name if c.state else "", reason=_reason(c), message=c.message)


def _reason(c: Any) -> str:
    # A condition carries one of three reason oneofs; whichever is set is the one that explains it.
    for attr in ("reason", "revision_reason", "execution_reason"):
        val = getattr(c, attr, None)
        if val:
            return str(val.name)
    return ""


def service_to_info(svc: run_v2.Service) -> ServiceInfo:
    from google.cloud import run_v2

    tmpl = svc.template
    container = tmpl.containers[0] if tmpl.containers else None
    limits = dict(container.resources.limits) if container else {}
    tc = _cond(svc.terminal_condition) if svc.terminal_condition.type_ else None
    ready: bool | None = None
    if tc is not None:
        ready = tc.state == "CONDITION_SUCCEEDED" if tc.state != "CONDITION_RECONCILING" else None
    # Service-level scaling overrides the template's when set; report what is in force.
    min_i = svc.scaling.min_instance_count or tmpl.scaling.min_instance_count
    max_i = tmpl.scaling.max_instance_count or svc.scaling.max_instance_count
    return ServiceInfo(
        name=svc.name.rsplit("/", 1)[-1],
        uri=svc.uri,
        ready=ready,
        terminal_condition=tc,
        conditions=[_cond(c) for c in svc.conditions],
        latest_created_revision=svc.latest_created_revision.rsplit("/", 1)[-1],
        latest_ready_revision=svc.latest_ready_revision.rsplit("/", 1)[-1],
        min_instances=min_i,
        max_instances=max_i,
        gpu_type=tmpl.node_selector.accelerator,
        gpu_count=int(limits.get("nvidia.com/gpu", "0") or 0),
        cpu=limits.get("cpu", ""),
        memory=limits.get("memory", ""),
        image=container.image if container else "",
        concurrency=tmpl.max_instance_request_concurrency,
        args=list(container.args) if container else [],
        traffic=[
            TrafficTarget(
                revision=t.revision.rsplit("/", 1)[-1],
                latest=t.type_ == run_v2.TrafficTargetAllocationType.TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST,
                percent=t.percent,
                tag=t.tag,
                uri=getattr(t, "uri", ""),  # TrafficTargetStatus has it; a spec's TrafficTarget does not
            )
            for t in svc.traffic_statuses or svc.traffic
        ],
        requires_auth=not svc.invoker_iam_disabled,
        update_time=svc.update_time if svc.update_time else None,
        spec=json.loads(run_v2.Service.to_json(svc)),
    )


# RevisionTemplate fields a v2 Revision also carries (run_v2.RevisionTemplate vs run_v2.Revision): the
# configuration the revision runs. Labels and annotations are left out: Cloud Run adds its own to a revision.
REVISION_TEMPLATE_FIELDS = (
    "scaling", "vpcAccess", "timeout", "serviceAccount", "containers", "volumes", "executionEnvironment",
    "encryptionKey", "encryptionKeyRevocationAction", "encryptionKeyShutdownDuration", "serviceMesh",
    "sessionAffinity", "nodeSelector", "gpuZonalRedundancyDisabled", "maxInstanceRequestConcurrency",
)  # fmt: skip


def revision_to_info(
    rev: run_v2.Revision, traffic: dict[str, int] | None = None, tags: dict[str, dict[str, str]] | None = None
) -> RevisionInfo:
    from google.cloud import run_v2

    ready_cond = next((c for c in rev.conditions if c.type_ == "Ready"), None)
    ready = None
    reason = message = ""
    if ready_cond is not None:
        state = ready_cond.state.name
        ready = True if state == "CONDITION_SUCCEEDED" else (False if state == "CONDITION_FAILED" else None)
        reason, message = _reason(ready_cond), ready_cond.message
    short = rev.name.rsplit("/", 1)[-1]
    return RevisionInfo(
        name=short,
        ready=ready,
        reason=reason,
        message=message,
        create_time=rev.create_time if rev.create_time else None,
        ready_at=ready_cond.last_transition_time if ready and ready_cond and ready_cond.last_transition_time else None,
        image=rev.containers[0].image if rev.containers else "",
        traffic_percent=(traffic or {}).get(short, 0),
        tags=(tags or {}).get(short, {}),
        template={k: v for k, v in json.loads(run_v2.Revision.to_json(rev)).items() if k in REVISION_TEMPLATE_FIELDS},
    )


class CloudRunRuntime:
    """Clients are built on first use, so the bot starts (and non-cloud commands work) without credentials."""

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        retry_budget_s: float = 120.0,
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._sleep = sleep
        self.retry_budget_s = retry_budget_s
        self._services: run_v2.ServicesClient | None = None
        self._revisions: run_v2.RevisionsClient | None = None
        self._project = ""
        self._pool = BlockingPool("Cloud Run", settings.cloud_client_threads)
        # Reads: one attempt per call with the deadline as its timeout (threads cannot be killed); `_read`'s
        # tenacity loop is the only retry policy, so the library's own retry is off.
        self._read_opts: dict[str, Any] = {"retry": None, "timeout": settings.cloud_call_deadline_s}
        self._write_opts: dict[str, Any] = {"retry": None, "timeout": settings.cloud_call_deadline_s}  # no replays

    async def aclose(self) -> None:
        """Drop queued calls; a running one ends at its own deadline."""
        self._pool.shutdown()

    def _clients(self) -> tuple[run_v2.ServicesClient, run_v2.RevisionsClient]:
        from google.cloud import run_v2

        if self._services is None or self._revisions is None:
            creds, project = cloud_credentials(self._settings)
            opts = (
                ClientOptions(api_endpoint=self._settings.cloud_run_api_endpoint)
                if self._settings.cloud_run_api_endpoint
                else None
            )
            self._services = run_v2.ServicesClient(credentials=creds, transport="rest", client_options=opts)
            self._revisions = run_v2.RevisionsClient(credentials=creds, transport="rest", client_options=opts)
            self._project = project
        return self._services, self._revisions

    def service_path(self, name: str) -> str:
        check_service_name(name)  # before any client call: the name becomes part of the API path
        self._clients()
        return f"projects/{self._project}/locations/{self._settings.google_cloud_location}/services/{name}"

    async def _call(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return await self._pool.run(fn)
        except gexc.GoogleAPICallError as exc:
            raise explain_api_error(exc, what) from None
        except gexc.RetryError as exc:
            raise UserFacingError(f"{what}: Cloud Run did not answer in time ({exc}).", "Retry shortly.") from None

    async def _read(self, what: str, fn: Callable[[], T]) -> T:
        """An idempotent read, retried on transient failures within `retry_budget_s` (skills/retrying.py)."""
        policy = RetryPolicy(
            what=f"Cloud Run: {what}",
            transient=is_transient,
            budget_s=self.retry_budget_s,
            initial_s=1.0,
            max_s=30.0,
            clock=self._clock,
            sleep=self._sleep,
            log=log,
        )
        try:
            return await retry_call(policy, lambda: self._pool.run(fn))
        except gexc.GoogleAPICallError as exc:
            err = explain_api_error(exc, what)
            if is_transient(exc):
                raise TransientCloudError(err.message, err.hint) from None
            raise err from None
        except gexc.RetryError as exc:
            raise TransientCloudError(f"{what}: Cloud Run did not answer in time ({exc}).", "Retry shortly.") from None
        except OSError as exc:
            raise TransientCloudError(f"{what}: Cloud Run could not be reached ({exc}).", "Retry shortly.") from None

    async def get_service(self, name: str) -> ServiceInfo:
        services, _ = self._clients()
        path = self.service_path(name)
        svc = await self._read(f"service {name}", lambda: services.get_service(name=path, **self._read_opts))
        return service_to_info(svc)

    async def get_service_spec(self, name: str) -> dict[str, Any] | None:
        try:
            return (await self.get_service(name)).spec
        except NotFound:
            return None

    async def list_revisions(self, service: str, limit: int = 10) -> list[RevisionInfo]:
        services, revisions = self._clients()
        path = self.service_path(service)
        svc = await self._read(f"service {service}", lambda: services.get_service(name=path, **self._read_opts))
        # A revision may appear more than once (at 100%, and again under a tag at 0%): its shares add up.
        traffic: dict[str, int] = {}
        tags: dict[str, dict[str, str]] = {}
        for t in svc.traffic_statuses:
            short = t.revision.rsplit("/", 1)[-1]
            traffic[short] = traffic.get(short, 0) + t.percent
            if t.tag:
                tags.setdefault(short, {})[t.tag] = t.uri
        revs = await self._read(
            f"revisions of {service}",
            lambda: list(
                revisions.list_revisions(request={"parent": path, "page_size": min(limit, 100)}, **self._read_opts)
            ),
        )
        revs.sort(key=lambda r: r.create_time, reverse=True)
        return [revision_to_info(r, traffic, tags) for r in revs[:limit]]

    async def get_revision(self, service: str, revision: str) -> RevisionInfo:
        _, revisions = self._clients()
        path = f"{self.service_path(service)}/revisions/{revision}"
        rev = await self._read(f"revision {revision}", lambda: revisions.get_revision(name=path, **self._read_opts))
        return revision_to_info(rev)

    async def apply_service(self, name: str, spec: dict[str, Any], *, create: bool) -> str:

        services, _ = self._clients()
        body = strip_output_only(spec)
        svc = _parse_service(body)
        if create:
            parent = self.service_path(name).rsplit("/services/", 1)[0]
            svc.name = ""
            op = await self._call(
                f"create service {name}",
                lambda: services.create_service(parent=parent, service=svc, service_id=name, **self._write_opts),
            )
        else:
            current = await self.get_service_spec(name)
            if current is not None:
                body = keep_unmanaged(current, body)
                svc = _parse_service(body)
            svc.name = self.service_path(name)
            op = await self._call(
                f"update service {name}", lambda: services.update_service(service=svc, **self._write_opts)
            )
        return str(op.operation.name)

    async def wait_operation(self, operation: str, timeout_s: float) -> OperationProgress:
        """Poll the operation once or until done/timeout; callers loop to report progress between polls."""
        services, _ = self._clients()
        deadline = self._clock() + timeout_s
        while True:
            op = await self._read("operation", lambda: services.get_operation({"name": operation}, **self._read_opts))
            if op.done:
                err = op.error.message if op.HasField("error") else ""
                return OperationProgress(done=True, phase="failed" if err else "done", error=err)
            if self._clock() >= deadline:
                return OperationProgress(done=False, phase="running")
            await self._sleep(min(2.0, max(0.05, deadline - self._clock())))

    async def delete_service(self, name: str) -> str:
        services, _ = self._clients()
        path = self.service_path(name)
        op = await self._call(f"delete service {name}", lambda: services.delete_service(name=path, **self._write_opts))
        return str(op.operation.name)


def _parse_service(body: dict[str, Any]) -> run_v2.Service:
    """The spec as the API's message, strictly: a misspelled field is an error the approver sees, never a field
    dropped on the way (the plan's diff would show the typo while Cloud Run got the default)."""
    from google.cloud import run_v2
    from google.protobuf import json_format

    try:
        return run_v2.Service.from_json(json.dumps(body))
    except json_format.ParseError as exc:
        raise InvalidInput(
            f"The service spec has a field Cloud Run does not know: {exc}", "Nothing was changed; fix the spec."
        ) from None
