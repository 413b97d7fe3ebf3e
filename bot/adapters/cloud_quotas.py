"""QuotaReader port on the Cloud Quotas API through google-cloud-quotas (CloudQuotasClient.get_quota_info, REST
transport), a blocking client on its own threads.

A QuotaInfo's dimensions_infos are "ordered by their dimensions from more specific ones to less specific ones"
(cloudquotas_v1 types/resources.py): the region's own entry if there is one, else the entry without a region
dimension (the default for every region)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from google.api_core import exceptions as gexc
from google.api_core.client_options import ClientOptions

from bot.adapters.blocking import BlockingPool
from bot.adapters.google_auth import cloud_credentials
from bot.settings import Settings
from skills.logs.redact import redact
from skills.ports import PreflightUnavailable, QuotaRequest

_MAX_PREFERENCES = 500  # a project's preferences are a handful; stop paging somewhere


class CloudQuotas:
    def __init__(self, settings: Settings, pool: BlockingPool) -> None:
        self._settings = settings
        self._pool = pool
        self._client: Any = None
        self._project = ""

    def _quotas(self) -> Any:
        if self._client is None:
            from google.cloud import cloudquotas_v1  # a slow import a process may never need

            creds, self._project = cloud_credentials(self._settings)
            endpoint = self._settings.cloud_quotas_api_endpoint
            opts = ClientOptions(api_endpoint=endpoint) if endpoint else None
            self._client = cloudquotas_v1.CloudQuotasClient(credentials=creds, transport="rest", client_options=opts)
        return self._client

    async def quota_value(self, service: str, quota_id: str, region: str) -> int | None:
        return await self._pool.run(self._value, service, quota_id, region)

    async def quota_requests(self, service: str, quota_id: str) -> list[QuotaRequest]:
        return await self._pool.run(self._requests, service, quota_id)

    def _requests(self, service: str, quota_id: str) -> list[QuotaRequest]:
        client = self._quotas()
        out: list[QuotaRequest] = []
        with _explained(quota_id, service):
            pager = client.list_quota_preferences(
                parent=f"projects/{self._project}/locations/global", timeout=self._settings.preflight_io_timeout_s
            )
            for i, pref in enumerate(pager):
                if i >= _MAX_PREFERENCES:
                    break
                if pref.service != service or pref.quota_id != quota_id:
                    continue
                cfg = pref.quota_config
                out.append(
                    QuotaRequest(
                        region=pref.dimensions.get("region", ""),
                        preferred=int(cfg.preferred_value),
                        granted=int(cfg.granted_value) if "granted_value" in cfg else None,
                        pending=bool(pref.reconciling),
                        detail=redact(cfg.state_detail)[:200],
                    )
                )
        return out

    def _value(self, service: str, quota_id: str, region: str) -> int | None:
        client = self._quotas()
        name = f"projects/{self._project}/locations/global/services/{service}/quotaInfos/{quota_id}"
        with _explained(quota_id, service):
            info = client.get_quota_info(name=name, timeout=self._settings.preflight_io_timeout_s)
        default: int | None = None
        for d in info.dimensions_infos:
            # Cloud Run GPU quota is per region; Cloud TPU quota per zone (its `location` is then a zone).
            where = d.dimensions.get("region") or d.dimensions.get("zone")
            value = int(d.details.value) if "details" in d else None  # absent details: no value, not 0
            if where == region:
                return value
            if where is None and default is None:
                default = value
        return default


@contextlib.contextmanager
def _explained(quota_id: str, service: str) -> Iterator[None]:
    """The API's failures as PreflightUnavailable, saying why."""
    try:
        yield
    except (gexc.PermissionDenied, gexc.Forbidden):  # the REST transport raises an HTTP 403 as Forbidden
        raise PreflightUnavailable(
            "the Cloud Quotas API refused the bot (its service account needs roles/cloudquotas.viewer)."
        ) from None
    except gexc.NotFound:
        raise PreflightUnavailable(f"the Cloud Quotas API does not know `{quota_id}` of {service}.") from None
    except gexc.GoogleAPICallError as exc:
        raise PreflightUnavailable(f"the Cloud Quotas API answered {exc.code}: {redact(exc.message)[:200]}") from None
    except OSError as exc:
        raise PreflightUnavailable(f"cannot reach the Cloud Quotas API ({type(exc).__name__}).") from None
