#!/bin/sh
# Compiles every example model to an f32 and an f64 artifact, once per test
# run (the ctest fixture the end-to-end tests require). The f32 ones as
# users get them (energyc's default level); the f64 ones, which the checks
# against the interpreter read, at -O0, which compiles twice as fast as -O1.
# Usage: build_artifacts.sh ENERGYC EXAMPLES_DIR OUT_DIR
set -eu
energyc=$1 examples=$2 out=$3
mkdir -p "$out"
for model in "$examples"/*.energy; do
  name=$(basename "$model" .energy)
  for dtype in f32 f64; do
    level=default
    [ "$dtype" = f64 ] && level=0
    echo "$model $dtype $level $out/$name.$dtype.so"
  done
done | xargs -P 2 -n 4 sh -c 'level=; [ "$3" = default ] || level="--opt-level=$3"
  "$0" "$1" --dtype "$2" $level -o "$4" || exit 255' "$energyc"
echo "built $(ls "$out"/*.so | wc -l) artifacts in $out"
