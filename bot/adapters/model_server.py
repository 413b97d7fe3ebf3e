"""ModelServer port over httpx: the vLLM server's /health, /v1/models, /metrics and /tokenize."""

from __future__ import annotations

import time

import httpx

from bot.adapters.google_auth import IdentityTokens
from skills.errors import UserFacingError
from skills.ports import ProbeResult


class HttpModelServer:
    def __init__(self, tokens: IdentityTokens, timeout_s: float, api_key: str | None = None) -> None:
        self._tokens = tokens
        self._timeout = timeout_s
        self._api_key = api_key
        self._client = httpx.AsyncClient(timeout=timeout_s, follow_redirects=False)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _headers(self, base_url: str) -> dict[str, str]:
        headers = await self._tokens.header_for(base_url)
        if self._api_key and "Authorization" not in headers:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    async def _get(self, url: str, base_url: str) -> tuple[httpx.Response | None, ProbeResult]:
        t0 = time.perf_counter()
        try:
            resp = await self._client.get(url, headers=await self._headers(base_url))
        except httpx.TimeoutException:
            return None, ProbeResult(ok=False, latency_ms=_ms(t0), error=f"no answer within {self._timeout:g} s")
        except httpx.HTTPError as exc:
            return None, ProbeResult(ok=False, latency_ms=_ms(t0), error=f"{type(exc).__name__}: {exc}".strip(": "))
        ok = resp.status_code == 200
        err = "" if ok else f"HTTP {resp.status_code}"
        return resp, ProbeResult(ok=ok, status_code=resp.status_code, latency_ms=_ms(t0), error=err)

    async def health(self, base_url: str) -> ProbeResult:
        _, probe = await self._get(base_url.rstrip("/") + "/health", base_url)
        return probe

    async def models(self, base_url: str) -> tuple[list[str], ProbeResult]:
        resp, probe = await self._get(base_url.rstrip("/") + "/v1/models", base_url)
        if resp is None or not probe.ok:
            return [], probe
        try:
            data = resp.json().get("data", [])
            ids = [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]
        except (ValueError, AttributeError, KeyError):
            return [], probe.model_copy(
                update={"ok": False, "error": "/v1/models did not return the OpenAI list shape"}
            )
        return ids, probe

    async def metrics_text(self, base_url: str) -> str:
        resp, probe = await self._get(base_url.rstrip("/") + "/metrics", base_url)
        if resp is None or not probe.ok:
            raise UserFacingError(f"The model server's /metrics did not answer ({probe.error}).")
        return resp.text

    async def tokenize(self, base_url: str, model: str, prompt: str) -> list[int]:
        try:
            resp = await self._client.post(
                base_url.rstrip("/") + "/tokenize",
                json={"model": model, "prompt": prompt},
                headers=await self._headers(base_url),
            )
            resp.raise_for_status()
            return [int(t) for t in resp.json()["tokens"]]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise UserFacingError(f"The model server's /tokenize failed ({exc}).") from None


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 1)
