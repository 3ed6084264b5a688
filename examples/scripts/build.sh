#!/usr/bin/env bash
# Builds one target; TARGET comes from the action's env.
set -euo pipefail
echo "building ${TARGET:-unknown}"
echo "OUTPUT: {\"target\": \"${TARGET:-unknown}\", \"artifact\": \"dist/app-${TARGET:-unknown}\"}"
