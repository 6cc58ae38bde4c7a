#!/bin/sh
# make install, then an application outside this repository: installs the
# build into a fresh prefix, builds examples/embed against it with
# find_package(energy CONFIG REQUIRED) (energy::runtime), compiles a model
# with the installed energyc (which links the installed kernel support
# library) and runs the application on it: the energy must fall at every
# step.
# Usage: check-install.sh SOURCE_DIR BUILD_DIR WORK_DIR C_COMPILER CXX_COMPILER
set -eu
source=$1 build=$2 work=$3 cc=$4 cxx=$5
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
for file in bin/energyc bin/energy-run bin/energy-opt include/energy/energy.h \
            include/energy/Runtime/Session.h lib/libenergy-runtime.a \
            lib/libEnergyKernelSupport.a lib/cmake/energy/energyConfig.cmake; do
  test -f "$prefix/$file" || { echo "not installed: $file"; exit 1; }
done
# The application sees only the prefix: not this repository's build tree.
cmake -S "$source/examples/embed" -B "$work/embed" -G Ninja \
      -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
      -DCMAKE_PREFIX_PATH="$prefix" > "$work/configure.log"
grep -q "^energy_DIR:PATH=$prefix/lib/cmake/energy\$" "$work/embed/CMakeCache.txt" || {
  echo "the application did not find the installed package"; exit 1; }
cmake --build "$work/embed" > "$work/build.log"
"$prefix/bin/energyc" "$source/examples/predictive_coding.energy" --dtype f64 \
    -o "$work/pc.so"
cmake -DPROGRAM="$work/embed/energy-embed" -DARTIFACT="$work/pc.so" \
      "-DARGS=N=4 K=3 D=4 Z=2 --steps 5" \
      -P "$source/examples/embed/check-energy-falls.cmake"
echo "installed, built against the package and ran"
