/*===- RuntimeCode.h - What a plugin's run-time library exports -*- C -*-===//
//
// A plugin whose functions or aggregations run inside compiled kernels ships
// a run-time library: plain C, no MLIR, loaded by the runtime with dlopen.
// It exports `energyGetPluginRuntimeInfo` (its plugin's name and version,
// checked against what an artifact's manifest recorded) and the functions
// below, by the names the plugin registers. Arrays are contiguous doubles.
// It may also export `energyGetPluginParamOptimizers`: parameter optimisers
// for training, which the runtime registers when a tool or an application
// loads the library for training (energy-train --plugin).
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

/** The hyper-parameters of a training run (energy-train's --momentum,
 * --beta1, --beta2, --eps, --weight-decay; the runtime's
 * ParamOptimizerOptions); an optimiser reads those it documents. */
struct EnergyParamOptimizerOptions {
  double momentum, beta1, beta2, eps, weight_decay;
};
/** One update of a param's n elements in place: `value` from `gradient` at
 * learning rate `lr`, `step` counting updates from 1. `buffers` are the
 * param's state, n doubles per buffer the optimiser names, all zeros and
 * `fresh` non-zero at the param's first update. */
typedef void (*EnergyParamUpdateCode)(
    int64_t n, double *value, const double *gradient, double *const *buffers,
    int fresh, double lr, int64_t step,
    const struct EnergyParamOptimizerOptions *options);
/** NULL when the options suit the optimiser, else why not ("beta1 must be in
 * [0, 1)"); checked when a training run creates it. */
typedef const char *(*EnergyParamOptionsCheckCode)(
    const struct EnergyParamOptimizerOptions *options);

/** A parameter optimiser: its name (what --optimizer gives), the names of
 * its per-param state buffers (checkpoints hold them as
 * "<param>.<buffer>"), its update and, or NULL, its check of the options. */
struct EnergyParamOptimizerCode {
  const char *name;
  int64_t buffer_count;
  const char *const *buffer_names;
  EnergyParamUpdateCode update;
  EnergyParamOptionsCheckCode check_options;
};
/** What `energyGetPluginParamOptimizers` returns: `count` optimisers. */
struct EnergyParamOptimizerList {
  int64_t count;
  const struct EnergyParamOptimizerCode *optimizers;
};

#ifdef __cplusplus
}
#endif

#endif /* ENERGY_PLUGIN_RUNTIMECODE_H */
