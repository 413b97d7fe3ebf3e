"""A minimal vLLM server stand-in: GET /health (200, empty body) and GET /v1/models, switchable to cold/failing."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


class ModelServerStandIn:
    def __init__(self, model_ids: tuple[str, ...] = ("google/gemma-4-12b-it",)) -> None:
        self.model_ids = list(model_ids)
        self.health_status = 200
        self.hits: list[str] = []
        self.app = Starlette(routes=[Route("/health", self._health), Route("/v1/models", self._models)])

    async def _health(self, request: Request) -> Response:
        self.hits.append("/health")
        return Response(status_code=self.health_status)

    async def _models(self, request: Request) -> Response:
        self.hits.append("/v1/models")
        if self.health_status != 200:
            return Response(status_code=self.health_status)
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "owned_by": "vllm", "max_model_len": 16384} for m in self.model_ids
                ],
            }
        )
