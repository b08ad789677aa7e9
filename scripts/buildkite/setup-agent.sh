#!/usr/bin/env bash
# The onboarding guide's entry point; the script itself lives in deploy/buildkite/ (see docs/vendors.md).
exec "$(dirname "${BASH_SOURCE[0]}")/../../deploy/buildkite/setup-agent.sh" "$@"
