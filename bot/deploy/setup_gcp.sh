#!/usr/bin/env bash
# Everything gemma-sre needs in a Google Cloud project, in order, safe to run again (`./dev setup`).
#
#   ./dev setup --project my-proj [--region us-central1] [--slack http|socket] [--alerts webhook|pubsub]
#               [--egress connector|direct] [--dry-run]
#
# --dry-run asks only read-only questions (describe/list) and prints every command that would change
# something, instead of running it. Secrets are taken from the environment when set (HF_TOKEN,
# SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET, SLACK_APP_TOKEN, ALERT_WEBHOOK_TOKEN) and never printed.
#
# Every flag below was checked against the gcloud reference (https://cloud.google.com/sdk/gcloud/reference/
# <group>/<command>, e.g. .../reference/redis/instances/create) as printed by `gcloud <command> --help`
# (Google Cloud SDK 528.0.0). The ^|^ list syntax: https://cloud.google.com/sdk/gcloud/reference/topic/escaping
set -euo pipefail

PROJECT="" REGION="us-central1" SLACK_MODE="http" ALERTS="webhook" EGRESS="connector" DRY_RUN=0
REPO="gemma-sre" SA_NAME="gemma-sre-bot" REDIS_INSTANCE="gemma-sre-redis" NETWORK="default" SUBNET="default"
CONNECTOR="gemma-sre-connector" CONNECTOR_RANGE="10.8.0.0/28" TOPIC="gemma-sre-alerts" SUBSCRIPTION="gemma-sre-bot"
HF_SECRET="hf-token"

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --project) PROJECT="$2"; shift 2 ;;
    --region) REGION="$2"; shift 2 ;;
    --slack) SLACK_MODE="$2"; shift 2 ;;
    --alerts) ALERTS="$2"; shift 2 ;;
    --egress) EGRESS="$2"; shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;
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

step() { printf '\n== %s\n' "$*"; }
# run: a command that changes something. Printed (quoted, copy-pastable) in a dry run, else printed and run.
run() {
  printf '+'; printf ' %q' "$@"; printf '\n'
  if [ "$DRY_RUN" = 0 ]; then "$@"; fi
}
# exists: a read-only question, asked in a dry run too.
exists() { "$@" >/dev/null 2>&1; }
# secret_value NAME ENVVAR: create the secret if missing; add a version from $ENVVAR when it is set.
secret() {
  local name="$1" var="$2"
  if ! exists gcloud secrets describe "$name" --project="$PROJECT"; then
    run gcloud secrets create "$name" --replication-policy=automatic --project="$PROJECT"
  fi
  if [ -n "${!var:-}" ]; then
    printf '+ printf %%s "$%s" | gcloud secrets versions add %s --data-file=- --project=%s\n' "$var" "$name" "$PROJECT"
    if [ "$DRY_RUN" = 0 ]; then
      # No trailing newline: the bot strips whitespace anyway, other readers may not.
      printf %s "${!var}" | gcloud secrets versions add "$name" --data-file=- --project="$PROJECT" >/dev/null
    fi
  elif ! exists gcloud secrets versions describe latest --secret="$name" --project="$PROJECT"; then
    echo "   (no value yet: set $var and run again, or: printf %s VALUE | gcloud secrets versions add $name --data-file=-)"
  fi
}

[ "$DRY_RUN" = 1 ] && echo "Dry run: nothing will be changed in $PROJECT; these are the commands."

step "1. APIs"
apis=(run.googleapis.com artifactregistry.googleapis.com cloudbuild.googleapis.com secretmanager.googleapis.com
      redis.googleapis.com compute.googleapis.com iam.googleapis.com logging.googleapis.com monitoring.googleapis.com
      cloudquotas.googleapis.com)  # cloudquotas: preflight and /gemma quota read the Cloud Run GPU quota
[ "$EGRESS" = connector ] && apis+=(vpcaccess.googleapis.com)
[ "$ALERTS" = pubsub ] && apis+=(pubsub.googleapis.com)
run gcloud services enable "${apis[@]}" --project="$PROJECT"  # enabling an enabled API is a no-op

step "2. Artifact Registry repository for the bot's image"
if ! exists gcloud artifacts repositories describe "$REPO" --location="$REGION" --project="$PROJECT"; then
  run gcloud artifacts repositories create "$REPO" --repository-format=docker --location="$REGION" \
    --description="gemma-sre bot images" --project="$PROJECT"
fi

step "3. The bot's runtime service account and its roles"
if ! exists gcloud iam service-accounts describe "$SA" --project="$PROJECT"; then
  run gcloud iam service-accounts create "$SA_NAME" --display-name="gemma-sre bot" --project="$PROJECT"
fi
# run.developer: deploy/scale/destroy the vLLM service; iam.serviceAccountUser: deploy it with its runtime account;
# run.invoker: call the private model; logging/monitoring viewers: read-only diagnosis; secretAccessor: its secrets
# (the Slack ones, and the HF token preflight checks the checkpoint with); cloudquotas.viewer: GPU quota (preflight,
# /gemma quota). With MODEL_BUCKET, also grant roles/storage.objectViewer on that bucket so preflight can list it.
roles=(roles/run.developer roles/iam.serviceAccountUser roles/run.invoker roles/logging.viewer roles/monitoring.viewer
       roles/secretmanager.secretAccessor roles/cloudquotas.viewer)
for role in "${roles[@]}"; do  # adding a binding that exists is a no-op
  run gcloud projects add-iam-policy-binding "$PROJECT" --member="serviceAccount:$SA" --role="$role" \
    --condition=None --quiet
done

step "4. Secrets (Secret Manager)"
secret "$HF_SECRET" HF_TOKEN
secret slack-bot-token SLACK_BOT_TOKEN
if [ "$SLACK_MODE" = socket ]; then secret slack-app-token SLACK_APP_TOKEN; else secret slack-signing-secret SLACK_SIGNING_SECRET; fi
secret alert-webhook-token ALERT_WEBHOOK_TOKEN

step "5. Memorystore for Redis, reached over the VPC"
if ! exists gcloud redis instances describe "$REDIS_INSTANCE" --region="$REGION" --project="$PROJECT"; then
  run gcloud redis instances create "$REDIS_INSTANCE" --region="$REGION" --size=1 --tier=basic \
    --redis-version=redis_7_2 --network="projects/$PROJECT/global/networks/$NETWORK" --connect-mode=direct-peering \
    --project="$PROJECT"
fi
if [ "$EGRESS" = connector ]; then
  if ! exists gcloud compute networks vpc-access connectors describe "$CONNECTOR" --region="$REGION" --project="$PROJECT"; then
    run gcloud compute networks vpc-access connectors create "$CONNECTOR" --region="$REGION" --network="$NETWORK" \
      --range="$CONNECTOR_RANGE" --min-instances=2 --max-instances=3 --project="$PROJECT"
  fi
  VPC_FLAG="--vpc-connector=$CONNECTOR"
else
  echo "   Direct VPC egress: nothing to create; the service gets IPs from subnet '$SUBNET' (/26 or larger)."
  VPC_FLAG="--subnet=$SUBNET"
fi

step "6. The Slack app ($SLACK_MODE mode)"
if [ "$SLACK_MODE" = socket ]; then
  echo "   api.slack.com/apps > Create New App > From an app manifest: slack-app-manifest.yaml with"
  echo "   socket_mode_enabled: true (no URLs needed). Then Basic Information > App-Level Tokens: create one with"
  echo "   scope connections:write (xapp-…) -> SLACK_APP_TOKEN; install the app -> SLACK_BOT_TOKEN (xoxb-…)."
else
  echo "   api.slack.com/apps > Create New App > From an app manifest: slack-app-manifest.yaml, BOT_URL replaced by"
  echo "   the bot's Cloud Run URL (after the first deploy). Install it -> SLACK_BOT_TOKEN; Basic Information ->"
  echo "   Signing Secret -> SLACK_SIGNING_SECRET."
fi

SUB_PATH=""
if [ "$ALERTS" = pubsub ]; then
  step "7. Pub/Sub channel for Cloud Monitoring alerts"
  if ! exists gcloud pubsub topics describe "$TOPIC" --project="$PROJECT"; then
    run gcloud pubsub topics create "$TOPIC" --project="$PROJECT"
  fi
  if ! exists gcloud pubsub subscriptions describe "$SUBSCRIPTION" --project="$PROJECT"; then
    run gcloud pubsub subscriptions create "$SUBSCRIPTION" --topic="$TOPIC" --ack-deadline=60 --project="$PROJECT"
  fi
  run gcloud pubsub subscriptions add-iam-policy-binding "$SUBSCRIPTION" --member="serviceAccount:$SA" \
    --role=roles/pubsub.subscriber --project="$PROJECT"
  TOPIC_PATH="projects/$PROJECT/topics/$TOPIC"
  if [ -z "$(gcloud beta monitoring channels list --filter="type=\"pubsub\" AND labels.topic=\"$TOPIC_PATH\"" \
        --format='value(name)' --project="$PROJECT" 2>/dev/null)" ]; then
    run gcloud beta monitoring channels create --display-name="gemma-sre alerts (Pub/Sub)" --type=pubsub \
      --channel-labels="topic=$TOPIC_PATH" --project="$PROJECT"
  fi
  # Cloud Monitoring publishes as its notification service agent (created with the first Pub/Sub channel):
  # https://cloud.google.com/monitoring/support/notification-options#pubsub
  NUMBER="$(gcloud projects describe "$PROJECT" --format='value(projectNumber)' 2>/dev/null || echo PROJECT_NUMBER)"
  run gcloud pubsub topics add-iam-policy-binding "$TOPIC" \
    --member="serviceAccount:service-${NUMBER}@gcp-sa-monitoring-notification.iam.gserviceaccount.com" \
    --role=roles/pubsub.publisher --project="$PROJECT"
  SUB_PATH="projects/$PROJECT/subscriptions/$SUBSCRIPTION"
  echo "   Add the channel to your alerting policies (Monitoring > Alerting > policy > Notifications)."
fi

step "Next: build and deploy the bot"
REDIS_HOST="$(gcloud redis instances describe "$REDIS_INSTANCE" --region="$REGION" --project="$PROJECT" \
  --format='value(host)' 2>/dev/null || true)"
REDIS_URL="redis://${REDIS_HOST:-REDIS_HOST}:6379/0"
if [ "$SLACK_MODE" = socket ]; then SLACK_SECRET="SLACK_APP_TOKEN=slack-app-token:latest"; else SLACK_SECRET="SLACK_SIGNING_SECRET=slack-signing-secret:latest"; fi
SECRETS="^|^SLACK_BOT_TOKEN=slack-bot-token:latest|$SLACK_SECRET|ALERT_WEBHOOK_TOKEN=alert-webhook-token:latest|HF_TOKEN=$HF_SECRET:latest"
printf '  gcloud builds submit --config cloudbuild.yaml --project=%s \\\n' "$PROJECT"
printf "    '--substitutions=%s'\n" "^;^_REGION=$REGION;_REPO=$REPO;_REDIS_URL=$REDIS_URL;_VPC_FLAG=$VPC_FLAG;_SERVICE_ACCOUNT=$SA_NAME;_ALERT_SUBSCRIPTION=$SUB_PATH;_SECRETS=$SECRETS;_DEPLOYERS=U012ABC,U034DEF"
