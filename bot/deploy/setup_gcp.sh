#!/usr/bin/env bash
# Everything gemma-sre needs in a Google Cloud project, in order, safe to run again (`./dev setup`).
#
#   ./dev setup --project my-proj [--region us-central1] [--slack http|socket] [--alerts webhook|pubsub]
#               [--egress connector|direct] [--tpu] [--dry-run]
#
# --tpu adds what the Cloud TPU target needs: the TPU API, roles/tpu.admin for the bot (queued resources), the
# `vllm-api-key` secret vLLM's --api-key reads on the node (TPU_API_KEY_SECRET; made here when none exists, never
# printed; the bot's copy is VLLM_API_KEY), and for the node's service account (the Compute Engine default one)
# roles/logging.logWriter (Docker's gcplogs driver writes vLLM's lines to Cloud Logging) and
# roles/secretmanager.secretAccessor (its startup script reads the API key and the HF token).
#
# --dry-run asks only read-only questions (describe/list) and prints every command that would change
# something, instead of running it; a question it could not ask (no login, no permission, API off) is marked
# "?" and listed at the end, never taken for "absent". Secrets are taken from the environment when set
# (HF_TOKEN, SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET, SLACK_APP_TOKEN, ALERT_WEBHOOK_TOKEN) and never printed;
# DEPLOYER_USER_IDS (Slack user ids) goes into the deploy command. Order: the Slack app and the secrets the
# deploy reads come before the deploy; the alert policies (gemma-sre setup-alerts) come once the bot has a URL
# (webhook alerts) or at once (Pub/Sub alerts). Run it again after each step it asks you to do by hand.
#
# Every flag below was checked against the gcloud reference (https://cloud.google.com/sdk/gcloud/reference/
# <group>/<command>, e.g. .../reference/redis/instances/create) as printed by `gcloud <command> --help`
# (Google Cloud SDK 528.0.0). The ^|^ list syntax: https://cloud.google.com/sdk/gcloud/reference/topic/escaping
set -euo pipefail

PROJECT="" REGION="us-central1" SLACK_MODE="http" ALERTS="webhook" EGRESS="connector" DRY_RUN=0 TPU=0
TPU_KEY_SECRET="${TPU_API_KEY_SECRET:-vllm-api-key}"
REPO="gemma-sre" SA_NAME="gemma-sre-bot" REDIS_INSTANCE="gemma-sre-redis" NETWORK="default" SUBNET="default"
CONNECTOR="gemma-sre-connector" CONNECTOR_RANGE="10.8.0.0/28" TOPIC="gemma-sre-alerts" SUBSCRIPTION="gemma-sre-bot"
HF_SECRET="hf-token" BOT_SERVICE="gemma-sre" VLLM_SERVICE="${VLLM_SERVICE_NAME:-vllm-gemma4}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
GEMMA_SRE="${GEMMA_SRE:-$ROOT/.venv/bin/gemma-sre}"  # the Python step (alert policies); ./dev console installs it

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --project) PROJECT="$2"; shift 2 ;;
    --region) REGION="$2"; shift 2 ;;
    --slack) SLACK_MODE="$2"; shift 2 ;;
    --alerts) ALERTS="$2"; shift 2 ;;
    --egress) EGRESS="$2"; shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;
    --tpu) TPU=1; shift ;;
    -h|--help) usage ;;
    *) echo "setup: unknown option $1" >&2; usage ;;
  esac
done
case "$SLACK_MODE" in http|socket) ;; *) echo "setup: --slack is http or socket" >&2; exit 2 ;; esac
case "$ALERTS" in webhook|pubsub) ;; *) echo "setup: --alerts is webhook or pubsub" >&2; exit 2 ;; esac
case "$EGRESS" in connector|direct) ;; *) echo "setup: --egress is connector or direct" >&2; exit 2 ;; esac
command -v gcloud >/dev/null || { echo "setup: gcloud is not installed (https://cloud.google.com/sdk/docs/install)" >&2; exit 2; }
if [ -z "$PROJECT" ]; then PROJECT="$(gcloud config get-value project 2>/dev/null || true)"; fi
[ -n "$PROJECT" ] || { echo "setup: no project: pass --project or run 'gcloud config set project ...'" >&2; exit 2; }
SA="${SA_NAME}@${PROJECT}.iam.gserviceaccount.com"

STEP=0
step() { STEP=$((STEP + 1)); printf '\n== %s. %s\n' "$STEP" "$*"; }  # numbered as they run: no gaps
# run: a command that changes something. Printed (quoted, copy-pastable) in a dry run, else printed and run.
run() {
  printf '+'; printf ' %q' "$@"; printf '\n'
  if [ "$DRY_RUN" = 0 ]; then "$@"; fi
}
UNCHECKED=()  # read-only questions that could not be asked, with gcloud's reason
# exists: a read-only question, asked in a dry run too: 0 it exists, 1 gcloud said NOT_FOUND, 2 it could not
# tell (not logged in, permission denied, API disabled): the reason is kept in $WHY.
exists() {
  local err
  if err="$("$@" 2>&1 >/dev/null)"; then return 0; fi
  if grep -qiE 'NOT_FOUND|not found|does not exist' <<<"$err"; then return 1; fi
  WHY="$(grep -m1 -v '^\s*$' <<<"$err" || true)"; WHY="${WHY:-exit status without a message}"
  return 2
}
# missing CHECK...: should we create it? yes when absent; when the check could not be made, a dry run says so
# (and goes on), a real run stops before changing anything else.
missing() {
  local rc=0
  exists "$@" || rc=$?
  case "$rc" in
    0) return 1 ;;
    1) return 0 ;;
  esac
  UNCHECKED+=("${*:1:5} …: $WHY")
  if [ "$DRY_RUN" = 1 ]; then
    echo "   ? could not check (${*:1:5} …: $WHY); if it is absent, this runs:"
    return 0
  fi
  echo "setup: could not check '$*': $WHY" >&2
  echo "setup: fix that (gcloud auth login, or a role that may read it) and run ./dev setup again." >&2
  exit 1
}
MISSING_SECRETS=()  # secrets with no value yet: the deploy reads them at :latest and would fail
# secret NAME ENVVAR [random]: create the secret if missing; add a version from $ENVVAR when it is set. With
# "random" the value is ours to choose: when neither $ENVVAR nor a version exists, a real run makes a random one
# (never printed; it lands in $ENVVAR for the steps after) and a dry run says it would, asking nobody for it.
secret() {
  local name="$1" var="$2" random="${3:-}" rc=0
  if missing gcloud secrets describe "$name" --project="$PROJECT"; then
    run gcloud secrets create "$name" --replication-policy=automatic --project="$PROJECT"
  fi
  if [ -z "${!var:-}" ] && [ -n "$random" ]; then
    exists gcloud secrets versions describe latest --secret="$name" --project="$PROJECT" || rc=$?
    [ "$rc" != 0 ] || return 0  # it has a value
    if [ "$rc" = 2 ]; then
      UNCHECKED+=("gcloud secrets versions describe latest --secret=$name …: $WHY")
      [ "$DRY_RUN" = 1 ] || { echo "setup: could not check whether $name has a value: $WHY" >&2; exit 1; }
      echo "   ? could not check whether $name has a value ($WHY); if it has none:"
    fi
    if [ "$DRY_RUN" = 1 ]; then
      echo "   $name: would generate a random token here (a real run does; never printed), then:"
      printf '+ printf %%s "$%s" | gcloud secrets versions add %s --data-file=- --project=%s\n' "$var" "$name" "$PROJECT"
      return 0
    fi
    printf -v "$var" '%s' "$(head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 40)"
    echo "   $name: a new random token (never printed)"
  fi
  if [ -n "${!var:-}" ]; then
    printf '+ printf %%s "$%s" | gcloud secrets versions add %s --data-file=- --project=%s\n' "$var" "$name" "$PROJECT"
    if [ "$DRY_RUN" = 0 ]; then
      # No trailing newline: the bot strips whitespace anyway, other readers may not.
      printf %s "${!var}" | gcloud secrets versions add "$name" --data-file=- --project="$PROJECT" >/dev/null
    fi
  elif missing gcloud secrets versions describe latest --secret="$name" --project="$PROJECT"; then
    MISSING_SECRETS+=("$name ($var)")
    echo "   $name has no value yet: set $var and run ./dev setup again"
  fi
}
# value_of CMD...: the output of a read-only question, or "" (and the reason noted) when it could not be asked.
value_of() {
  local out
  if out="$("$@" 2>/dev/null)"; then printf '%s' "$out"; return 0; fi
  return 1
}

[ "$DRY_RUN" = 1 ] && echo "Dry run: nothing will be changed in $PROJECT; these are the commands."

step "APIs"
apis=(run.googleapis.com artifactregistry.googleapis.com cloudbuild.googleapis.com secretmanager.googleapis.com
      redis.googleapis.com compute.googleapis.com iam.googleapis.com logging.googleapis.com monitoring.googleapis.com
      cloudquotas.googleapis.com)  # cloudquotas: preflight and /gemma quota read the Cloud Run GPU quota
[ "$EGRESS" = connector ] && apis+=(vpcaccess.googleapis.com)
[ "$ALERTS" = pubsub ] && apis+=(pubsub.googleapis.com)
[ "$TPU" = 1 ] && apis+=(tpu.googleapis.com)
run gcloud services enable "${apis[@]}" --project="$PROJECT"  # enabling an enabled API is a no-op

step "Artifact Registry repository for the bot's image"
if missing gcloud artifacts repositories describe "$REPO" --location="$REGION" --project="$PROJECT"; then
  run gcloud artifacts repositories create "$REPO" --repository-format=docker --location="$REGION" \
    --description="gemma-sre bot images" --project="$PROJECT"
fi

step "The bot's runtime service account and its roles"
if missing gcloud iam service-accounts describe "$SA" --project="$PROJECT"; then
  run gcloud iam service-accounts create "$SA_NAME" --display-name="gemma-sre bot" --project="$PROJECT"
fi
# run.developer: deploy/scale/destroy the vLLM service; iam.serviceAccountUser: deploy it with its runtime account;
# run.invoker: call the private model; logging/monitoring viewers: read-only diagnosis; secretAccessor: its secrets
# (the Slack ones, and the HF token preflight checks the checkpoint with); cloudquotas.viewer: GPU quota (preflight,
# /gemma quota). With MODEL_BUCKET, also grant roles/storage.objectViewer on that bucket so preflight can list it.
roles=(roles/run.developer roles/iam.serviceAccountUser roles/run.invoker roles/logging.viewer roles/monitoring.viewer
       roles/secretmanager.secretAccessor roles/cloudquotas.viewer)
[ "$TPU" = 1 ] && roles+=(roles/tpu.admin)  # --tpu: create, read and delete queued resources
for role in "${roles[@]}"; do  # adding a binding that exists is a no-op
  run gcloud projects add-iam-policy-binding "$PROJECT" --member="serviceAccount:$SA" --role="$role" \
    --condition=None --quiet
done

step "Cloud Build's service account: build, push and deploy the bot"
# Which account builds by default depends on the project's age and policy (the legacy
# PROJECT_NUMBER@cloudbuild.gserviceaccount.com or the Compute Engine default account); Cloud Build says which:
# https://cloud.google.com/build/docs/api/reference/rest/v1/projects.locations/getDefaultServiceAccount
# Roles: Cloud Run Admin and Service Account User on the runtime account ("Deploying to Cloud Run using Cloud
# Build", https://cloud.google.com/build/docs/deploying-builds/deploy-cloud-run; Admin, not Developer, because the
# deploy sets --allow-unauthenticated, an IAM policy change); Artifact Registry Writer to push the image and Logs
# Writer for logging: CLOUD_LOGGING_ONLY (https://cloud.google.com/run/docs/configuring/services/build-service-account).
BUILD_SA=""
if out="$(value_of gcloud builds get-default-service-account --project="$PROJECT" --format='value(serviceAccountEmail)')"; then
  BUILD_SA="${out##*/}"
fi
if [ -z "$BUILD_SA" ]; then
  UNCHECKED+=("gcloud builds get-default-service-account: no answer")
  if [ "$DRY_RUN" = 0 ]; then
    echo "setup: could not learn Cloud Build's service account (gcloud builds get-default-service-account)." >&2
    echo "setup: check you may read the project's Cloud Build settings, then run ./dev setup again." >&2
    exit 1
  fi
  echo "   ? could not ask which account Cloud Build uses; shown as BUILD_SERVICE_ACCOUNT below"
  BUILD_SA="BUILD_SERVICE_ACCOUNT"
fi
for role in roles/run.admin roles/artifactregistry.writer roles/logging.logWriter; do
  run gcloud projects add-iam-policy-binding "$PROJECT" --member="serviceAccount:$BUILD_SA" --role="$role" \
    --condition=None --quiet
done
run gcloud iam service-accounts add-iam-policy-binding "$SA" --member="serviceAccount:$BUILD_SA" \
  --role=roles/iam.serviceAccountUser --project="$PROJECT"

step "The Slack app ($SLACK_MODE mode): its tokens are secrets the first deploy reads"
if [ "$SLACK_MODE" = socket ]; then
  echo "   api.slack.com/apps > Create New App > From an app manifest: slack-app-manifest.yaml with"
  echo "   socket_mode_enabled: true and the url/request_url lines deleted. Basic Information > App-Level Tokens:"
  echo "   create one with scope connections:write (xapp-…) -> SLACK_APP_TOKEN; install the app -> SLACK_BOT_TOKEN."
else
  echo "   api.slack.com/apps > Create New App > From an app manifest: slack-app-manifest.yaml with the three"
  echo "   url/request_url lines deleted for now (the bot has no URL before its first deploy). Install it ->"
  echo "   SLACK_BOT_TOKEN (xoxb-…); Basic Information > Signing Secret -> SLACK_SIGNING_SECRET. After the deploy,"
  echo "   put the bot's URL + /slack/events in Slash Commands, Event Subscriptions and Interactivity."
fi
echo "   Then: export SLACK_BOT_TOKEN=… (and the other) and run ./dev setup again; the next step stores them."

step "Secrets (Secret Manager)"
secret "$HF_SECRET" HF_TOKEN
secret slack-bot-token SLACK_BOT_TOKEN
if [ "$SLACK_MODE" = socket ]; then secret slack-app-token SLACK_APP_TOKEN; else secret slack-signing-secret SLACK_SIGNING_SECRET; fi
# Ours to choose (it authenticates Cloud Monitoring's webhook calls): made here when none exists.
secret alert-webhook-token ALERT_WEBHOOK_TOKEN random
if [ "$TPU" = 1 ]; then
  secret "$TPU_KEY_SECRET" VLLM_API_KEY random  # vLLM's --api-key on TPU nodes
  # The TPU node runs as the Compute Engine default service account: it writes vLLM's lines to Cloud Logging
  # (gcplogs) and reads the API key and the HF token in its startup script.
  NUMBER="$(value_of gcloud projects describe "$PROJECT" --format="value(projectNumber)" || true)"
  NODE_SA="${NUMBER:-PROJECT_NUMBER}-compute@developer.gserviceaccount.com"
  for role in roles/logging.logWriter roles/secretmanager.secretAccessor; do
    run gcloud projects add-iam-policy-binding "$PROJECT" --member="serviceAccount:$NODE_SA" --role="$role" \
      --condition=None --quiet
  done
fi

step "Memorystore for Redis, reached over the VPC"
if missing gcloud redis instances describe "$REDIS_INSTANCE" --region="$REGION" --project="$PROJECT"; then
  run gcloud redis instances create "$REDIS_INSTANCE" --region="$REGION" --size=1 --tier=basic \
    --redis-version=redis_7_2 --network="projects/$PROJECT/global/networks/$NETWORK" --connect-mode=direct-peering \
    --project="$PROJECT"
fi
if [ "$EGRESS" = connector ]; then
  if missing gcloud compute networks vpc-access connectors describe "$CONNECTOR" --region="$REGION" --project="$PROJECT"; then
    run gcloud compute networks vpc-access connectors create "$CONNECTOR" --region="$REGION" --network="$NETWORK" \
      --range="$CONNECTOR_RANGE" --min-instances=2 --max-instances=3 --project="$PROJECT"
  fi
  VPC_FLAG="--vpc-connector=$CONNECTOR"
else
  echo "   Direct VPC egress: nothing to create; the service gets IPs from subnet '$SUBNET' (/26 or larger)."
  VPC_FLAG="--subnet=$SUBNET"
fi

SUB_PATH=""
if [ "$ALERTS" = pubsub ]; then
  step "Pub/Sub topic and subscription for Cloud Monitoring alerts"
  if missing gcloud pubsub topics describe "$TOPIC" --project="$PROJECT"; then
    run gcloud pubsub topics create "$TOPIC" --project="$PROJECT"
  fi
  if missing gcloud pubsub subscriptions describe "$SUBSCRIPTION" --project="$PROJECT"; then
    run gcloud pubsub subscriptions create "$SUBSCRIPTION" --topic="$TOPIC" --ack-deadline=60 --project="$PROJECT"
  fi
  run gcloud pubsub subscriptions add-iam-policy-binding "$SUBSCRIPTION" --member="serviceAccount:$SA" \
    --role=roles/pubsub.subscriber --project="$PROJECT"
  # Cloud Monitoring publishes as its notification service agent (created with the first Pub/Sub channel):
  # https://cloud.google.com/monitoring/support/notification-options#pubsub
  if NUMBER="$(value_of gcloud projects describe "$PROJECT" --format='value(projectNumber)')" && [ -n "$NUMBER" ]; then
    run gcloud pubsub topics add-iam-policy-binding "$TOPIC" \
      --member="serviceAccount:service-${NUMBER}@gcp-sa-monitoring-notification.iam.gserviceaccount.com" \
      --role=roles/pubsub.publisher --project="$PROJECT"
  else
    UNCHECKED+=("gcloud projects describe $PROJECT: no project number")
    [ "$DRY_RUN" = 1 ] || { echo "setup: could not read the project number (gcloud projects describe)." >&2; exit 1; }
    echo "   ? could not read the project number: Cloud Monitoring's publisher binding is not shown"
  fi
  SUB_PATH="projects/$PROJECT/subscriptions/$SUBSCRIPTION"
fi

step "Build and deploy the bot"
BUILD_STEP="$STEP"
REDIS_HOST="$(value_of gcloud redis instances describe "$REDIS_INSTANCE" --region="$REGION" --project="$PROJECT" \
  --format='value(host)' || true)"
REDIS_URL="redis://${REDIS_HOST:-REDIS_HOST}:6379/0"
if [ "$SLACK_MODE" = socket ]; then SLACK_SECRET="SLACK_APP_TOKEN=slack-app-token:latest"; else SLACK_SECRET="SLACK_SIGNING_SECRET=slack-signing-secret:latest"; fi
SECRETS="^|^SLACK_BOT_TOKEN=slack-bot-token:latest|$SLACK_SECRET|ALERT_WEBHOOK_TOKEN=alert-webhook-token:latest|HF_TOKEN=$HF_SECRET:latest"
DEPLOYERS="${DEPLOYER_USER_IDS:-}"
if [ "${#MISSING_SECRETS[@]}" -gt 0 ]; then
  echo "   Not yet: the deploy reads these secrets at :latest and would fail without a value:"
  printf '     - %s\n' "${MISSING_SECRETS[@]}"
  echo "   Set them, run ./dev setup again, then deploy with:"
else
  echo "   Deploy with:"
fi
[ -n "$REDIS_HOST" ] || echo "   (REDIS_HOST: the Memorystore instance's host once it exists; ./dev setup prints it then)"
printf '  gcloud builds submit --config cloudbuild.yaml --project=%s \\\n' "$PROJECT"
printf "    '--substitutions=%s'\n" "^;^_REGION=$REGION;_REPO=$REPO;_REDIS_URL=$REDIS_URL;_VPC_FLAG=$VPC_FLAG;_SERVICE_ACCOUNT=$SA_NAME;_ALERT_SUBSCRIPTION=$SUB_PATH;_SECRETS=$SECRETS;_DEPLOYERS=$DEPLOYERS"
if [ -z "$DEPLOYERS" ]; then
  echo "   _DEPLOYERS is empty: nobody may confirm a write. Put your team's Slack member ids there (Slack: profile >"
  echo "   ⋮ > Copy member ID), comma-separated, or export DEPLOYER_USER_IDS and run ./dev setup again."
fi

BOT_URL="$(value_of gcloud run services describe "$BOT_SERVICE" --region="$REGION" --project="$PROJECT" \
  --format='value(status.url)' || true)"
if [ -n "$BOT_URL" ] && [ "$SLACK_MODE" = http ]; then
  echo "   The bot is at $BOT_URL: in the Slack app put $BOT_URL/slack/events as the request URL of the /gemma"
  echo "   command, Event Subscriptions and Interactivity (slack-app-manifest.yaml's BOT_URL lines)."
fi

step "Alert policies that feed the bot (notification channel + Cloud Monitoring policies)"
ALERT_ARGS=(setup-alerts --project="$PROJECT" --service="$VLLM_SERVICE")
[ "$DRY_RUN" = 1 ] && ALERT_ARGS+=(--dry-run)
if [ ! -x "$GEMMA_SRE" ]; then
  if command -v gemma-sre >/dev/null 2>&1; then GEMMA_SRE="gemma-sre"; else GEMMA_SRE=""; fi
fi
ready=1
if [ "$ALERTS" = pubsub ]; then
  ALERT_ARGS+=(--pubsub-topic="projects/$PROJECT/topics/$TOPIC")
else
  if [ -z "$BOT_URL" ]; then
    echo "   The bot has no URL yet: after its first deploy (step $BUILD_STEP), run ./dev setup again. It then creates"
    echo "   the webhook channel for https://BOT_URL/alerts/gcp?auth_token=<alert-webhook-token> and the policies."
    if [ "$DRY_RUN" = 1 ]; then
      echo "   What that run creates (BOT_URL standing for the bot's URL):"
      export ALERT_WEBHOOK_URL="https://BOT_URL/alerts/gcp?auth_token=<alert-webhook-token>"
    else
      ready=0
    fi
  else
    TOKEN="${ALERT_WEBHOOK_TOKEN:-}"
    # A dry run does not read the secret's value: the URL it shows hides the token anyway.
    [ -n "$TOKEN" ] || [ "$DRY_RUN" = 0 ] || TOKEN="<alert-webhook-token>"
    [ -n "$TOKEN" ] || TOKEN="$(value_of gcloud secrets versions access latest --secret=alert-webhook-token \
      --project="$PROJECT" || true)"
    if [ -z "$TOKEN" ]; then
      ready=0
      echo "   alert-webhook-token has no value: set ALERT_WEBHOOK_TOKEN and run ./dev setup again."
    else
      export ALERT_WEBHOOK_URL="$BOT_URL/alerts/gcp?auth_token=$TOKEN"
      echo "   Webhook URL (Cloud Monitoring's channel): $BOT_URL/alerts/gcp?auth_token=<alert-webhook-token>"
    fi
  fi
fi
if [ "$ready" = 1 ]; then
  if [ -z "$GEMMA_SRE" ]; then
    echo "   gemma-sre is not installed here: run ./dev console once (it installs it), then ./dev setup again."
  else
    printf '+'; [ "$ALERTS" = webhook ] && printf ' ALERT_WEBHOOK_URL=…'; printf ' gemma-sre'; printf ' %q' "${ALERT_ARGS[@]}"; printf '\n'
    rc=0
    "$GEMMA_SRE" "${ALERT_ARGS[@]}" || rc=$?
    if [ "$rc" != 0 ] && [ "$DRY_RUN" = 0 ]; then exit "$rc"; fi
    [ "$rc" = 0 ] || UNCHECKED+=("gemma-sre setup-alerts --dry-run: see its lines above")
  fi
fi

if [ "$DRY_RUN" = 1 ] && [ "${#UNCHECKED[@]}" -gt 0 ]; then
  echo
  echo "The dry run could not make ${#UNCHECKED[@]} check(s); the commands marked '?' may not be needed:"
  printf '  - %s\n' "${UNCHECKED[@]}"
  exit 1
fi
