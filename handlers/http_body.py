"""Reading a request body with a size cap that holds whatever Content-Length claims (or omits)."""

from __future__ import annotations

from starlette.requests import Request


class HttpProblem(Exception):
    """An HTTP answer to give instead of handling the request (status, message, optional headers)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


async def read_body(request: Request, limit: int) -> bytes:
    """The body, refusing (413) before reading it all when it is too big, whatever Content-Length claims."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            n = int(declared)
        except ValueError:
            raise HttpProblem(400, "invalid Content-Length header") from None
        if n > limit:
            raise HttpProblem(413, f"body of {n} bytes exceeds the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HttpProblem(413, f"body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
