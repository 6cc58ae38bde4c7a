//===- softmax_contract_bench.cpp - Softmax contraction against sgemm -----===//
//
// Measures energy_support_softmax_contract_f32 against OpenBLAS sgemm on the
// same number of threads, in the same run: sgemm GFLOP/s for the N × D × N
// product of the scores and for a large square product, then the kernel's
// child side (Hopfield: softmax(X Mᵀ) M, 4·N²·D flops), both sides (the
// self-attention gradient shape, 8·N²·D flops with the recomputation) and
// the causal child side, each as the median of several timed repetitions
// after a warm-up, and the kernel / sgemm ratios.
//
// Debian's OpenBLAS 0.3.21 does not recognise recent Xeons and falls back to
// its Prescott kernels; set OPENBLAS_CORETYPE (e.g. SkylakeX) to compare
// against it at its best. The "core" line below says which kernels it uses.
//
//===----------------------------------------------------------------------===//

#include "energy/KernelSupport/InstructionSet.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/KernelSupport/SoftmaxContract.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

// OpenBLAS, declared here so that any cblas.h alternative will do.
extern "C" {
void cblas_sgemm(int order, int transA, int transB, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc);
void openblas_set_num_threads(int threads);
int openblas_get_num_threads(void);
char *openblas_get_corename(void);
char *openblas_get_config(void);
}

namespace {
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

struct Options {
  int64_t n = 4096, depth = 64, square = 2048;
  int repetitions = 7;
  int threads = 0; // 0: ENERGY_NUM_THREADS, or the pool's default
  int isa = ENERGY_ISA_AUTOMATIC;
};

void usage() {
  std::printf(
      "usage: softmax-contract-bench [--n N] [--d D] [--square S] [--reps R]\n"
      "                              [--threads T] [--isa scalar|avx2|avx512]\n"
      "  N = 4096, D = 64, S = 2048, R = 7 by default; T is the thread count\n"
      "  of both the kernel pool and OpenBLAS (default: ENERGY_NUM_THREADS,\n"
      "  or one per core).\n");
}

bool parse(int argc, char **argv, Options &options) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h")
      return false;
    if (i + 1 >= argc)
      return false;
    std::string value = argv[++i];
    if (flag == "--n")
      options.n = std::atoll(value.c_str());
    else if (flag == "--d")
      options.depth = std::atoll(value.c_str());
    else if (flag == "--square")
      options.square = std::atoll(value.c_str());
    else if (flag == "--reps")
      options.repetitions = std::atoi(value.c_str());
    else if (flag == "--threads")
      options.threads = std::atoi(value.c_str());
    else if (flag == "--isa")
      options.isa = value == "scalar"   ? ENERGY_ISA_SCALAR
                    : value == "avx2"   ? ENERGY_ISA_AVX2
                    : value == "avx512" ? ENERGY_ISA_AVX512
                                        : -2;
    else
      return false;
  }
  return options.n > 0 && options.depth > 0 && options.square > 0 &&
         options.repetitions > 0 && options.isa >= ENERGY_ISA_AUTOMATIC;
}

/// The median time of `repetitions` runs of `body` after one warm-up run,
/// and the fastest, in seconds.
struct Timing {
  double median, fastest;
};
Timing measure(int repetitions, const std::function<void()> &body) {
  body();
  std::vector<double> seconds;
  for (int i = 0; i < repetitions; ++i) {
    auto start = std::chrono::steady_clock::now();
    body();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::sort(seconds.begin(), seconds.end());
  return {seconds[seconds.size() / 2], seconds.front()};
}

void report(const char *what, double flops, Timing timing) {
  std::printf("%-44s %8.2f ms  %8.1f GFLOP/s  (fastest %.1f)\n", what,
              timing.median * 1e3, flops / timing.median * 1e-9,
              flops / timing.fastest * 1e-9);
}

std::vector<float> randomMatrix(int64_t count, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float &v : values)
    v = uniform(random);
  return values;
}
} // namespace

int main(int argc, char **argv) {
  Options options;
  if (!parse(argc, argv, options)) {
    usage();
    return 2;
  }
  if (options.threads <= 0) {
    const char *text = std::getenv("ENERGY_NUM_THREADS");
    options.threads = text ? std::atoi(text) : 0;
    if (options.threads <= 0)
      options.threads = energy_support_num_threads();
  }
  energy_support_set_num_threads(options.threads);
  openblas_set_num_threads(options.threads);
  if (options.isa != ENERGY_ISA_AUTOMATIC &&
      energy_support_force_isa(options.isa) != 0) {
    std::fprintf(stderr, "this CPU cannot run that path\n");
    return 2;
  }
  const char *isaNames[] = {"scalar", "avx2", "avx512"};
  const int64_t n = options.n, depth = options.depth;
  std::printf("threads: kernel pool %d, OpenBLAS %d\n",
              energy_support_num_threads(), openblas_get_num_threads());
  std::printf("OpenBLAS: %s, core %s%s\n", openblas_get_config(),
              openblas_get_corename(),
              std::getenv("OPENBLAS_CORETYPE") ? " (OPENBLAS_CORETYPE)" : "");
  std::printf("kernel path: %s; N = %lld, D = %lld, median of %d after a "
              "warm-up\n\n",
              isaNames[energy_support_active_isa()], static_cast<long long>(n),
              static_cast<long long>(depth), options.repetitions);

  std::vector<float> x = randomMatrix(n * depth, 1);
  std::vector<float> m = randomMatrix(n * depth, 2);

  // sgemm: the N × N scores X Mᵀ (N × D × N), and a square product.
  std::vector<float> scores(n * n);
  double productFlops = 2.0 * n * n * depth;
  Timing product = measure(options.repetitions, [&] {
    cblas_sgemm(kRowMajor, kNoTrans, kTrans, n, n, depth, 1.0f, x.data(), depth,
                m.data(), depth, 0.0f, scores.data(), n);
  });
  report("sgemm N x D x N (X M^T)", productFlops, product);
  scores = std::vector<float>();
  const int64_t s = options.square;
  std::vector<float> a = randomMatrix(s * s, 3), b = randomMatrix(s * s, 4),
                     c(s * s);
  double squareFlops = 2.0 * s * s * s;
  Timing square = measure(options.repetitions, [&] {
    cblas_sgemm(kRowMajor, kNoTrans, kNoTrans, s, s, s, 1.0f, a.data(), s,
                b.data(), s, 0.0f, c.data(), s);
  });
  char label[64];
  std::snprintf(label, sizeof label, "sgemm %lld^3 (square)",
                static_cast<long long>(s));
  report(label, squareFlops, square);
  double sgemmBest =
      std::max(productFlops / product.median, squareFlops / square.median);

  // The kernel. Hopfield: rows X, columns and values M.
  std::vector<float> rowOutput(n * depth), colOutput(n * depth);
  const void *colValues[] = {m.data()};
  const void *rowValues[] = {x.data()};
  void *rowOutputs[] = {rowOutput.data()};
  void *colOutputs[] = {colOutput.data()};
  int64_t widths[] = {depth};
  energy_contract_constraint causal = {1, -1, 0, ENERGY_CONSTRAINT_GE};
  energy_softmax_contract_args child{};
  child.batch = 1;
  child.rows = n;
  child.cols = n;
  child.depth = depth;
  child.row_features = x.data();
  child.col_features = m.data();
  child.scale = 1.0 / 8;
  child.temperature = 1;
  child.num_row_outputs = 1;
  child.col_values = colValues;
  child.row_output_widths = widths;
  child.row_outputs = rowOutputs;
  energy_softmax_contract_args both = child;
  both.num_col_outputs = 1;
  both.row_values = rowValues;
  both.col_output_widths = widths;
  both.col_outputs = colOutputs;
  energy_softmax_contract_args causalChild = child;
  causalChild.num_constraints = 1;
  causalChild.constraints = &causal;

  int32_t status = 0;
  auto run = [&](const energy_softmax_contract_args &args) {
    return [&] { status |= energy_support_softmax_contract_f32(&args); };
  };
  double childFlops = 4.0 * n * n * depth;
  Timing childTime = measure(options.repetitions, run(child));
  report("kernel child side (4 N^2 D)", childFlops, childTime);
  double bothFlops = 8.0 * n * n * depth;
  Timing bothTime = measure(options.repetitions, run(both));
  report("kernel both sides (8 N^2 D)", bothFlops, bothTime);
  // Causal: about half the pairs; the rate counts only those.
  double causalFlops = 4.0 * depth * (double)n * (n + 1) / 2;
  Timing causalTime = measure(options.repetitions, run(causalChild));
  report("kernel causal child side (admitted pairs)", causalFlops, causalTime);
  if (status != ENERGY_CONTRACT_OK) {
    std::fprintf(stderr, "the kernel failed: %d\n", status);
    return 1;
  }

  double childRate = childFlops / childTime.median;
  double bothRate = bothFlops / bothTime.median;
  std::printf("\nkernel / sgemm (the better of the two sgemm rates, %.1f "
              "GFLOP/s):\n",
              sgemmBest * 1e-9);
  std::printf("  child side  %.2f\n  both sides  %.2f\n", childRate / sgemmBest,
              bothRate / sgemmBest);
  std::printf("kernel / sgemm N x D x N (%.1f GFLOP/s): child %.2f, both "
              "%.2f\n",
              productFlops / product.median * 1e-9,
              childRate / (productFlops / product.median),
              bothRate / (productFlops / product.median));
  return 0;
}
