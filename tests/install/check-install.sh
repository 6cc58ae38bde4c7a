#!/bin/sh
# make install, then an application outside this repository: installs the
# build into a fresh prefix, builds the C program examples/embed against it
# with a C toolchain, once with find_package(energy CONFIG REQUIRED)
# (energy::runtime, the shared library) and once with pkg-config, compiles
# a model with the installed energyc (which links the installed kernel
# support library) and runs both builds on it: the energy must fall at
# every step.
# Usage: check-install.sh SOURCE_DIR BUILD_DIR WORK_DIR C_COMPILER
set -eu
source=$1 build=$2 work=$3 cc=$4
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
for file in bin/energyc bin/energy-run bin/energy-opt include/energy/energy.h \
            include/energy/Runtime/Session.h lib/libenergy-runtime.a \
            lib/libenergy-runtime.so lib/libEnergyKernelSupport.a \
            lib/cmake/energy/energyConfig.cmake lib/pkgconfig/energy.pc; do
  test -f "$prefix/$file" || { echo "not installed: $file"; exit 1; }
done
soname=$(readelf -d "$prefix/lib/libenergy-runtime.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
case $soname in
  libenergy-runtime.so.[0-9]*) test -f "$prefix/lib/$soname" || {
    echo "no file for the SONAME $soname"; exit 1; } ;;
  *) echo "libenergy-runtime.so has no versioned SONAME: '$soname'"; exit 1 ;;
esac
# The application sees only the prefix: not this repository's build tree.
cmake -S "$source/examples/embed" -B "$work/embed" -G Ninja \
      -DCMAKE_C_COMPILER="$cc" \
      -DCMAKE_PREFIX_PATH="$prefix" > "$work/configure.log"
grep -q "^energy_DIR:PATH=$prefix/lib/cmake/energy\$" "$work/embed/CMakeCache.txt" || {
  echo "the application did not find the installed package"; exit 1; }
cmake --build "$work/embed" > "$work/build.log"
# pkg-config, with the C compiler alone (no C++ driver, no C++ flags).
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs energy)
"$cc" -std=c11 -o "$work/embed-pkg-config" "$source/examples/embed/main.c" \
      $flags "-Wl,-rpath,$prefix/lib"
"$prefix/bin/energyc" "$source/examples/predictive_coding.energy" --dtype f64 \
    -o "$work/pc.so"
for program in "$work/embed/energy-embed" "$work/embed-pkg-config"; do
  ldd "$program" | grep -q "libenergy-runtime.so.* => $prefix/lib/" || {
    echo "$program does not load the installed shared runtime"; exit 1; }
  cmake -DPROGRAM="$program" -DARTIFACT="$work/pc.so" \
        "-DARGS=N=4 K=3 D=4 Z=2 --steps 5" \
        -P "$source/examples/embed/check-energy-falls.cmake"
done
# The Python package, imported from the prefix alone.
package=$(ls -d "$prefix"/lib/python3*/dist-packages/energy)
PYTHONPATH=$(dirname "$package") /usr/bin/python3 -c "
import energy, sys
assert energy.__file__.startswith('$prefix'), energy.__file__
model = energy.load('$work/pc.so')
assert model.name == 'predictive_coding', model.name
"
echo "installed, built against the package and with pkg-config, and ran"
