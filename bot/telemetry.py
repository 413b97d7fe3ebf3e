"""Prometheus metrics for the bot itself, in a registry per app (so tests and benches can build many apps)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram


class Telemetry:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.http_requests = Counter(
            "gemma_sre_http_requests_total",
            "HTTP requests by route and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.http_latency = Histogram(
            "gemma_sre_http_request_seconds",
            "HTTP request latency by route",
            ["route"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.commands = Counter(
            "gemma_sre_commands_total", "/gemma subcommands by outcome", ["command", "outcome"], registry=self.registry
        )
        self.command_latency = Histogram(
            "gemma_sre_command_seconds",
            "time to finish a /gemma subcommand (after the ack)",
            ["command"],
            registry=self.registry,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800),
        )
