"""The set-up's dry runs as a user with no Google credentials starts them: a process with no GOOGLE_* variable, a
HOME without gcloud's configuration, nothing on stdin. `gemma-sre setup-alerts --dry-run` prints the notification
channel and every alert policy it would create (with their conditions) without credentials and without the
network; `./dev setup --dry-run` asks for nothing a real run makes itself (the alert webhook token: "would
generate"), numbers its steps without a gap, and previews the policies too. And the README's by-hand block is the
script's own commands, in the script's order (the repository, the service account and its roles, Memorystore,
the build)."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bot.deploy.alert_policies import AlertThresholds, desired_policies
from bot.deploy.alert_setup import desired_channel

ROOT = Path(__file__).resolve().parent.parent
GEMMA_SRE = Path(sys.executable).parent / "gemma-sre"
WEBHOOK = "https://bot.example.run.app/alerts/gcp?auth_token=s3cret"

# gcloud as it answers with no account (the wording of Cloud SDK 528's error), or on a new project where nothing
# exists yet (NOT_FOUND); `builds get-default-service-account` answers on a project it can read.
FAKE_GCLOUD = r"""#!/bin/sh
words=""
for a in "$@"; do case "$a" in -*) ;; *) words="$words $a" ;; esac; done
set -- $words
if [ "$1 $2" = "config get-value" ]; then echo "(unset)" >&2; exit 0; fi
case "$words" in
  *" describe"*|*" list"*|*" access"*|*" get-default-service-account"*) ;;
  *) echo "fake gcloud: a dry run must not run: $words" >&2; exit 9 ;;
esac
if [ "${FAKE_GCLOUD_MODE:-}" = fresh ]; then
  if [ "$1 $2" = "builds get-default-service-account" ]; then
    echo "projects/p1/serviceAccounts/123456789-compute@developer.gserviceaccount.com"; exit 0
  fi
  if [ "$1 $2" = "projects describe" ]; then echo 123456789; exit 0; fi
  echo "ERROR: (gcloud.$1.$2) NOT_FOUND: Resource not found" >&2; exit 1
fi
cmd=$(echo "$words" | sed 's/^ //; s/ [^ ]*$//; s/ /./g')
echo "ERROR: (gcloud.$cmd) You do not currently have an active account selected." >&2
echo "Please run:" >&2
echo "" >&2
echo "  \$ gcloud auth login" >&2
exit 1
"""


class ConnectionRecorder:
    """A TCP listener on 127.0.0.1 that every proxy variable and the metadata-server variables point at: any
    attempt to reach Google (APIs through the proxy, the GCE metadata server) lands here and is counted."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.seen = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.seen += 1
            conn.close()


@pytest.fixture
def recorder() -> Iterator[ConnectionRecorder]:
    rec = ConnectionRecorder()
    yield rec
    rec.sock.close()


@pytest.fixture
def no_credentials(tmp_path: Path, recorder: ConnectionRecorder) -> dict[str, str]:
    """The environment of a user with no Google credentials: no GOOGLE_* or CLOUDSDK_* variable, an empty HOME,
    a gcloud with no account first on PATH, and every way out to the network pointed at the recorder."""
    home = tmp_path / "home"
    home.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gcloud = bin_dir / "gcloud"
    gcloud.write_text(FAKE_GCLOUD)
    gcloud.chmod(0o755)
    here = f"127.0.0.1:{recorder.port}"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GOOGLE_", "CLOUDSDK_", "CLOUD_", "GCE_"))
        and k.lower() not in ("http_proxy", "https_proxy", "grpc_proxy", "no_proxy", "all_proxy")
        and k not in ("ALERT_WEBHOOK_TOKEN", "ALERT_WEBHOOK_URL", "K_SERVICE", "VLLM_API_KEY")
    }
    env.update(
        PATH=f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin",
        HOME=str(home),
        GCE_METADATA_HOST=here,
        GCE_METADATA_IP=here,
        HTTPS_PROXY=f"http://{here}",
        https_proxy=f"http://{here}",
        HTTP_PROXY=f"http://{here}",
        grpc_proxy=f"http://{here}",
        GEMMA_SRE=str(GEMMA_SRE),
    )
    return env


def run(argv: list[str], env: dict[str, str], **more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        env={**env, **more},
        cwd=ROOT,
        stdin=subprocess.DEVNULL,  # nothing to answer with: a question would fail or hang
        capture_output=True,
        text=True,
        timeout=60,
    )


def policies() -> list[str]:
    return [p.display_name for p in desired_policies("vllm-gemma4", AlertThresholds(), ["x"]).values()]


def test_setup_alerts_dry_run_prints_the_policies_with_no_credentials_and_no_network(
    no_credentials: dict[str, str], recorder: ConnectionRecorder
) -> None:
    argv = [str(GEMMA_SRE), "setup-alerts", "--project", "p1", "--webhook-url", WEBHOOK, "--dry-run"]
    done = run(argv, no_credentials)
    out = done.stdout + done.stderr
    assert "Traceback" not in out
    assert recorder.seen == 0, "the dry run reached for the network (metadata server or a Google API)"
    assert done.returncode == 1, out  # it could not ask what exists, and says so (exit 1, as any unchecked dry run)
    assert "no Google credentials" in out and "gcloud auth application-default login" in out
    channel = desired_channel("webhook", WEBHOOK, "vllm-gemma4")
    assert f"notification channel {channel.type_}" in done.stdout and "s3cret" not in out
    for name in policies():
        assert name in done.stdout, (name, done.stdout)
    # what each one watches, so the preview is worth reading
    for needed in (
        "run.googleapis.com/container/completed_probe_count",
        "run.googleapis.com/request_count",
        "prometheus.googleapis.com/vllm:kv_cache_usage_perc/gauge",
        "vllm:num_requests_waiting",
        "run.googleapis.com%2Fvarlog%2Fsystem",
    ):
        assert needed in done.stdout, needed
    assert "alert policies: 7 to create" in done.stdout
    # without --dry-run it still refuses, saying what to do, and prints no plan
    real = run([str(GEMMA_SRE), "setup-alerts", "--project", "p1", "--webhook-url", WEBHOOK], no_credentials)
    assert real.returncode == 2 and "Traceback" not in real.stderr
    assert "no Google credentials" in real.stderr and "would create" not in real.stdout


def test_setup_alerts_pubsub_dry_run_with_no_credentials(no_credentials: dict[str, str]) -> None:
    argv = [str(GEMMA_SRE), "setup-alerts", "--project", "p1", "--pubsub-topic", "projects/p1/topics/t", "--dry-run"]
    done = run(argv, no_credentials)
    assert "Traceback" not in done.stdout + done.stderr
    assert "notification channel pubsub -> projects/p1/topics/t" in done.stdout
    assert all(name in done.stdout for name in policies())


def steps(out: str) -> list[int]:
    return [int(m) for m in re.findall(r"^== (\d+)\. ", out, re.M)]


@pytest.mark.parametrize("alerts", ["webhook", "pubsub"])
def test_dev_setup_dry_run_with_no_credentials_asks_nothing_it_would_make(
    no_credentials: dict[str, str], recorder: ConnectionRecorder, alerts: str
) -> None:
    done = run(["./dev", "setup", "--project", "p1", "--alerts", alerts, "--dry-run"], no_credentials)
    out = done.stdout + done.stderr
    assert "Traceback" not in out and "must not run" not in out
    assert done.returncode == 1, out  # the checks it could not make are listed at the end
    assert "The dry run could not make" in done.stdout
    numbers = steps(done.stdout)
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 9, numbers
    # a real run makes the webhook token itself: the dry run says it would, and asks nobody for it
    assert "set ALERT_WEBHOOK_TOKEN" not in done.stdout and "alert-webhook-token has no value" not in done.stdout
    assert "alert-webhook-token: would generate a random token" in done.stdout
    assert "gcloud secrets versions add alert-webhook-token --data-file=- --project=p1" in done.stdout
    deploy = done.stdout[done.stdout.index("Build and deploy the bot") :]
    assert "alert-webhook-token (" not in deploy  # not among the secrets the deploy still waits for
    # the tokens only the user has are still asked for, by name
    assert "slack-bot-token has no value yet: set SLACK_BOT_TOKEN" in done.stdout
    # the alert policies are previewed, with no credentials
    for name in policies():
        assert name in done.stdout, name
    assert recorder.seen == 0


def test_dev_setup_tpu_dry_run_would_generate_the_vllm_api_key(no_credentials: dict[str, str]) -> None:
    done = run(["./dev", "setup", "--project", "p1", "--tpu", "--dry-run"], no_credentials)
    assert "Traceback" not in done.stdout + done.stderr
    assert "vllm-api-key: would generate a random token" in done.stdout
    assert "VLLM_API_KEY and run" not in done.stdout
    numbers = steps(done.stdout)
    assert numbers == list(range(1, len(numbers) + 1)), numbers


# --- the README's by-hand block is the script's commands -------------------------------------------------------

READ_ONLY = ("describe", "access", "get-default-service-account", "list")


def readme_block() -> str:
    text = (ROOT / "README.md").read_text()
    after = text[text.index("By hand, the equivalent is") :]
    return after[after.index("```") + 3 : after.index("```", after.index("```") + 3)]


def commands_of(block: str, names: dict[str, str]) -> list[list[str]]:
    """The commands a block of shell runs that change something: gcloud's (a `… | gcloud …` pipe's gcloud part
    included) and gemma-sre's, with $NAME expanded from `names`; assignments (read-only lookups) left out."""
    out = []
    for logical in block.replace("\\\n", " ").splitlines():
        line = logical.strip()
        if not line or line.startswith("#") or re.match(r"^[A-Z_]+=\$\(", line):
            continue
        for part in line.split(" | "):
            part = re.sub(r"\$\{?([A-Z_]+)\}?", lambda m: names.get(m.group(1), m.group(0)), part)
            argv = shlex.split(part, comments=True)
            while argv and re.match(r"^[A-Z_]+=", argv[0]):
                argv = argv[1:]  # VAR=value before the command
            if argv and argv[0] in ("gcloud", "gemma-sre") and not any(v in argv for v in READ_ONLY):
                out.append(argv[1:] if argv[0] == "gcloud" else argv)
    return out


def script_commands(tmp_path: Path, env: dict[str, str]) -> tuple[list[list[str]], str]:
    """What `./dev setup --dry-run` prints for a new project (nothing exists yet; the user's tokens set)."""
    done = run(
        ["./dev", "setup", "--project", "p1", "--dry-run"],
        env,
        FAKE_GCLOUD_MODE="fresh",
        HF_TOKEN="hf_x",
        SLACK_BOT_TOKEN="xoxb-1",
        SLACK_SIGNING_SECRET="abc",
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    cmds = []
    for line in done.stdout.splitlines():
        if line.startswith("+ "):
            cmd = line[2:].split(" | ")[-1]
            argv = [a for a in shlex.split(cmd) if not a.startswith("ALERT_WEBHOOK_URL=")]
            if argv[0] == "gcloud":
                cmds.append(argv[1:])
            elif argv[0] == "gemma-sre":
                cmds.append([a for a in argv if a != "--dry-run"])
    submit = next(x for x in done.stdout.splitlines() if "--substitutions=" in x)
    return cmds, submit


def substitutions(argv: list[str]) -> dict[str, str]:
    value = next(a for a in argv if a.startswith("--substitutions=")).split("=", 1)[1]
    m = re.match(r"^\^([^^]+)\^(.*)$", value, re.S)
    delim, body = (m.group(1), m.group(2)) if m else (",", value)
    defaults = yaml.safe_load((ROOT / "cloudbuild.yaml").read_text())["substitutions"]
    return {**defaults, **dict(item.split("=", 1) for item in body.split(delim))}


def test_readme_by_hand_block_is_the_scripts_commands_in_its_order(
    tmp_path: Path, no_credentials: dict[str, str]
) -> None:
    script, submit_line = script_commands(tmp_path, no_credentials)
    names = {
        "P": "p1",
        "REGION": "us-central1",
        "SA": "gemma-sre-bot@p1.iam.gserviceaccount.com",
        "BUILD_SA": "123456789-compute@developer.gserviceaccount.com",
        "REDIS_HOST": "REDIS_HOST",
        "DEPLOYERS": "",
    }
    block = readme_block()
    readme = commands_of(block, names)
    submits = [c for c in readme if c[:2] == ["builds", "submit"]]
    readme = [c for c in readme if c[:2] != ["builds", "submit"]]
    setup_alerts = [c for c in script if c[0] == "gemma-sre"]
    assert setup_alerts, "the script's dry run shows the alert policies step"
    script = [c for c in script if c[0] != "gemma-sre"]
    alerts_readme = [c for c in readme if c[0] == "gemma-sre"]
    readme = [c for c in readme if c[0] != "gemma-sre"]
    # the same commands, the same flags, in the same order: the repository, the service account and its roles,
    # Cloud Build's roles, the secrets, Memorystore and its connector
    assert readme == script, "\n".join(
        f"{' '.join(a) if a else '-':<110} | {' '.join(b) if b else '-'}"
        for a, b in zip(readme + [[]] * len(script), script + [[]] * len(readme), strict=False)
        if a or b
    )
    kinds = [" ".join(c[:3]) for c in readme]
    for earlier, later in [
        ("artifacts repositories create", "iam service-accounts create"),
        ("iam service-accounts create", "secrets create hf-token"),
        ("secrets create alert-webhook-token", "redis instances create"),
        ("redis instances create", "compute networks vpc-access"),
    ]:
        assert next(i for i, k in enumerate(kinds) if k.startswith(earlier)) < next(
            i for i, k in enumerate(kinds) if k.startswith(later)
        ), (earlier, later)
    roles = [a.split("=", 1)[1] for c in readme for a in c if a.startswith("--role=")]
    assert {"roles/run.developer", "roles/secretmanager.secretAccessor", "roles/artifactregistry.writer"} <= set(roles)
    # then the build, with what it needs that cloudbuild.yaml's defaults do not hold, and the alert policies
    (submit,) = submits
    assert block.index("builds submit") > block.index("vpc-access connectors create")
    assert substitutions(submit) == substitutions(shlex.split(submit_line))
    assert submit[:5] == ["builds", "submit", "--config", "cloudbuild.yaml", "--project=p1"]
    assert [c[:2] for c in alerts_readme] == [["gemma-sre", "setup-alerts"]]
    assert alerts_readme[0] == setup_alerts[0]
    assert block.index("setup-alerts") > block.index("builds submit")
