"""`./dev setup` (bot/deploy/setup_gcp.sh) against a fake `gcloud` on PATH: the dry run asks only read-only
questions and prints every prerequisite in order; a real run issues exactly those commands; a second run on
an existing project creates nothing. And cloudbuild.yaml's env vars survive comma-separated values."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from bot.sandbox.monitoring_grpc import MonitoringStandIn, serve_monitoring

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bot" / "deploy" / "setup_gcp.sh"

FAKE_GCLOUD = r"""#!PYTHON
# A fake gcloud: records each call; read-only verbs answer from FAKE_GCLOUD_EXISTING (names, one a line).
# FAKE_GCLOUD_DENY=1 makes every read-only question fail as gcloud does without permission.
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_GCLOUD_LOG"], "a") as fh:
    fh.write(json.dumps(args) + "\n")
existing = set(open(os.environ["FAKE_GCLOUD_EXISTING"]).read().split())
words = [a for a in args if not a.startswith("-")]
if args[:2] == ["config", "get-value"]:
    print("fake-proj"); sys.exit(0)
asks = {"describe", "list", "access", "get-default-service-account"} & set(words)
if os.environ.get("FAKE_GCLOUD_DENY") and asks:
    cmd = ".".join(words[:3])
    print(f"ERROR: (gcloud.{cmd}) PERMISSION_DENIED: The caller does not have permission", file=sys.stderr)
    sys.exit(1)
if words[:2] == ["builds", "get-default-service-account"]:
    print("projects/p1/serviceAccounts/123456789-compute@developer.gserviceaccount.com"); sys.exit(0)
if words[:3] == ["run", "services", "describe"]:
    if "bot-deployed" in existing:
        print("https://gemma-sre-abc123-uc.a.run.app"); sys.exit(0)
    print(f"ERROR: (gcloud.run.services.describe) NOT_FOUND: service [{words[3]}]", file=sys.stderr)
    sys.exit(1)
if words[:4] == ["secrets", "versions", "access", "latest"]:
    secret = next(a.split("=", 1)[1] for a in args if a.startswith("--secret="))
    if secret + "@latest" in existing:
        print("tok-from-secret-manager", end=""); sys.exit(0)
    print(f"ERROR: NOT_FOUND: {secret}", file=sys.stderr); sys.exit(1)
if "describe" in words:
    name = words[words.index("describe") + 1] if len(words) > words.index("describe") + 1 else ""
    if words[:2] == ["projects", "describe"]:
        print("123456789"); sys.exit(0)
    if words[:2] == ["secrets", "versions"]:
        name = next(a.split("=", 1)[1] for a in args if a.startswith("--secret=")) + "@latest"
    if name.split("@")[0] in existing or name in existing:
        print("10.1.2.3" if "redis" in words else name); sys.exit(0)
    print(f"ERROR: NOT_FOUND: {name}", file=sys.stderr); sys.exit(1)
if "versions" in words and "add" in words:
    sys.stdin.read()
sys.exit(0)
"""

# Flags each mutating command may carry, as `gcloud <command> --help` (SDK 528.0.0) lists them.
ALLOWED = {
    "services enable": {"--project"},
    "artifacts repositories create": {"--repository-format", "--location", "--description", "--project"},
    "iam service-accounts create": {"--display-name", "--project"},
    "projects add-iam-policy-binding": {"--member", "--role", "--condition", "--quiet"},
    "secrets create": {"--replication-policy", "--project"},
    "secrets versions add": {"--data-file", "--project"},
    "redis instances create": {
        "--region",
        "--size",
        "--tier",
        "--redis-version",
        "--network",
        "--connect-mode",
        "--project",
    },
    "compute networks vpc-access connectors create": {
        "--region",
        "--network",
        "--range",
        "--min-instances",
        "--max-instances",
        "--project",
    },
    "pubsub topics create": {"--project"},
    "pubsub subscriptions create": {"--topic", "--ack-deadline", "--project"},
    "pubsub subscriptions add-iam-policy-binding": {"--member", "--role", "--project"},
    "iam service-accounts add-iam-policy-binding": {"--member", "--role", "--project"},
    "pubsub topics add-iam-policy-binding": {"--member", "--role", "--project"},
}
READ_ONLY = ("describe", "list", "get-value", "get-default-service-account", "access")


@pytest.fixture
def monitoring() -> Iterator[tuple[MonitoringStandIn, str]]:
    """The strict Cloud Monitoring stand-in that `gemma-sre setup-alerts` (run by the script) talks to."""
    standin = MonitoringStandIn()
    with serve_monitoring(standin) as addr:
        yield standin, addr


@pytest.fixture
def fake(tmp_path: Path, monitoring: tuple[MonitoringStandIn, str]) -> dict[str, Any]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gcloud = bin_dir / "gcloud"
    gcloud.write_text(FAKE_GCLOUD.replace("PYTHON", sys.executable, 1))
    gcloud.chmod(0o755)
    (tmp_path / "existing").write_text("")
    return {
        "bin": bin_dir,
        "log": tmp_path / "calls.jsonl",
        "existing": tmp_path / "existing",
        "monitoring": monitoring[0],
        "endpoint": monitoring[1],
    }


def setup(fake: dict[str, Any], *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    fake["log"].write_text("")
    full_env = {
        "PATH": f"{fake['bin']}:{os.environ['PATH']}",
        "HOME": str(fake["bin"].parent),
        "FAKE_GCLOUD_LOG": str(fake["log"]),
        "FAKE_GCLOUD_EXISTING": str(fake["existing"]),
        "CLOUD_MONITORING_API_ENDPOINT": fake["endpoint"],
        **env,
    }
    run = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=full_env, timeout=120)
    calls = [json.loads(line) for line in fake["log"].read_text().splitlines()]
    return run, calls


def printed(out: str) -> list[list[str]]:
    return [shlex.split(line[2:])[1:] for line in out.splitlines() if line.startswith("+ gcloud ")]


def command_of(argv: list[str]) -> str:
    for n in (5, 4, 3, 2):
        key = " ".join(argv[:n])
        if key in ALLOWED:
            return key
    raise AssertionError(f"unexpected gcloud command: {argv}")


def test_dry_run_on_a_fresh_project_prints_everything_in_order_and_changes_nothing(fake: dict[str, Any]) -> None:
    run, calls = setup(fake, "--project", "p1", "--alerts", "pubsub", "--dry-run")
    assert run.returncode == 0, run.stderr
    assert all(any(v in c for v in READ_ONLY) for c in calls), "the dry run changed something"
    cmds = [c for c in printed(run.stdout) if c[:3] != ["secrets", "versions", "add"]]
    order = [command_of(c) for c in cmds]
    firsts = list(dict.fromkeys(order))
    assert firsts == [
        "services enable",
        "artifacts repositories create",
        "iam service-accounts create",
        "projects add-iam-policy-binding",
        "iam service-accounts add-iam-policy-binding",
        "secrets create",
        "redis instances create",
        "compute networks vpc-access connectors create",
        "pubsub topics create",
        "pubsub subscriptions create",
        "pubsub subscriptions add-iam-policy-binding",
        "pubsub topics add-iam-policy-binding",
    ]
    for argv in cmds:
        flags = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
        assert flags <= ALLOWED[command_of(argv)], (argv, flags - ALLOWED[command_of(argv)])
    enable = cmds[0]
    for api in ("run", "artifactregistry", "secretmanager", "redis", "vpcaccess", "pubsub", "cloudbuild"):
        assert f"{api}.googleapis.com" in enable
    roles = [a.split("=", 1)[1] for c in cmds for a in c if a.startswith("--role=")]
    assert "roles/secretmanager.secretAccessor" in roles and "roles/pubsub.subscriber" in roles
    secrets = [c[2] for c in cmds if c[:2] == ["secrets", "create"]]
    assert secrets == ["hf-token", "slack-bot-token", "slack-signing-secret", "alert-webhook-token"]
    publisher = next(c for c in cmds if c[:3] == ["pubsub", "topics", "add-iam-policy-binding"])
    assert (
        "--member=serviceAccount:service-123456789@gcp-sa-monitoring-notification.iam.gserviceaccount.com" in publisher
    )
    assert "Slack app (http mode)" in run.stdout and "gcloud builds submit" in run.stdout
    # Pub/Sub alerts: the channel and the policies come from the Python step, asked in the dry run too
    assert (
        "gemma-sre setup-alerts --project=p1 --service=vllm-gemma4 --dry-run --pubsub-topic=projects/p1/topics/"
        in run.stdout
    )
    assert (
        run.stdout.count("would create alert policy") == 6 and "would create notification channel pubsub" in run.stdout
    )
    assert fake["monitoring"].alerting.policies == {}


def test_real_run_issues_the_printed_commands_and_a_rerun_creates_nothing(fake: dict[str, Any]) -> None:
    dry, _ = setup(fake, "--project", "p1", "--dry-run")
    assert [c for c in fake["monitoring"].alerting.calls if not c.startswith("List")] == []  # previewed, no more
    fake["monitoring"].alerting.calls.clear()
    run, calls = setup(fake, "--project", "p1", HF_TOKEN="hf_secret_value_123\n")
    assert run.returncode == 0, run.stderr
    mutations = [c for c in calls if not any(v in c for v in READ_ONLY)]
    expected = printed(dry.stdout)
    for name in ("hf-token", "alert-webhook-token"):  # the HF token from the environment; the alert token made here
        expected.insert(
            expected.index(["secrets", "create", name, "--replication-policy=automatic", "--project=p1"]) + 1,
            ["secrets", "versions", "add", name, "--data-file=-", "--project=p1"],
        )
    assert mutations == expected
    assert "hf_secret_value_123" not in run.stdout + run.stderr
    assert "The bot has no URL yet" in run.stdout  # webhook alerts wait for the first deploy
    assert fake["monitoring"].alerting.calls == []

    fake["existing"].write_text(
        "gemma-sre gemma-sre-bot@p1.iam.gserviceaccount.com hf-token hf-token@latest slack-bot-token "
        "slack-bot-token@latest slack-signing-secret slack-signing-secret@latest alert-webhook-token "
        "alert-webhook-token@latest gemma-sre-redis gemma-sre-connector bot-deployed\n"
    )
    again, calls = setup(fake, "--project", "p1")
    assert again.returncode == 0, again.stderr
    created = [c for c in calls if "create" in c]
    assert created == [], created
    assert "redis://10.1.2.3:6379/0" in again.stdout
    # now the bot has a URL: the webhook channel (token from Secret Manager, never printed) and the policies
    alerting = fake["monitoring"].alerting
    (channel,) = alerting.channels.values()
    assert channel.type_ == "webhook_tokenauth"
    assert (
        channel.labels["url"] == "https://gemma-sre-abc123-uc.a.run.app/alerts/gcp?auth_token=tok-from-secret-manager"
    )
    assert len(alerting.policies) == 6
    assert "tok-from-secret-manager" not in again.stdout + again.stderr
    assert "/alerts/gcp?auth_token=<alert-webhook-token>" in again.stdout
    assert "put https://gemma-sre-abc123-uc.a.run.app/slack/events as the request URL" in again.stdout

    before = dict(alerting.policies)
    alerting.calls.clear()
    third, _ = setup(fake, "--project", "p1")
    assert third.returncode == 0, third.stderr
    assert [c for c in alerting.calls if not c.startswith("List")] == []  # a second run changes nothing
    assert alerting.policies == before and "0 created, 0 updated, 7 unchanged" in third.stdout


def test_socket_mode_and_direct_vpc_egress(fake: dict[str, Any]) -> None:
    run, _ = setup(fake, "--project", "p1", "--slack", "socket", "--egress", "direct", "--dry-run")
    assert run.returncode == 0, run.stderr
    cmds = printed(run.stdout)
    secrets = [c[2] for c in cmds if c[:2] == ["secrets", "create"]]
    assert "slack-app-token" in secrets and "slack-signing-secret" not in secrets
    assert not any(c[:4] == ["compute", "networks", "vpc-access", "connectors"] for c in cmds)
    assert "vpcaccess.googleapis.com" not in cmds[0]
    assert "connections:write" in run.stdout
    line = next(x for x in run.stdout.splitlines() if "--substitutions=" in x)
    parsed = gcloud_dict(shlex.split(line)[0].split("=", 1)[1])
    assert parsed["_VPC_FLAG"] == "--subnet=default" and parsed["_DEPLOYERS"] == ""
    assert gcloud_dict(parsed["_SECRETS"])["SLACK_APP_TOKEN"] == "slack-app-token:latest"
    # the bot gets the HF token too (preflight checks the checkpoint with it) and may read GPU quota
    assert gcloud_dict(parsed["_SECRETS"])["HF_TOKEN"] == "hf-token:latest"
    assert "cloudquotas.googleapis.com" in cmds[0]
    assert any("--role=roles/cloudquotas.viewer" in c for c in cmds)


def test_no_example_ids_in_printed_commands(fake: dict[str, Any]) -> None:
    run, _ = setup(fake, "--project", "p1", "--dry-run")
    assert "U012ABC" not in run.stdout and "U034DEF" not in run.stdout
    assert "_DEPLOYERS is empty: nobody may confirm a write" in run.stdout
    mine, _ = setup(fake, "--project", "p1", "--dry-run", DEPLOYER_USER_IDS="U0REAL1,U0REAL2")
    line = next(x for x in mine.stdout.splitlines() if "--substitutions=" in x)
    assert gcloud_dict(shlex.split(line)[0].split("=", 1)[1])["_DEPLOYERS"] == "U0REAL1,U0REAL2"
    assert "_DEPLOYERS is empty" not in mine.stdout


def test_the_slack_app_and_its_secrets_come_before_the_deploy_that_reads_them(fake: dict[str, Any]) -> None:
    run, _ = setup(fake, "--project", "p1", "--dry-run")
    out = run.stdout
    assert out.index("The Slack app") < out.index("Secrets (Secret Manager)") < out.index("Build and deploy the bot")
    deploy = out[out.index("Build and deploy the bot") :]
    assert "Not yet: the deploy reads these secrets at :latest" in deploy
    for name in ("slack-bot-token (SLACK_BOT_TOKEN)", "slack-signing-secret (SLACK_SIGNING_SECRET)"):
        assert name in deploy
    ready, _ = setup(
        fake,
        "--project",
        "p1",
        "--dry-run",
        HF_TOKEN="hf_x",
        SLACK_BOT_TOKEN="xoxb-1",
        SLACK_SIGNING_SECRET="abc",
        ALERT_WEBHOOK_TOKEN="t",
    )
    assert "Not yet" not in ready.stdout and "Deploy with:" in ready.stdout


def test_cloud_builds_service_account_gets_the_roles_to_build_push_and_deploy(fake: dict[str, Any]) -> None:
    run, _ = setup(fake, "--project", "p1", "--dry-run")
    build = "serviceAccount:123456789-compute@developer.gserviceaccount.com"
    cmds = printed(run.stdout)
    granted = {a.split("=", 1)[1] for c in cmds if f"--member={build}" in c for a in c if a.startswith("--role=")}
    assert {"roles/run.admin", "roles/artifactregistry.writer", "roles/logging.logWriter"} <= granted
    act_as = next(c for c in cmds if c[:3] == ["iam", "service-accounts", "add-iam-policy-binding"])
    assert act_as[3] == "gemma-sre-bot@p1.iam.gserviceaccount.com" and "--role=roles/iam.serviceAccountUser" in act_as


def test_dry_run_whose_checks_fail_says_so(fake: dict[str, Any]) -> None:
    fake["monitoring"].alerting.fail_with = grpc.StatusCode.PERMISSION_DENIED
    run, calls = setup(fake, "--project", "p1", "--alerts", "pubsub", "--dry-run", FAKE_GCLOUD_DENY="1")
    assert run.returncode == 1
    assert all(any(v in c for v in READ_ONLY) for c in calls), "the dry run changed something"
    lines = run.stdout.splitlines()
    creates = [i for i, x in enumerate(lines) if x.startswith("+ gcloud ") and " create " in x]
    assert creates and all(lines[i - 1].startswith("   ? could not check") for i in creates), run.stdout
    assert "PERMISSION_DENIED" in lines[creates[0] - 1]
    assert "The dry run could not make" in run.stdout
    assert "could not check, so would create if absent" in run.stdout  # the alert policies too
    assert "would create alert policy" not in run.stdout


def test_a_real_run_whose_check_fails_stops_before_creating(fake: dict[str, Any]) -> None:
    run, calls = setup(fake, "--project", "p1", FAKE_GCLOUD_DENY="1")
    assert run.returncode == 1
    assert "could not check 'gcloud artifacts repositories describe" in run.stderr and "PERMISSION_DENIED" in run.stderr
    assert [c for c in calls if "create" in c] == []


def test_bad_option_and_no_project(fake: dict[str, Any]) -> None:
    run, _ = setup(fake, "--slack", "carrier-pigeon")
    assert run.returncode == 2 and "--slack is http or socket" in run.stderr


def gcloud_dict(value: str) -> dict[str, str]:
    """gcloud's dict-flag rules (https://cloud.google.com/sdk/gcloud/reference/topic/escaping): items split on
    ',' or, after a leading ^DELIM^, on DELIM; each item KEY=VALUE split at its first '='."""
    m = re.match(r"^\^([^^]+)\^(.*)$", value, re.S)
    delim, body = (m.group(1), m.group(2)) if m else (",", value)
    out: dict[str, str] = {}
    for item in body.split(delim):
        key, sep, val = item.partition("=")
        if not sep:
            raise ValueError(f"Bad syntax for dict arg: [{item}]")
        out[key] = val
    return out


def _deploy_args(overrides: dict[str, str]) -> list[str]:
    doc = yaml.safe_load((ROOT / "cloudbuild.yaml").read_text())
    subs = {**doc["substitutions"], **overrides, "PROJECT_ID": "p1", "BUILD_ID": "b1"}
    step = next(s for s in doc["steps"] if s["id"] == "deploy")

    def expand(arg: str) -> str:
        return re.sub(r"\$\{?(_?[A-Z_]+)\}?", lambda m: str(subs[m.group(1)]), arg)

    return [expand(a) for a in step["args"]]


def test_cloudbuild_env_vars_keep_comma_separated_deployers() -> None:
    args = _deploy_args({"_DEPLOYERS": "U012ABC,U034DEF", "_ALERT_SUBSCRIPTION": "projects/p1/subscriptions/s"})
    env = gcloud_dict(next(a for a in args if a.startswith("--set-env-vars=")).split("=", 1)[1])
    assert env["DEPLOYER_USER_IDS"] == "U012ABC,U034DEF"
    assert env["REDIS_URL"] == "redis://10.0.0.3:6379/0" and env["GOOGLE_CLOUD_PROJECT"] == "p1"
    assert env["ALERT_PUBSUB_SUBSCRIPTION"] == "projects/p1/subscriptions/s"
    secrets = gcloud_dict(next(a for a in args if a.startswith("--set-secrets=")).split("=", 1)[1])
    assert secrets["SLACK_BOT_TOKEN"] == "slack-bot-token:latest"
    assert "--service-account=gemma-sre-bot@p1.iam.gserviceaccount.com" in args
    assert "--vpc-connector=gemma-sre-connector" in args
    # The old form (plain commas) is what broke: gcloud reads "U034DEF" as an item without '='.
    with pytest.raises(ValueError):
        gcloud_dict("A=1,DEPLOYER_USER_IDS=U012ABC,U034DEF")


def _cloud_sdk_lib() -> Path | None:
    """The Cloud SDK's lib directory: next to the `gcloud` on PATH (SDK_ROOT/bin/gcloud), else Debian's place."""
    roots = [Path("/usr/lib/google-cloud-sdk")]
    if gcloud := shutil.which("gcloud"):
        roots.insert(0, Path(gcloud).resolve().parent.parent)
    for root in roots:
        if (root / "lib" / "googlecloudsdk" / "calliope" / "arg_parsers.py").exists():
            return root / "lib"
    return None


def test_cloudbuild_env_vars_with_gclouds_own_parser() -> None:
    """If the Cloud SDK is installed, its own ArgDict must read the flag the same way. (The SDK is not on PyPI:
    without it this comparison is skipped, and says so; the test above checks the flag against gcloud's
    documented `^DELIM^` syntax either way.)"""
    lib = _cloud_sdk_lib()
    if lib is None:
        pytest.skip(
            "Google Cloud SDK not found (no gcloud on PATH, none in /usr/lib/google-cloud-sdk): gcloud's own "
            "ArgDict parser was not compared; install google-cloud-cli to run it"
        )
    args = _deploy_args({"_DEPLOYERS": "U1,U2,U3"})
    flag = next(a for a in args if a.startswith("--set-env-vars=")).split("=", 1)[1]
    code = (
        "import sys, json; sys.path[:0] = [sys.argv[1], sys.argv[1] + '/third_party']\n"
        "from googlecloudsdk.calliope import arg_parsers\n"
        "print(json.dumps(dict(arg_parsers.ArgDict()(sys.argv[2]))))"
    )
    run = subprocess.run(["python3", "-c", code, str(lib), flag], capture_output=True, text=True, timeout=60)
    if run.returncode != 0 and "ModuleNotFoundError" in run.stderr:
        missing = run.stderr.strip().splitlines()[-1]
        pytest.skip(f"the Cloud SDK in {lib} does not import with this python3 ({missing}): ArgDict not compared")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["DEPLOYER_USER_IDS"] == "U1,U2,U3"


def test_tpu_adds_its_api_roles_and_the_vllm_api_key_secret(fake: dict[str, Any]) -> None:
    run, calls = setup(fake, "--project", "p1", "--tpu", "--dry-run")
    assert run.returncode in (0, 1), run.stderr  # 1: the dry run lists what it could not check
    assert all(any(v in c for v in READ_ONLY) for c in calls), "the dry run changed something"
    cmds = printed(run.stdout)
    assert all(command_of(c) for c in cmds)
    assert "tpu.googleapis.com" in cmds[0]
    assert any(
        "--role=roles/tpu.admin" in c and "--member=serviceAccount:gemma-sre-bot@p1.iam.gserviceaccount.com" in c
        for c in cmds
    )
    assert ["secrets", "create", "vllm-api-key", "--replication-policy=automatic", "--project=p1"] in cmds
    node = "--member=serviceAccount:123456789-compute@developer.gserviceaccount.com"
    assert any(node in c and "--role=roles/logging.logWriter" in c for c in cmds)
    assert any(node in c and "--role=roles/secretmanager.secretAccessor" in c for c in cmds)
    without, _ = setup(fake, "--project", "p1", "--dry-run")
    assert "tpu" not in without.stdout  # opt-in: nothing changes without --tpu
