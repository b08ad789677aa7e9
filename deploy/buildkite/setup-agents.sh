#!/usr/bin/env bash
# Vendor onboarding: one Buildkite agent per GPU of this node, each pinned to its GPU and fenced by its own cgroup.
#
#   sudo ./setup-agents.sh --vendor nvidia --gpu h100 --token <agent token> [--memory 32G] [--cpus 16]
#
# For GPU index i it writes
#   /etc/buildkite-agent/agent-gpu<i>.cfg                       queue {vendor}-{gpu}-{i}, its own build directory
#   /etc/systemd/system/kernelbot-gpu<i>.slice                  MemoryMax, CPUQuota, AllowedCPUs for that GPU
#   /etc/systemd/system/buildkite-agent-gpu@.service            one unit template, CUDA_VISIBLE_DEVICES=%i
# and enables buildkite-agent-gpu@<i>. Give the dispatcher's catalogue entry the queues printed at the end.
set -euo pipefail

VENDOR="" GPU="" TOKEN="" MEMORY="32G" CPUS=16 COUNT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --vendor) VENDOR="$2"; shift 2 ;;
    --gpu) GPU="$2"; shift 2 ;;
    --token) TOKEN="$2"; shift 2 ;;
    --memory) MEMORY="$2"; shift 2 ;;
    --cpus) CPUS="$2"; shift 2 ;;
    --count) COUNT="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$VENDOR" ] && [ -n "$GPU" ] && [ -n "$TOKEN" ] || { echo "--vendor, --gpu and --token are required" >&2; exit 2; }
VENDOR="$(echo "$VENDOR" | tr '[:upper:]' '[:lower:]')"
GPU="$(echo "$GPU" | tr '[:upper:]' '[:lower:]')"

if [ -z "$COUNT" ]; then
  if command -v nvidia-smi > /dev/null; then COUNT="$(nvidia-smi --list-gpus | wc -l)"
  elif command -v rocm-smi > /dev/null; then COUNT="$(rocm-smi --showid --csv | tail -n +2 | grep -c .)"
  else echo "no nvidia-smi or rocm-smi: pass --count" >&2; exit 2; fi
fi
VISIBLE_VAR=CUDA_VISIBLE_DEVICES
[ "$VENDOR" = amd ] && VISIBLE_VAR=HIP_VISIBLE_DEVICES

install -d -m 0755 /etc/buildkite-agent /var/lib/buildkite-agent
cat > /etc/systemd/system/buildkite-agent-gpu@.service <<UNIT
[Unit]
Description=Buildkite agent for KernelBot on GPU %i
After=network-online.target docker.service
Wants=network-online.target

[Service]
Type=simple
User=buildkite-agent
Slice=kernelbot-gpu%i.slice
Environment=${VISIBLE_VAR}=%i
Environment=CUDA_VISIBLE_DEVICES=%i
ExecStart=/usr/bin/buildkite-agent start --config /etc/buildkite-agent/agent-gpu%i.cfg
# A graceful stop lets a running job finish (update-image.sh relies on it).
KillSignal=SIGTERM
TimeoutStopSec=5400
Restart=on-failure
RestartSec=5

[Install]
WantedBy=multi-user.target
UNIT

TOTAL_CPUS="$(nproc)"
QUEUES=()
for ((i = 0; i < COUNT; i++)); do
  queue="${VENDOR}-${GPU}-${i}"
  QUEUES+=("$queue")
  first=$(( (i * CPUS) % TOTAL_CPUS )); last=$(( first + CPUS - 1 ))
  [ "$last" -ge "$TOTAL_CPUS" ] && last=$(( TOTAL_CPUS - 1 ))
  cat > "/etc/systemd/system/kernelbot-gpu${i}.slice" <<SLICE
[Unit]
Description=KernelBot runs on GPU ${i} (${queue})

[Slice]
MemoryMax=${MEMORY}
MemorySwapMax=0
CPUQuota=$(( CPUS * 100 ))%
AllowedCPUs=${first}-${last}
TasksMax=4096
SLICE
  install -d -o buildkite-agent -m 0750 "/var/lib/buildkite-agent/gpu${i}"
  install -m 0600 -o buildkite-agent /dev/null "/etc/buildkite-agent/agent-gpu${i}.cfg"
  cat > "/etc/buildkite-agent/agent-gpu${i}.cfg" <<CFG
token="${TOKEN}"
name="%hostname-${queue}"
tags="queue=${queue},vendor=${VENDOR},gpu=${GPU},gpu-index=${i}"
build-path="/var/lib/buildkite-agent/gpu${i}/builds"
hooks-path="/etc/buildkite-agent/hooks"
plugins-path="/var/lib/buildkite-agent/gpu${i}/plugins"
# One job at a time: the GPU is the unit of fairness.
spawn=1
disconnect-after-job=false
no-command-eval=true
CFG
done

systemctl daemon-reload
for ((i = 0; i < COUNT; i++)); do
  systemctl enable --now "buildkite-agent-gpu@${i}.service"
done
echo "Agents running. Catalogue entry for the dispatcher:"
echo "  ${VENDOR}-$(echo "$GPU" | tr '[:lower:]' '[:upper:]'): {backend: buildkite, queues: [$(IFS=,; echo "${QUEUES[*]}" | sed 's/,/, /g')]}"
