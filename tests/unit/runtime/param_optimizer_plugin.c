/*===- param_optimizer_plugin.c - Run-time libraries that must be refused -===//
//
// A plugin's run-time library (energy/Plugin/RuntimeCode.h) whose parameter
// optimisers the runtime must refuse, one module per variant, by macro:
// PLUGIN_NO_LIST (no energyGetPluginParamOptimizers), PLUGIN_TAKEN (a new
// name, then a built-in's: neither may be registered), PLUGIN_NO_UPDATE,
// PLUGIN_TWIN_BUFFERS (a buffer named twice).
//
//===----------------------------------------------------------------------===*/

#include "energy/Plugin/RuntimeCode.h"

#define EXPORT __attribute__((visibility("default")))
/* What some variants leave unused. */
#define SHARED __attribute__((unused))

EXPORT struct EnergyPluginRuntimeInfo energyGetPluginRuntimeInfo(void) {
  struct EnergyPluginRuntimeInfo info = {ENERGY_PLUGIN_RUNTIME_VERSION,
                                         "refused", "1.0"};
  return info;
}

#ifndef PLUGIN_NO_LIST
SHARED static void keep(int64_t n, double *value, const double *gradient,
                        double *const *buffers, int fresh, double lr,
                        int64_t step,
                        const struct EnergyParamOptimizerOptions *options) {
  (void)n, (void)value, (void)gradient, (void)buffers, (void)fresh, (void)lr,
      (void)step, (void)options;
}

SHARED static const char *const kTwins[] = {"m", "m"};
static const struct EnergyParamOptimizerCode kOptimizers[] = {
#if defined(PLUGIN_TAKEN)
    {"test-taken-new", 0, 0, keep, 0},
    {"adam", 0, 0, keep, 0},
#elif defined(PLUGIN_NO_UPDATE)
    {"test-no-update", 0, 0, 0, 0},
#else
    {"test-twin-buffers", 2, kTwins, keep, 0},
#endif
};

EXPORT struct EnergyParamOptimizerList energyGetPluginParamOptimizers(void) {
  struct EnergyParamOptimizerList list = {
      sizeof(kOptimizers) / sizeof(kOptimizers[0]), kOptimizers};
  return list;
}
#endif
