"""`gemma-sre setup-alerts`: the notification channel and the Cloud Monitoring alert policies that feed the bot.

Run by `./dev setup` (bot/deploy/setup_gcp.sh) once the bot's URL is known, or by hand. Safe to run again: what
exists and matches is left alone. Exit codes: 0 done (or a dry run that could ask everything), 1 a call failed
(or a dry run could not ask some questions: it says which), 2 bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

_EPILOG = (
    "endpoint: CLOUD_MONITORING_API_ENDPOINT overrides Google's (a 127.0.0.1 one is plain-text gRPC, for stand-ins)"
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "setup-alerts",
        help="create the Cloud Monitoring alert policies (and their notification channel) that feed the bot",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--project", required=True, help="the Google Cloud project of the vLLM service")
    p.add_argument("--service", default="vllm-gemma4", help="the Cloud Run service serving vLLM")
    target = p.add_mutually_exclusive_group()
    target.add_argument(
        "--webhook-url",
        help="https://BOT_URL/alerts/gcp?auth_token=TOKEN (webhook alerts; default: $ALERT_WEBHOOK_URL, which keeps "
        "the token out of the process list)",
    )
    target.add_argument("--pubsub-topic", help="projects/P/topics/T (Pub/Sub alerts)")
    p.add_argument("--kv-cache-usage", metavar="F", type=float, default=0.85, help="KV-cache fraction (0.85)")
    p.add_argument("--waiting-for-s", metavar="S", type=int, default=30, help="requests waiting this long (30)")
    p.add_argument("--ttft-p95-s", metavar="S", type=float, default=5.0, help="p95 time to first token (5)")
    p.add_argument("--error-rate-per-s", metavar="R", type=float, default=0.05, help="5xx per second (0.05)")
    p.add_argument(
        "--kv-cache-metric", default="vllm:kv_cache_usage_perc", help="vllm:gpu_cache_usage_perc on old vLLM"
    )
    p.add_argument("--dry-run", action="store_true", help="ask only List questions; print what would change")
    p.set_defaults(func=run)


_NO_CREDENTIALS = "no Google credentials"


def _credentials_here(environ: Mapping[str, str]) -> bool:
    """Whether Application Default Credentials may exist, asked without the network: an explicit key file, gcloud's
    application-default file, Cloud Run, or a Google Compute Engine machine (whose metadata server may hold a
    service account; google-auth asks it only there, and so does this). The places google-auth looks:
    google/auth/_default.py, _cloud_sdk.py, compute_engine/_metadata.py (detect_gce_residency_linux)."""
    if environ.get("GOOGLE_APPLICATION_CREDENTIALS") or environ.get("K_SERVICE"):
        return True
    if environ.get("CLOUDSDK_CONFIG"):
        config = Path(environ["CLOUDSDK_CONFIG"])
    elif os.name == "nt":
        config = Path(environ.get("APPDATA", "")) / "gcloud"
    else:
        config = Path(environ.get("HOME") or Path.home()) / ".config" / "gcloud"
    if (config / "application_default_credentials.json").exists():
        return True
    try:
        return Path("/sys/class/dmi/id/product_name").read_text().strip().startswith("Google")
    except OSError:
        return False


def _clients(endpoint: str, anonymous: bool) -> tuple[Any, Any]:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import monitoring_v3

    if endpoint and endpoint.split("://", 1)[-1].split(":", 1)[0] in ("127.0.0.1", "localhost"):
        import grpc
        from google.cloud.monitoring_v3.services.alert_policy_service.transports import AlertPolicyServiceGrpcTransport
        from google.cloud.monitoring_v3.services.notification_channel_service.transports import (
            NotificationChannelServiceGrpcTransport,
        )

        channel = grpc.insecure_channel(endpoint.split("://", 1)[-1])
        return (
            monitoring_v3.NotificationChannelServiceClient(
                transport=NotificationChannelServiceGrpcTransport(channel=channel)
            ),
            monitoring_v3.AlertPolicyServiceClient(transport=AlertPolicyServiceGrpcTransport(channel=channel)),
        )
    from google.api_core.client_options import ClientOptions

    opts = ClientOptions(api_endpoint=endpoint) if endpoint else None
    creds = AnonymousCredentials() if anonymous else None  # type: ignore[no-untyped-call]
    return (
        monitoring_v3.NotificationChannelServiceClient(credentials=creds, client_options=opts),
        monitoring_v3.AlertPolicyServiceClient(credentials=creds, client_options=opts),
    )


def run(args: argparse.Namespace) -> int:
    from google.api_core import exceptions as gexc
    from google.auth.exceptions import DefaultCredentialsError

    from bot.deploy.alert_policies import AlertThresholds
    from bot.deploy.alert_setup import check_webhook_url, reconcile
    from skills.errors import explain_validation

    name = "gemma-sre setup-alerts"
    try:
        thresholds = AlertThresholds(
            kv_cache_usage=args.kv_cache_usage,
            waiting_for_s=args.waiting_for_s,
            ttft_p95_s=args.ttft_p95_s,
            error_rate_per_s=args.error_rate_per_s,
            kv_cache_metric=args.kv_cache_metric,
        )
    except ValidationError as exc:
        print(f"{name}: {explain_validation(exc)}", file=sys.stderr)
        return 2
    webhook_url = args.webhook_url or ("" if args.pubsub_topic else os.environ.get("ALERT_WEBHOOK_URL", "").strip())
    if not webhook_url and not args.pubsub_topic:
        print(f"{name}: say where alerts go: --webhook-url (or ALERT_WEBHOOK_URL) or --pubsub-topic", file=sys.stderr)
        return 2
    if webhook_url:
        problem = check_webhook_url(webhook_url)
        if problem:
            print(f"{name}: {problem}", file=sys.stderr)
            return 2
        kind, target = "webhook", webhook_url
    else:
        if not args.pubsub_topic.startswith(f"projects/{args.project}/topics/"):
            print(f"{name}: --pubsub-topic must be projects/{args.project}/topics/TOPIC", file=sys.stderr)
            return 2
        kind, target = "pubsub", args.pubsub_topic
    endpoint = os.environ.get("CLOUD_MONITORING_API_ENDPOINT", "").strip()
    anonymous = os.environ.get("GOOGLE_ANONYMOUS_CREDENTIALS", "").strip().lower() in ("1", "true", "yes")
    channels = policies = None
    # A dry run with no credentials still shows what it would create; it asks nothing (no network at all).
    if not (args.dry_run and not endpoint and not anonymous and not _credentials_here(os.environ)):
        try:
            channels, policies = _clients(endpoint, anonymous)
        except DefaultCredentialsError:
            if not args.dry_run:
                print(
                    f"{name}: no Google credentials: run `gcloud auth application-default login` "
                    "(or set GOOGLE_APPLICATION_CREDENTIALS), then run this again.",
                    file=sys.stderr,
                )
                return 2
    if channels is None or policies is None:
        print(
            f"   {_NO_CREDENTIALS} here (no GOOGLE_APPLICATION_CREDENTIALS, no `gcloud auth application-default "
            f"login`, not on Google Cloud): what exists in {args.project} was not asked. With credentials, a run "
            "creates what is missing of this:"
        )
    try:
        out = reconcile(
            project=args.project,
            service=args.service,
            channel_kind=kind,
            channel_target=target,
            thresholds=thresholds,
            channels=channels,
            policies=policies,
            dry_run=args.dry_run,
            unasked=_NO_CREDENTIALS,
        )
    except (gexc.GoogleAPICallError, gexc.RetryError) as exc:
        msg = getattr(exc, "message", None) or str(exc)
        print(f"{name}: Cloud Monitoring refused: {type(exc).__name__}: {msg}", file=sys.stderr)
        if isinstance(exc, gexc.PermissionDenied):
            print("  Grant yourself roles/monitoring.editor on the project, then run this again.", file=sys.stderr)
        return 1
    finally:
        for client in (channels, policies):
            if client is not None:
                client.transport.close()
    for line in out.lines:
        print(f"   {line}")
    summary = f"   alert policies: {out.created} to create, {out.updated} to update, {out.unchanged} unchanged"
    if not args.dry_run:
        summary = f"   alert policies: {out.created} created, {out.updated} updated, {out.unchanged} unchanged"
    print(summary)
    # The three vLLM conditions read series only Cloud Run's Prometheus sidecar writes; without it they stay quiet.
    print(
        f"   vLLM's conditions (KV cache, waiting requests, TTFT p95) see data once the Managed Service for "
        f"Prometheus sidecar scrapes vLLM's /metrics on {args.service} "
        "(https://cloud.google.com/run/docs/monitoring-managed-prometheus-sidecar); the bot's deploys add it "
        "with VLLM_METRICS_SIDECAR=true, and keep one the service has either way."
    )
    if out.unchecked:
        print("   The dry run could not check:")
        for what in out.unchecked:
            print(f"     - {what}")
        print("   so the lines above marked 'could not check' may already exist.")
        return 1
    return 0
