#!/bin/sh
# Compiles every example model to an f32 and an f64 artifact, once per test
# run (the ctest fixture the end-to-end tests require).
# Usage: build_artifacts.sh ENERGYC EXAMPLES_DIR OUT_DIR
set -eu
energyc=$1 examples=$2 out=$3
mkdir -p "$out"
for model in "$examples"/*.energy; do
  name=$(basename "$model" .energy)
  for dtype in f32 f64; do
    echo "$model $dtype $out/$name.$dtype.so"
  done
done | xargs -P 2 -n 3 sh -c '"$0" "$1" --dtype "$2" -o "$3" || exit 255' "$energyc"
echo "built $(ls "$out"/*.so | wc -l) artifacts in $out"
