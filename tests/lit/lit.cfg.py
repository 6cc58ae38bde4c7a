# lit configuration: runs every .mlir and .energy test under tests/lit with
# the built tools and LLVM's FileCheck on the PATH.
import os

import lit.formats

config.name = "energy"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".energy", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.energy_obj_root
path = os.pathsep.join([config.energy_tools_dir, config.llvm_tools_dir,
                        config.environment.get("PATH", os.environ["PATH"])])
config.environment["PATH"] = path
# The compile cache of the build's tests (cmake/TestCompileCache.cmake).
config.environment["ENERGY_CACHE_DIR"] = config.energy_cache_dir
config.substitutions.append(("%examples", config.energy_examples_dir))
# The Python of the tests' scripts (Debian's, with NumPy), not whichever
# `python3` comes first on the PATH.
config.substitutions.append(("%python", config.energy_python))
