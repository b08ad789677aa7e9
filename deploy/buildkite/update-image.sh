#!/usr/bin/env bash
# Keep the runner image current on a vendor node without cutting a run short.
#
#   sudo ./update-image.sh [--image ghcr.io/gpu-mode/kernelbot-runner:latest]
#
# Pulls the new image and tags it kernelbot-runner:latest (what pipeline.yml runs), then restarts each GPU's agent
# in turn; systemd's SIGTERM makes an agent finish its current job first (TimeoutStopSec in the unit), so at most
# one GPU of the node is out of service at a time.
set -euo pipefail

IMAGE="ghcr.io/gpu-mode/kernelbot-runner:latest"
while [ $# -gt 0 ]; do
  case "$1" in
    --image) IMAGE="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

docker pull "$IMAGE"
docker tag "$IMAGE" kernelbot-runner:latest

for unit in $(systemctl list-units --plain --no-legend 'buildkite-agent-gpu@*.service' | awk '{print $1}'); do
  echo "restarting $unit once its current job is done"
  systemctl restart "$unit"
done
docker image prune -f --filter "dangling=true" > /dev/null
echo "runner image updated: $(docker image inspect --format '{{.Id}}' kernelbot-runner:latest)"
