# Precompiled headers: for the compiler's C++ targets, parsing MLIR's headers
# is most of each file's compile time (about 15 of 20 s), so a target parses
# them once; the MLIR-free libraries and their tests (front end, runtime)
# parse the C++ standard library's headers once per target.
# CMAKE_DISABLE_PRECOMPILE_HEADERS=ON builds without them.

set(ENERGY_PRECOMPILED_MLIR_HEADERS
  <mlir/Dialect/Arith/IR/Arith.h>
  <mlir/Dialect/Func/IR/FuncOps.h>
  <mlir/Dialect/GPU/IR/GPUDialect.h>
  <mlir/Dialect/LLVMIR/LLVMDialect.h>
  <mlir/Dialect/Math/IR/Math.h>
  <mlir/Dialect/SCF/IR/SCF.h>
  <mlir/Dialect/Vector/IR/VectorOps.h>
  <mlir/IR/Builders.h>
  <mlir/IR/IRMapping.h>
  <mlir/IR/PatternMatch.h>
  <mlir/Pass/Pass.h>)

# energy_precompile_headers(TARGET [WITH_DIALECT]): TARGET's files compile
# with MLIR's headers precompiled, and the energy dialect's with
# WITH_DIALECT.
function(energy_precompile_headers target)
  cmake_parse_arguments(ARG "WITH_DIALECT" "" "" ${ARGN})
  set(headers ${ENERGY_PRECOMPILED_MLIR_HEADERS})
  if(ARG_WITH_DIALECT)
    list(APPEND headers <energy/IR/EnergyDialect.h> <energy/IR/EnergyOps.h>)
  endif()
  target_precompile_headers(${target} PRIVATE ${headers})
endfunction()

# energy_reuse_precompiled_headers(TARGET): TARGET's files (compiled with
# the compiler library's flags) use the dialect's precompiled headers, the
# same MLIR and dialect headers parsed once for every such target.
function(energy_reuse_precompiled_headers target)
  target_precompile_headers(${target} REUSE_FROM obj.EnergyDialect)
endfunction()

# The standard library's headers most files of the MLIR-free targets include.
set(ENERGY_PRECOMPILED_STANDARD_HEADERS
  <algorithm> <array> <cstdint> <cstring> <functional> <map> <memory>
  <optional> <stdexcept> <string> <string_view> <system_error> <tuple>
  <unordered_map> <vector>)

# energy_precompile_standard_headers(TARGET): TARGET's C++ files compile with
# the standard library's common headers precompiled.
function(energy_precompile_standard_headers target)
  foreach(header ${ENERGY_PRECOMPILED_STANDARD_HEADERS})
    target_precompile_headers(${target} PRIVATE
      "$<$<COMPILE_LANGUAGE:CXX>:${header}>")
  endforeach()
endfunction()
