"""pip install . -- the Python package energy, built by this checkout's CMake.

Builds the module _energy with the CMake project (in build-python/, or in
ENERGY_BUILD_DIR when that names a configured build) and installs the
package energy (python/energy) with it. No network is needed: the build uses
what `make deps` installs from Debian (LLVM/MLIR 22 at LLVM_PREFIX, default
/usr/lib/llvm-22; pybind11-dev; libdlpack-dev). Debian's pip installs into a
virtual environment (python3 -m venv --system-site-packages, for numpy and
torch). docs/python.md.
"""

import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))


class BuildWithCMake(build_py):
    """Builds _energy with CMake, then copies it beside the package's
    Python files."""

    def run(self):
        build = os.environ.get("ENERGY_BUILD_DIR") or os.path.join(
            ROOT, "build-python")
        if not os.path.exists(os.path.join(build, "build.ninja")):
            llvm = os.environ.get("LLVM_PREFIX", "/usr/lib/llvm-22")
            subprocess.check_call([
                "cmake", "-G", "Ninja", "-S", ROOT, "-B", build,
                "-DCMAKE_BUILD_TYPE=Release",
                f"-DCMAKE_C_COMPILER={llvm}/bin/clang",
                f"-DCMAKE_CXX_COMPILER={llvm}/bin/clang++",
                f"-DLLVM_DIR={llvm}/lib/cmake/llvm",
                f"-DMLIR_DIR={llvm}/lib/cmake/mlir",
                f"-DPython_EXECUTABLE={sys.executable}"])
        subprocess.check_call(
            ["cmake", "--build", build, "--target", "energy-python"])
        super().run()
        built = os.path.join(build, "python", "energy")
        modules = [name for name in os.listdir(built)
                   if name.startswith("_energy.")]
        if not modules:
            raise RuntimeError(f"{built}: CMake built no _energy module "
                               "(are pybind11-dev and libdlpack-dev "
                               "installed? make deps)")
        target = os.path.join(self.build_lib, "energy")
        os.makedirs(target, exist_ok=True)
        for name in modules:
            shutil.copy2(os.path.join(built, name), target)


class BinaryDistribution(Distribution):
    """A wheel for this platform and interpreter: it holds _energy."""

    def has_ext_modules(self):
        return True


setup(
    name="energy",
    version="0.1.0",
    description="Energy-graph models compiled and run from Python, and as "
                "PyTorch layers",
    packages=["energy"],
    package_dir={"": "python"},
    package_data={"energy": ["_energy.pyi", "py.typed"]},
    python_requires=">=3.9",
    install_requires=["numpy"],
    cmdclass={"build_py": BuildWithCMake},
    distclass=BinaryDistribution,
    zip_safe=False,
    # Not build/, which is the CMake build of `make build`.
    options={"build": {"build_base": os.path.join("build-python",
                                                   "setuptools")}},
)
