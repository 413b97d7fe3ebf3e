"""The ACA metrics adapter (bot/adapters/aca_metrics.py) on azure-mgmt-monitor's real async client against the Azure
Monitor metrics stand-in (bot/sandbox/aca_metrics_api.py) on the ARM stand-in's host over HTTPS: Replicas follows
the revision's replicas as they scale from zero and back, Requests counts what went through the replicas' ingress,
and what ACA or Azure Monitor lacks is refused as they refuse it."""

from __future__ import annotations

import json
import math
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

import httpx
import pytest
from azure.core.exceptions import HttpResponseError

from bot.adapters import aca_metrics
from bot.adapters.aca_metrics import AcaMetric, AcaMetrics, grain, iso_duration
from bot.adapters.container_apps import StaticTokenCredential
from bot.sandbox.aca_api import _EPOCH, PROVISION_S
from bot.sandbox.aca_metrics_api import AcaMetricsStandIn
from bot.sandbox.aca_replicas import startup_s
from skills.errors import NotFound, UserFacingError
from skills.observe.service_metrics import service_metrics
from tests.aca_fixtures import A100, RG, SUB, Aca, aca_env, app_body


@dataclass
class Env:
    aca: Aca
    metrics: AcaMetrics


@asynccontextmanager
async def metrics_env() -> AsyncIterator[Env]:
    async with aca_env() as aca:
        AcaMetricsStandIn(aca.standin, aca.replicas, now=aca.clock.now).install()
        metrics = AcaMetrics(
            SUB,
            RG,
            credential=StaticTokenCredential(),
            base_url=aca.url,
            connection_verify=aca.ca,
            now=lambda: _EPOCH + timedelta(seconds=aca.clock.now()),
        )
        try:
            yield Env(aca, metrics)
        finally:
            await metrics.aclose()


async def _get(env: Env, path: str) -> httpx.Response:
    url = f"{env.aca.replicas.base_url}/apps/{env.aca.standin.fqdn('gemma')}{path}"
    async with httpx.AsyncClient() as client:
        return await client.get(url)


# Minutes a replica of the fixture's revision takes to answer (its start as the sandbox derives it), whole.
START_MIN = math.ceil(startup_s(app_body("")["properties"]["template"], A100) / 60)
SPAN = 2 + START_MIN + 10  # the minutes scale_from_zero plays


async def scale_from_zero(env: Env) -> str:
    """A min-0 revision: provisioned, it starts a replica (a new revision is ready when one of its replicas is);
    one request at 2 min gets a 503 while vLLM loads, three are answered START_MIN later, none after; the 300 s
    cooldown ends 5 min after them. Time ends 10 min after them."""
    handle = await env.aca.api.begin_put_app("gemma", app_body(env.aca.env_id(), min_replicas=0, suffix="one"))
    env.aca.clock.advance(PROVISION_S)
    assert (await env.aca.done(handle)).status == "Succeeded"
    env.aca.clock.advance(120 - PROVISION_S)
    assert (await _get(env, "/health")).status_code == 503  # no replica up yet: ACA's ingress answers 503
    env.aca.clock.advance(START_MIN * 60)
    for _ in range(3):
        assert (await _get(env, "/v1/models")).status_code == 200
    env.aca.clock.advance(600)
    return "gemma--one"


def _by_minute(series: list[aca_metrics.MetricSeries]) -> dict[int, float]:
    """Minute of the interval (0 = the first after the epoch) -> value, over all series."""
    out: dict[int, float] = {}
    for s in series:
        for p in s.points:
            minute = int((p.at - _EPOCH).total_seconds() // 60) - 1  # stamped at the interval's end
            out[minute] = out.get(minute, 0.0) + p.value
    return out


async def test_replicas_follow_the_revisions_replica_count() -> None:
    async with metrics_env() as env:
        rev = await scale_from_zero(env)
        series = await env.metrics.series("gemma", "container/instance_count", SPAN)
        assert [s.labels for s in series] == [{"revision_name": rev}]
        assert [p.at - _EPOCH for p in series[0].points][:2] == [timedelta(minutes=1), timedelta(minutes=2)]
        by_minute = _by_minute(series)
        # one from the revision's provisioning (minute 0) to the cooldown's end, none after
        lived = [1] * (2 + START_MIN + 5) + [0] * 5
        assert [by_minute[m] for m in range(SPAN)] == lived
        one = await env.metrics.series("gemma", "container/instance_count", SPAN, revision=rev)
        assert [_by_minute(one)[m] for m in range(SPAN)] == lived
        other = await env.metrics.series("gemma", "container/instance_count", SPAN, revision="gemma--other")
        assert other and set(_by_minute(other).values()) == {0}


async def test_requests_count_what_went_through_ingress_by_code_class() -> None:
    async with metrics_env() as env:
        rev = await scale_from_zero(env)
        series = await env.metrics.series("gemma", "request_count", SPAN)
        by_class = {s.labels["response_code_class"]: s for s in series}
        assert set(by_class) == {"2xx", "5xx"}
        # rates per second, as Cloud Run's request_count is read: 3 answered once up, one 503 in minute 2
        assert {m: round(v * 60) for m, v in _by_minute([by_class["2xx"]]).items() if v} == {2 + START_MIN: 3}
        assert {m: round(v * 60) for m, v in _by_minute([by_class["5xx"]]).items() if v} == {2: 1}
        only = await env.metrics.series("gemma", "request_count", SPAN, revision=rev)
        assert sum(p.value for s in only for p in s.points) * 60 == pytest.approx(4)

        status = await service_metrics(env.metrics, "gemma", minutes=SPAN)
        figures = {f.metric: f for f in status.figures}
        assert figures["request_count"].peak == pytest.approx(3 / 60)
        assert figures["container/instance_count"].peak == 1
        assert "no GPU utilisation metric" in figures["container/gpu/utilizations"].error
        assert "no request latency metric" in figures["request_latencies"].error
        assert figures["container/memory/utilizations"].text() == "no data"  # listed by Azure, not simulated


async def test_an_unknown_metric_is_refused_as_azure_monitor_refuses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    async with metrics_env() as env:
        await scale_from_zero(env)
        with pytest.raises(HttpResponseError) as caught:
            await env.metrics._monitor().metrics.list(
                env.metrics.resource_uri("gemma"), metricnames="GpuUtilization", aggregation="Average"
            )
        assert caught.value.status_code == 400 and caught.value.response is not None
        body = json.loads(caught.value.response.text())
        assert body["code"] == "BadRequest"
        assert body["message"].startswith(
            "Failed to find metric configuration for provider: Microsoft.App, resource Type: containerApps, "
            "metric: GpuUtilization, Valid metrics: CoresQuotaUsed,CpuPercentage,"
        )
        monkeypatch.setitem(aca_metrics.MAPPING, "request_count", AcaMetric("GpuUtilization", "Average"))
        with pytest.raises(UserFacingError, match="Failed to find metric configuration"):
            await env.metrics.series("gemma", "request_count", 14)
        with pytest.raises(NotFound, match="ResourceNotFound"):
            await env.metrics.series("nothing", "container/instance_count", 14)
        with pytest.raises(UserFacingError, match="not per revision"):
            await env.metrics.series("gemma", "container/memory/utilizations", 14, revision="gemma--one")


async def test_the_standin_refuses_what_azure_monitor_would() -> None:
    async with metrics_env() as env:
        await scale_from_zero(env)
        base = f"{env.aca.url}/{env.metrics.resource_uri('gemma')}/providers/Microsoft.Insights/metrics"
        auth = {"Authorization": "Bearer sandbox-token"}
        ok = {"api-version": "2024-02-01", "metricnames": "Requests", "aggregation": "Total", "interval": "PT1M"}
        async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=env.aca.ca)) as client:
            got = await client.get(base, params=ok, headers=auth)
            assert got.status_code == 200 and got.json()["value"][0]["unit"] == "Count"
            for bad in (
                {"interval": "PT2M"},  # not a time grain
                {"aggregation": "Count,Median"},
                {"$filter": "podname eq '*'"},  # dimension names are exact
                {"$filter": "statusCodeCategory ne '2xx'"},
                {"api-version": "2018-01-01"},
                {"timespan": "yesterday"},
                {"resultType": "Data", "unexpected": "1"},
            ):
                refused = await client.get(base, params={**ok, **bad}, headers=auth)
                assert refused.status_code == 400, bad
                assert refused.json()["code"] == "BadRequest", bad
            assert (await client.get(base, params=ok)).status_code == 401
            slashed = await client.get(base.replace("/subscriptions", "//subscriptions"), params=ok, headers=auth)
            assert slashed.status_code == 404  # the SDK's path is /{resourceUri}: the adapter gives it without a slash


def test_intervals_are_azure_monitor_time_grains() -> None:
    assert [iso_duration(grain(m)) for m in (5, 30, 60, 180, 600, 1440 * 3)] == [
        "PT1M",
        "PT1M",
        "PT5M",
        "PT15M",
        "PT30M",
        "PT6H",
    ]
