#!/usr/bin/env bash
# demo.sh - the end-to-end demo: show the gradient the compiler derives for
# an example model, compile it to a native artifact, and run gradient descent
# on it with the runtime, printing the energy falling step by step.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
model=examples/predictive_coding.energy

echo "== the model ($model)"
grep -v '^#' "$model"
echo
echo "== energyc --emit=grad: the gradient of the energy with respect to mu,"
echo "   derived by the compiler (reverse mode through the lse and the tanh)"
"$build/bin/energyc" "$model" --emit=grad | sed -n '/gradient @mu/,$p'
echo
artifact="$build/demo/predictive_coding.so"
mkdir -p "$(dirname "$artifact")"
echo "== energyc: compile to a shared-library artifact ($artifact)"
"$build/bin/energyc" "$model" -o "$artifact"
echo
echo "== energy-run: gradient descent on the energy, step by step (compiled)"
"$build/bin/energy-run" "$artifact" --dim N=4 --dim K=3 --dim D=4 \
  --dim Z=2 --init random:0 --steps 20 --trace
