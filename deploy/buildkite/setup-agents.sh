#!/usr/bin/env bash
# Every GPU of this node at once: setup-agent.sh for index 0..count-1 with queue {vendor}-{gpu}-{index}.
#
#   sudo ./deploy/buildkite/setup-agents.sh --vendor nvidia --gpu h100 [--memory 32G] [--cpus 16] [--count N] [--root DIR]
#
# The agent token is read from /etc/buildkite-agent/token as setup-agent.sh does. Prints the catalogue entry for
# the dispatcher at the end.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENDOR="" GPU="" MEMORY="32G" CPUS=16 COUNT="" ROOT_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --vendor) VENDOR="$2"; shift 2 ;;
    --gpu) GPU="$2"; shift 2 ;;
    --memory) MEMORY="$2"; shift 2 ;;
    --cpus) CPUS="$2"; shift 2 ;;
    --count) COUNT="$2"; shift 2 ;;
    --root) ROOT_ARGS=(--root "$2"); shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$VENDOR" ] && [ -n "$GPU" ] || { echo "--vendor and --gpu are required" >&2; exit 2; }
VENDOR="$(echo "$VENDOR" | tr '[:upper:]' '[:lower:]')"
GPU="$(echo "$GPU" | tr '[:upper:]' '[:lower:]')"

if [ -z "$COUNT" ]; then
  if command -v nvidia-smi > /dev/null; then COUNT="$(nvidia-smi --list-gpus | wc -l)"
  else COUNT="$(cd "$HERE/../.." && python3 -m runner.host.rocm_devices count)"  # amd-smi, else rocm-smi
  fi
  [ "${COUNT:-0}" -gt 0 ] || { echo "no GPU found by nvidia-smi, amd-smi or rocm-smi: pass --count" >&2; exit 2; }
fi

QUEUES=()
for ((i = 0; i < COUNT; i++)); do
  "$HERE/setup-agent.sh" "$i" "${VENDOR}-${GPU}-${i}" "$MEMORY" "$CPUS" "${ROOT_ARGS[@]}"
  QUEUES+=("${VENDOR}-${GPU}-${i}")
done
echo "Catalogue entry for the dispatcher:"
echo "  ${VENDOR}-$(echo "$GPU" | tr '[:lower:]' '[:upper:]'): {backend: buildkite, queues: [$(IFS=,; echo "${QUEUES[*]}" | sed 's/,/, /g')]}"
