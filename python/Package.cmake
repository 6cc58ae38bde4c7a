# What both builds of the module _energy share (python/CMakeLists.txt, with
# the compiler; python/runtime-only/CMakeLists.txt, without it): the
# bindings' sources and the package's Python files beside the module.
set(ENERGY_PYTHON_PACKAGE_DIR ${CMAKE_CURRENT_LIST_DIR})
set(ENERGY_PYTHON_BINDING_SOURCES
  ${ENERGY_PYTHON_PACKAGE_DIR}/src/Arrays.cpp
  ${ENERGY_PYTHON_PACKAGE_DIR}/src/Module.cpp
  ${ENERGY_PYTHON_PACKAGE_DIR}/src/Training.cpp)

# Copies the package's Python files into DIR/energy, where the module is
# built.
function(energy_python_files dir)
  foreach(file __init__.py errors.py torch.py _energy.pyi py.typed)
    configure_file(${ENERGY_PYTHON_PACKAGE_DIR}/energy/${file}
                   ${dir}/energy/${file} COPYONLY)
  endforeach()
endfunction()
