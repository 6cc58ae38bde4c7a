/*===- Lion.c - The example plugin's parameter optimiser for training -----===//
//
// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"),
// registered for training (energy-train --plugin ... --optimizer lion) by
// the plugin's run-time library. Per element, with m its momentum (exp_avg):
//   p <- p (1 - lr wd) - lr sign(beta1 m + (1 - beta1) g)
//   m <- beta2 m + (1 - beta2) g
// (the paper's betas are 0.9 and 0.99: pass --beta2 0.99).
//
//===----------------------------------------------------------------------===*/

#include "energy/Plugin/RuntimeCode.h"

#define EXPORT __attribute__((visibility("default")))

static void lionUpdate(int64_t n, double *value, const double *gradient,
                       double *const *buffers, int fresh, double lr,
                       int64_t step,
                       const struct EnergyParamOptimizerOptions *options) {
  (void)fresh, (void)step;
  double beta1 = options->beta1, beta2 = options->beta2;
  double *momentum = buffers[0];
  for (int64_t i = 0; i < n; ++i) {
    double direction = beta1 * momentum[i] + (1 - beta1) * gradient[i];
    double sign = (direction > 0) - (direction < 0);
    value[i] = value[i] * (1 - lr * options->weight_decay) - lr * sign;
    momentum[i] = beta2 * momentum[i] + (1 - beta2) * gradient[i];
  }
}

static const char *lionCheck(const struct EnergyParamOptimizerOptions *o) {
  if (!(o->beta1 >= 0 && o->beta1 <= 1 && o->beta2 >= 0 && o->beta2 <= 1))
    return "beta1 and beta2 must be in [0, 1]";
  if (!(o->weight_decay >= 0))
    return "weight decay must be non-negative";
  return 0;
}

static const char *const kLionBuffers[] = {"exp_avg"};
static const struct EnergyParamOptimizerCode kOptimizers[] = {
    {"lion", 1, kLionBuffers, lionUpdate, lionCheck}};

EXPORT struct EnergyParamOptimizerList energyGetPluginParamOptimizers(void) {
  struct EnergyParamOptimizerList list = {1, kOptimizers};
  return list;
}
