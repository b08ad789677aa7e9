#!/usr/bin/env bash
# One Buildkite agent for one GPU of this node, pinned to that GPU and fenced by its own slice (docs/vendors.md).
#
#   sudo ./scripts/buildkite/setup-agent.sh <gpu index> <queue> <memory> <cpus>
#   e.g. sudo ./scripts/buildkite/setup-agent.sh 0 nvidia-h100-0 32G 16
#
# Reads the agent token from /etc/buildkite-agent/token (one line `BUILDKITE_AGENT_TOKEN=...`, mode 0600), so it
# never appears on a command line or in the shell history. For GPU index N it writes
#   /etc/systemd/system/buildkite-gpuN.slice                 MemoryMax=<memory>, CPUQuota=<cpus>x100%, AllowedCPUs
#   /etc/systemd/system/buildkite-agent-gpuN.service         CUDA_VISIBLE_DEVICES=N (AMD: HIP_ and ROCR_VISIBLE_DEVICES=N),
#                                                            in that slice
#   /etc/buildkite-agent/agent-N/buildkite-agent.cfg         the token, tag queue=<queue>, its own build path
# then reloads systemd and enables and starts buildkite-agent-gpuN.
#
# The queue must be `{vendor}-{gpu}-{index}`: lower-case letters and digits, e.g. nvidia-h100-0, amd-mi300-3.
# Options (after the four arguments): --root DIR writes everything under DIR instead of / (tests, dry runs);
# KERNELBOT_ROOT does the same. systemctl is called whatever the root: a test puts a recording one on PATH.
set -euo pipefail

usage() {
  echo "usage: setup-agent.sh <gpu index> <queue {vendor}-{gpu}-{index}> <memory e.g. 32G> <cpus e.g. 16> [--root DIR]" >&2
  exit 2
}
fail() { echo "setup-agent.sh: $*" >&2; exit 2; }

[ $# -ge 4 ] || usage
INDEX="$1" QUEUE="$2" MEMORY="$3" CPUS="$4"
shift 4
ROOT="${KERNELBOT_ROOT:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --root) [ $# -ge 2 ] || usage; ROOT="$2"; shift 2 ;;
    *) fail "unknown option $1" ;;
  esac
done
ROOT="${ROOT%/}"

[[ "$INDEX" =~ ^[0-9]+$ ]] || fail "the GPU index must be a number (0, 1, ...), got '$INDEX'"
[[ "$QUEUE" =~ ^[a-z0-9]+-[a-z0-9]+-[0-9]+$ ]] \
  || fail "the queue must be {vendor}-{gpu}-{index} in lower-case letters and digits (e.g. nvidia-h100-$INDEX), got '$QUEUE'"
[[ "$MEMORY" =~ ^[1-9][0-9]*[KMGT]?$ ]] || fail "memory must be a size such as 32G or 65536M, got '$MEMORY'"
[[ "$CPUS" =~ ^[1-9][0-9]*$ ]] || fail "cpus must be a whole number of cores such as 16, got '$CPUS'"
VENDOR="${QUEUE%%-*}"
# The agent's GPU, in the variables its vendor's runtime reads: CUDA for NVIDIA; HIP and ROCr for AMD (ROCr's
# is the one below HIP, so a job that bypasses HIP sees the same single GPU). run-job.sh picks the vendor's devices
# and image from them.
if [ "$VENDOR" = amd ]; then VISIBLE_ENV="Environment=HIP_VISIBLE_DEVICES=${INDEX}
Environment=ROCR_VISIBLE_DEVICES=${INDEX}"
else VISIBLE_ENV="Environment=CUDA_VISIBLE_DEVICES=${INDEX}"; fi

if [ -z "$ROOT" ] && [ "$VENDOR" != amd ] && command -v nvidia-smi > /dev/null; then
  GPUS="$(nvidia-smi --list-gpus | grep -c '^GPU ' || true)"
  [ "$INDEX" -lt "$GPUS" ] || fail "this node has $GPUS NVIDIA GPU(s) (nvidia-smi --list-gpus): index $INDEX is not one of them"
fi
if [ "$VENDOR" = amd ]; then
  # amd-smi (or rocm-smi) must list the GPU and sysfs must give it a render node: the one device its jobs get
  # (beside /dev/kfd), fixed here in the unit so a job never looks it up.
  RENDER="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." \
            && python3 -m runner.host.rocm_devices render-node "$INDEX" --root "${ROOT:-/}")" \
    || fail "GPU index $INDEX: no AMD GPU with a render node at that index (see the line above)"
  VISIBLE_ENV="${VISIBLE_ENV}
Environment=KERNELBOT_RENDER_NODE=${RENDER}"
fi

TOKEN_FILE="$ROOT/etc/buildkite-agent/token"
[ -r "$TOKEN_FILE" ] || fail "no agent token: put the line BUILDKITE_AGENT_TOKEN=<agent token> in /etc/buildkite-agent/token (mode 0600) first"
# Read, never sourced: the file is data, not a script.
TOKEN="$(sed -n 's/^[[:space:]]*BUILDKITE_AGENT_TOKEN=//p' "$TOKEN_FILE" | head -n 1 | tr -d '"'"'"'[:space:]')"
[ -n "$TOKEN" ] || fail "$TOKEN_FILE has no BUILDKITE_AGENT_TOKEN=<agent token> line"

SYSTEMD="$ROOT/etc/systemd/system"
AGENT_DIR="$ROOT/etc/buildkite-agent/agent-$INDEX"
STATE="/var/lib/buildkite-agent/gpu$INDEX"
SLICE="buildkite-gpu$INDEX.slice"
UNIT="buildkite-agent-gpu$INDEX.service"
install -d -m 0755 "$SYSTEMD" "$ROOT/etc/buildkite-agent" "$ROOT/var/lib/buildkite-agent"
install -d -m 0750 "$AGENT_DIR" "$ROOT$STATE"
OWNER=""
if [ -z "$ROOT" ] && id buildkite-agent > /dev/null 2>&1; then OWNER=buildkite-agent; fi

TOTAL_CPUS="$(nproc)"
FIRST=$(( (INDEX * CPUS) % TOTAL_CPUS )); LAST=$(( FIRST + CPUS - 1 ))
[ "$LAST" -ge "$TOTAL_CPUS" ] && LAST=$(( TOTAL_CPUS - 1 ))

cat > "$SYSTEMD/$SLICE" <<SLICE
[Unit]
Description=KernelBot runs on GPU ${INDEX} (${QUEUE})

[Slice]
# cgroup v2: MemoryMax is memory.max, CPUQuota is cpu.max (quota per 100 ms period).
MemoryMax=${MEMORY}
MemorySwapMax=0
CPUQuota=$(( CPUS * 100 ))%
AllowedCPUs=${FIRST}-${LAST}
TasksMax=4096
SLICE

cat > "$SYSTEMD/$UNIT" <<UNIT
[Unit]
Description=Buildkite agent for KernelBot on GPU ${INDEX} (queue ${QUEUE})
After=network-online.target docker.service
Wants=network-online.target

[Service]
Type=simple
User=buildkite-agent
Slice=${SLICE}
${VISIBLE_ENV}
Environment=KERNELBOT_GPU_INDEX=${INDEX}
# Optional runner identity (KB_NATS_URL with the user runner-<name>, KB_RUNNER_NAME=<name>), mode 0600.
EnvironmentFile=-/etc/buildkite-agent/runner.env
ExecStart=/usr/bin/buildkite-agent start --config /etc/buildkite-agent/agent-${INDEX}/buildkite-agent.cfg
# A graceful stop lets a running job finish first (update-image.sh relies on it).
KillSignal=SIGTERM
KillMode=mixed
TimeoutStopSec=5400
Restart=on-failure
RestartSec=5

[Install]
WantedBy=multi-user.target
UNIT

CFG="$AGENT_DIR/buildkite-agent.cfg"
( umask 077; : > "$CFG" )
cat > "$CFG" <<CFG
token="${TOKEN}"
name="%hostname-${QUEUE}"
tags="queue=${QUEUE},gpu-index=${INDEX}"
build-path="${STATE}/builds"
hooks-path="/etc/buildkite-agent/hooks"
plugins-path="${STATE}/plugins"
# One job at a time: the GPU is the unit of fairness.
spawn=1
disconnect-after-job=false
# Only scripts of the checked-out pipeline run here (deploy/buildkite/run-job.sh), never a command from a build.
no-command-eval=true
no-plugins=true
CFG
chmod 0600 "$CFG"
if [ -n "$OWNER" ]; then
  chown "$OWNER" "$CFG" "$AGENT_DIR" "$ROOT$STATE"
  # The job script starts the runner container; it is the only command these agents run (no-command-eval).
  getent group docker > /dev/null && usermod -aG docker "$OWNER"
fi

systemctl daemon-reload
systemctl enable --now "$UNIT"
echo "GPU $INDEX: $UNIT in $SLICE (memory $MEMORY, $CPUS cpus), queue $QUEUE"
echo "check it: systemctl status buildkite-agent-gpu$INDEX; kernelbot host-check"
