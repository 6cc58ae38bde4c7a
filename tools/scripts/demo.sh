#!/usr/bin/env bash
# demo.sh - the end-to-end demo: what the project can run today.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
echo "== energy-opt: parse, verify and print an energy model"
"$build/bin/energy-opt" tests/lit/Dialect/energy/ops.mlir | sed -n '1,40p'
echo "..."
echo "== energy-opt: check that every energy term is differentiable"
"$build/bin/energy-opt" --energy-check-differentiable \
  tests/lit/Dialect/energy/derivative-rules.mlir > /dev/null && echo "ok"
