"""WeightStore port on Cloud Storage through google-cloud-storage (the JSON API's objects.list on a prefix),
a blocking client on its own threads."""

from __future__ import annotations

from google.api_core import exceptions as gexc

from bot.adapters.blocking import BlockingPool
from bot.adapters.google_auth import cloud_credentials
from bot.settings import Settings
from skills.logs.redact import redact
from skills.ports import PreflightUnavailable, WeightsListing

_MAX_NAMES = 200  # a checkpoint folder holds a few dozen files; enough to see config.json and the shards


class GcsWeights:
    def __init__(self, settings: Settings, pool: BlockingPool) -> None:
        self._settings = settings
        self._pool = pool
        self._client: object | None = None

    def _storage(self) -> object:
        if self._client is None:
            from google.cloud import storage  # type: ignore[attr-defined]  # slow; a process may never need it

            creds, project = cloud_credentials(self._settings)
            opts = (
                {"api_endpoint": self._settings.storage_api_endpoint} if self._settings.storage_api_endpoint else None
            )
            self._client = storage.Client(project=project, credentials=creds, client_options=opts)
        return self._client

    async def list_prefix(self, bucket: str, prefix: str) -> WeightsListing:
        return await self._pool.run(self._list, bucket, prefix)

    def _list(self, bucket: str, prefix: str) -> WeightsListing:
        client = self._storage()
        try:
            # One attempt: the library's default retry rides out a dead endpoint for up to 120 s, far past the
            # check's time limit; an unanswered check is asked again at the next plan (it is not cached).
            blobs = client.list_blobs(  # type: ignore[attr-defined]
                bucket, prefix=prefix, max_results=_MAX_NAMES, timeout=self._settings.preflight_io_timeout_s, retry=None
            )
            names = [b.name for b in blobs]
        except gexc.NotFound:
            return WeightsListing(state="no_bucket")
        except gexc.Forbidden as exc:
            return WeightsListing(state="denied", detail=redact(exc.message or "403")[:200])
        except gexc.GoogleAPICallError as exc:
            raise PreflightUnavailable(
                f"Cloud Storage answered {exc.code}: {redact(exc.message or '')[:200]}"
            ) from None
        except OSError as exc:  # requests' connection errors and timeouts
            raise PreflightUnavailable(f"cannot reach Cloud Storage ({type(exc).__name__}).") from None
        return WeightsListing(state="ok", names=names)
