/*===- RuntimeCode.h - What a plugin's run-time library exports -*- C -*-===//
//
// A plugin whose functions or aggregations run inside compiled kernels ships
// a run-time library: plain C, no MLIR, loaded by the runtime with dlopen.
// It exports `energyGetPluginRuntimeInfo` (its plugin's name and version,
// checked against what an artifact's manifest recorded) and the functions
// below, by the names the plugin registers. Arrays are contiguous doubles.
//
//===----------------------------------------------------------------------===*/

#ifndef ENERGY_PLUGIN_RUNTIMECODE_H
#define ENERGY_PLUGIN_RUNTIMECODE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The version of the run-time library interface; another is refused. */
#define ENERGY_PLUGIN_RUNTIME_VERSION 1

/** What `energyGetPluginRuntimeInfo` returns. */
struct EnergyPluginRuntimeInfo {
  uint32_t runtimeVersion;
  const char *name;
  const char *version;
};

/** An element-wise function or one of its derivatives: f^(k)(x). */
typedef double (*EnergyElementwiseCode)(double x);
/** A similarity of two vectors of length n: s(a, b). */
typedef double (*EnergySimilarityCode)(int64_t n, const double *a,
                                       const double *b);
/** Its gradient: ds/da into grad_a and ds/db into grad_b. */
typedef void (*EnergySimilarityGradientCode)(int64_t n, const double *a,
                                             const double *b, double *grad_a,
                                             double *grad_b);
/** An aggregation of n values z (the energy's reduction over an index). */
typedef double (*EnergyAggregationCode)(int64_t n, const double *z);
/** The weights its gradient needs: w = dA/dz. */
typedef void (*EnergyAggregationWeightsCode)(int64_t n, const double *z,
                                             double *weights);

#ifdef __cplusplus
}
#endif

#endif /* ENERGY_PLUGIN_RUNTIMECODE_H */
