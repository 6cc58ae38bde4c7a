//===- Plugin.cpp - An out-of-tree plugin: Adam, Student-t, sparsemax -----===//
//
// The entry point of the example plugin, built against the installed
// framework (find_package(energy)). It registers the Adam optimizer
// (Adam.cpp) and three extensions whose code runs in kernels, from its
// run-time library libenergy-research-kernels.so (Kernels.c):
//   student_t(a, b)  the Student-t similarity -(nu+1)/2 log(1 + |a-b|^2/nu),
//                    nu = 3, with its gradient;
//   softsign(x)      x / (1 + |x|), with its first and second derivatives;
//   sparsemax(p: N) e  the sparsemax aggregation max_{p in simplex} <p, e>
//                    - |p|^2/2 + 1/2, whose gradient weights are the
//                    sparsemax probabilities.
//
//===----------------------------------------------------------------------===//

#include "energy/Plugin/Plugin.h"

namespace plugin = ::energy::plugin;

llvm::Error registerAdam(plugin::Registration &registration);

namespace {
const char *const kKernels = "libenergy-research-kernels.so";

llvm::Error registerResearch(plugin::Registration &registration) {
  if (llvm::Error error = registerAdam(registration))
    return error;
  plugin::FunctionInfo studentT;
  studentT.name = "student_t";
  studentT.summary = "Student-t similarity -(nu+1)/2 log(1 + |a-b|^2/nu), "
                     "nu = 3";
  studentT.kind = plugin::FunctionKind::Similarity;
  studentT.code = registration.runtimeCode(
      kKernels, {"research_student_t", "research_student_t_gradient"});
  if (llvm::Error error = registration.functions().add(std::move(studentT)))
    return error;
  plugin::FunctionInfo softsign;
  softsign.name = "softsign";
  softsign.summary = "x / (1 + |x|)";
  softsign.kind = plugin::FunctionKind::Elementwise;
  softsign.code = registration.runtimeCode(
      kKernels,
      {"research_softsign", "research_softsign_d1", "research_softsign_d2"});
  if (llvm::Error error = registration.functions().add(std::move(softsign)))
    return error;
  plugin::AggregationInfo sparsemax;
  sparsemax.name = "sparsemax";
  sparsemax.summary = "max over the simplex of <p, e> - |p|^2/2 + 1/2; "
                      "weights: sparsemax(e)";
  sparsemax.code = registration.runtimeCode(
      kKernels, {"research_sparsemax", "research_sparsemax_weights"});
  return registration.aggregations().add(std::move(sparsemax));
}
} // namespace

extern "C" plugin::PluginInfo energyGetPluginInfo() {
  return {ENERGY_PLUGIN_API_VERSION, "research", "1.0", registerResearch};
}
