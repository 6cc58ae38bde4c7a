/*===- Kernels.c - The example plugin's run-time library ------------------===//
//
// Plain C, no dependencies: what compiled kernels and the interpreter call
// for the plugin's similarity, element-wise function and aggregation
// (energy/Plugin/RuntimeCode.h). The runtime loads it with dlopen; with
// Lion.c it also gives training a parameter optimiser.
//
//===----------------------------------------------------------------------===*/

#include "energy/Plugin/RuntimeCode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT struct EnergyPluginRuntimeInfo energyGetPluginRuntimeInfo(void) {
  struct EnergyPluginRuntimeInfo info = {ENERGY_PLUGIN_RUNTIME_VERSION,
                                         "research", "1.0"};
  return info;
}

static const double kNu = 3.0;

static double squaredDistance(int64_t n, const double *a, const double *b) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i)
    total += (a[i] - b[i]) * (a[i] - b[i]);
  return total;
}

/* s(a, b) = -(nu + 1)/2 log(1 + |a - b|^2 / nu) */
EXPORT double research_student_t(int64_t n, const double *a, const double *b) {
  return -0.5 * (kNu + 1) * log1p(squaredDistance(n, a, b) / kNu);
}

/* ds/da = -(nu + 1) (a - b) / (nu + |a - b|^2);  ds/db = -ds/da */
EXPORT void research_student_t_gradient(int64_t n, const double *a,
                                        const double *b, double *grad_a,
                                        double *grad_b) {
  double scale = -(kNu + 1) / (kNu + squaredDistance(n, a, b));
  for (int64_t i = 0; i < n; ++i) {
    grad_a[i] = scale * (a[i] - b[i]);
    grad_b[i] = -grad_a[i];
  }
}

EXPORT double research_softsign(double x) { return x / (1 + fabs(x)); }
EXPORT double research_softsign_d1(double x) {
  double d = 1 + fabs(x);
  return 1 / (d * d);
}
EXPORT double research_softsign_d2(double x) {
  double d = 1 + fabs(x);
  return (x > 0 ? -2.0 : x < 0 ? 2.0 : 0.0) / (d * d * d);
}

static int descending(const void *lhs, const void *rhs) {
  double a = *(const double *)lhs, b = *(const double *)rhs;
  return a < b ? 1 : a > b ? -1 : 0;
}

/* The threshold tau of sparsemax(z) = max(z - tau, 0) (Martins and
 * Astudillo): with z sorted descending, the largest k such that
 * 1 + k z_(k) > sum_{j <= k} z_(j); tau = (sum_{j <= k} z_(j) - 1) / k. */
static double threshold(int64_t n, const double *z) {
  double stack[64];
  double *sorted =
      n <= 64 ? stack : (double *)malloc(sizeof(double) * (size_t)n);
  if (!sorted)
    return NAN;
  memcpy(sorted, z, sizeof(double) * (size_t)n);
  qsort(sorted, (size_t)n, sizeof(double), descending);
  double prefix = 0, tau = sorted[0] - 1;
  for (int64_t k = 1; k <= n; ++k) {
    prefix += sorted[k - 1];
    if (1 + k * sorted[k - 1] > prefix)
      tau = (prefix - 1) / k;
  }
  if (sorted != stack)
    free(sorted);
  return tau;
}

/* A(z) = <p, z> - |p|^2 / 2 + 1/2 with p = sparsemax(z). */
EXPORT double research_sparsemax(int64_t n, const double *z) {
  if (n <= 0)
    return 0;
  double tau = threshold(n, z), value = 0.5;
  for (int64_t i = 0; i < n; ++i) {
    double p = z[i] > tau ? z[i] - tau : 0;
    value += p * z[i] - 0.5 * p * p;
  }
  return value;
}

/* dA/dz = sparsemax(z). */
EXPORT void research_sparsemax_weights(int64_t n, const double *z,
                                       double *weights) {
  if (n <= 0)
    return;
  double tau = threshold(n, z);
  for (int64_t i = 0; i < n; ++i)
    weights[i] = z[i] > tau ? z[i] - tau : 0;
}
