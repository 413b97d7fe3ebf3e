"""Serve a gRPC service on 127.0.0.1 (random port) for the sandbox's gRPC stand-ins (Monitoring, Pub/Sub)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager

import grpc


@contextmanager
def serve_grpc(service: str, methods: dict[str, grpc.RpcMethodHandler], workers: int = 4) -> Iterator[str]:
    """Yield '127.0.0.1:PORT' while `service` (its full proto name) answers `methods`; stop at once after."""
    with serve_grpc_services({service: methods}, workers) as target:
        yield target


@contextmanager
def serve_grpc_services(services: dict[str, dict[str, grpc.RpcMethodHandler]], workers: int = 4) -> Iterator[str]:
    """Several services on one server (as one Google endpoint serves several), each {method: handler}."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    server.add_generic_rpc_handlers(
        tuple(grpc.method_handlers_generic_handler(name, methods) for name, methods in services.items())
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        # stop() only starts the shutdown; waiting for it means no server thread is still running when the
        # process exits (gRPC threads racing the interpreter's finalization can crash the process at exit).
        server.stop(grace=None).wait(timeout=10)
