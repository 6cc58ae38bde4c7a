"""The package without the compiler (python/runtime-only): it loads an
artifact energyc wrote and evaluates its energy against the closed form,
and energy.compile raises energy.Error saying why it cannot.

Usage: check.py ENERGYC QUADRATIC_BOWL_ENERGY (PYTHONPATH: the package)"""

import os
import subprocess
import sys
import tempfile

import energy

energyc, source = sys.argv[1:3]
assert not energy._energy.has_compiler
try:
    energy.compile(source)
except energy.Error as error:
    assert "no compiler" in str(error) and "energy.load" in str(error), error
else:
    raise AssertionError("energy.compile did not raise")
with tempfile.TemporaryDirectory() as work:
    artifact = os.path.join(work, "bowl.so")
    subprocess.check_call([energyc, "--dtype", "f64", "--opt-level", "0",
                           source, "-o", artifact])
    session = energy.load(artifact).session()
    session["A"] = [[2.0, 0.0], [0.0, 4.0]]
    session["c"] = [1.0, 1.0]
    session["y"] = [0.0, 0.0]
    # 0.5 (y - c)^T A (y - c) = 0.5 (2 + 4)
    assert abs(session.energy() - 3.0) < 1e-12, session.energy()
print("runtime-only package: energy.load runs, energy.compile refuses")
