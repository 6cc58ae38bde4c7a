#!/bin/sh
# pip install . from the checkout into a fresh virtual environment, with no
# package index (--no-index: nothing from the network), the module _energy
# taken from BUILD_DIR's build (ENERGY_BUILD_DIR, so that the test does not
# build the compiler twice); then, from outside the checkout, the installed
# package compiles a model and evaluates its energy against a closed form.
# Usage: check-pip-install.sh SOURCE_DIR BUILD_DIR WORK_DIR PYTHON
set -eu
source=$1 build=$2 work=$3 python=$4
rm -rf "$work"
mkdir -p "$work"
"$python" -m venv --system-site-packages "$work/venv"
ENERGY_BUILD_DIR="$build" "$work/venv/bin/pip" install --no-index \
    "$source" > "$work/pip.log" 2>&1 || { cat "$work/pip.log"; exit 1; }
cd "$work"
"$work/venv/bin/python" - "$source" <<'PY'
import os
import sys

import energy

where = os.path.dirname(energy.__file__)
assert where.startswith(sys.prefix), f"energy imported from {where}"
model = energy.compile(os.path.join(sys.argv[1], "examples",
                                    "quadratic_bowl.energy"), dtype="f64")
session = model.session()
session["A"] = [[2.0, 0.0], [0.0, 4.0]]
session["c"] = [1.0, 1.0]
session["y"] = [0.0, 0.0]
# 0.5 (y - c)^T A (y - c) = 0.5 (2 + 4)
assert abs(session.energy() - 3.0) < 1e-12, session.energy()
print("pip installed energy at", where)
PY
