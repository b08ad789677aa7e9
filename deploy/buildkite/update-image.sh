#!/usr/bin/env bash
# Keep the runner image current on a vendor node without cutting a run short (docs/vendors.md, docs/toolchains.md).
#
#   sudo ./scripts/buildkite/update-image.sh            pull, then restart every GPU's agent in turn
#   sudo ./scripts/buildkite/update-image.sh --auto     from cron: pull; restart only agents that are idle and still
#                                                       run with an older image than the one just pulled
#   options: --family nvidia|amd (default: amd where /dev/kfd exists, else nvidia), --image IMAGE (another image
#            than the published one), --root DIR (state under DIR instead of /)
#
# The image pulled is the one published for this checkout's toolchain manifest: ghcr.io/gpu-mode/kernelbot-runner
# tagged <family>-toolchain-<manifest hash> (deploy/github/publish_images.yml builds it), so pulling the repository
# and running this script moves a node to the toolchain the platform expects; the runner refuses runs meant for
# another. Each job runs `kernelbot-runner:latest` (deploy/buildkite/run-job.sh), so the next job takes the new
# image at once; an agent restart also picks up a changed agent configuration. Without --auto a restart is graceful:
# systemd's SIGTERM makes the agent finish its current job first (TimeoutStopSec in the unit). With --auto a busy
# agent (a runner container labelled with its GPU is running) is left alone and restarted by a later run, because
# the image each agent was last started with is recorded in /var/lib/buildkite-agent/gpuN/image-id.
set -euo pipefail

# BEGIN toolchain: the published images by manifest hash (`kernelbot toolchain render` writes these lines)
PUBLISHED="ghcr.io/gpu-mode/kernelbot-runner"
NVIDIA_TAG="nvidia-toolchain-2418af183e90"
AMD_TAG="amd-toolchain-dc178507ecb8"
# END toolchain
LOCAL_TAG="kernelbot-runner:latest"
IMAGE="" FAMILY="" AUTO=0
ROOT="${KERNELBOT_ROOT:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --image) IMAGE="$2"; shift 2 ;;
    --family) FAMILY="$2"; shift 2 ;;
    --auto) AUTO=1; shift ;;
    --root) ROOT="$2"; shift 2 ;;
    *) echo "update-image.sh: unknown option $1 (known: --auto, --family nvidia|amd, --image IMAGE, --root DIR)" >&2
       exit 2 ;;
  esac
done
ROOT="${ROOT%/}"
if [ -z "$FAMILY" ]; then
  FAMILY=nvidia
  [ -e /dev/kfd ] && FAMILY=amd
fi
case "$FAMILY" in
  nvidia) TAG="$NVIDIA_TAG" ;;
  amd) TAG="$AMD_TAG" ;;
  *) echo "update-image.sh: --family must be nvidia or amd, got '$FAMILY'" >&2; exit 2 ;;
esac
IMAGE="${IMAGE:-$PUBLISHED:$TAG}"

image_id() { docker image inspect --format '{{.Id}}' "$1" 2> /dev/null || true; }

docker pull --quiet "$IMAGE" > /dev/null
NEW="$(image_id "$IMAGE")"
[ -n "$NEW" ] || { echo "update-image.sh: $IMAGE was pulled but cannot be inspected" >&2; exit 1; }
if [ "$(image_id "$LOCAL_TAG")" != "$NEW" ]; then
  docker tag "$IMAGE" "$LOCAL_TAG"
  echo "runner image is now $NEW"
else
  echo "runner image unchanged ($NEW)"
fi

restarted=0 waiting=0
for unit in $(systemctl list-units --all --plain --no-legend 'buildkite-agent-gpu*.service' | awk '{print $1}'); do
  index="${unit#buildkite-agent-gpu}"; index="${index%.service}"
  record="$ROOT/var/lib/buildkite-agent/gpu$index/image-id"
  if [ "$AUTO" = 1 ]; then
    if [ "$(cat "$record" 2> /dev/null || true)" = "$NEW" ]; then
      continue  # already started with this image
    fi
    if [ -n "$(docker ps --quiet --filter "label=kernelbot.gpu-index=$index")" ]; then
      echo "$unit is running a job: left for a later run"
      waiting=$(( waiting + 1 ))
      continue
    fi
  fi
  echo "restarting $unit (a running job finishes first)"
  systemctl restart "$unit"
  mkdir -p "$(dirname "$record")"
  printf '%s\n' "$NEW" > "$record"
  restarted=$(( restarted + 1 ))
done
docker image prune --force --filter "dangling=true" > /dev/null
echo "agents restarted: $restarted, busy and left for later: $waiting"
