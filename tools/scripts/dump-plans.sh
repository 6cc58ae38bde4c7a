#!/bin/sh
# Writes the kernel plan (--emit=plan), the CPU's LLVM IR and the CUDA PTX of every
# example and zoo model into a folder, to diff what a compiler change does
# to them: tools/scripts/dump-plans.sh build/bin/energyc /tmp/plans-after
set -eu
energyc=${1:?usage: dump-plans.sh ENERGYC OUTDIR}
out=${2:?usage: dump-plans.sh ENERGYC OUTDIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
for model in "$root"/examples/*.energy "$root"/tests/zoo/models/*.energy; do
  name=$(basename "$model" .energy)
  case $model in */zoo/*) name=zoo_$name ;; esac
  for emit in plan llvm; do
    "$energyc" "$model" --emit=$emit -o "$out/$name.$emit" 2>"$out/$name.$emit.err" ||
      echo "$name: --emit=$emit failed (see $out/$name.$emit.err)"
  done
  "$energyc" "$model" --emit=ptx --target=cuda -o "$out/$name.ptx" \
    2>"$out/$name.ptx.err" || echo "$name: --target=cuda --emit=ptx failed"
done
