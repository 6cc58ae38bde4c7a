//===- softmax_contract_bench.cpp - Softmax contraction against sgemm -----===//
//
// Measures energy_support_softmax_contract_f32 against OpenBLAS sgemm on the
// same number of threads, in the same run: sgemm GFLOP/s for the N × D × N
// product of the scores and for a large square product, then the kernel's
// child side (Hopfield: softmax(X Mᵀ) M, 4·N²·D flops), both sides (the
// self-attention gradient shape, 8·N²·D flops with the recomputation) and
// the causal child side, each as the median of several timed repetitions
// after a warm-up, and the kernel / sgemm ratios; then the cost of pair
// terms (SoftmaxContract.h) on a small batched problem (a training step's
// shape: by default 4 problems of 64 × 64, one call for the batch): the same
// outputs with and without two of them weighted by two pair terms.
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
  bool pairsOnly = false;
  int64_t pairsBatch = 4, pairsN = 64; // the pair-term case's problems
};

void usage() {
  std::printf(
      "usage: softmax-contract-bench [--n N] [--d D] [--square S] [--reps R]\n"
      "                              [--threads T] [--isa scalar|avx2|avx512]\n"
      "                              [--pairs-only] [--pairs-batch B]\n"
      "                              [--pairs-n M]\n"
      "  N = 4096, D = 64, S = 2048, R = 7 by default; T is the thread count\n"
      "  of both the kernel pool and OpenBLAS (default: ENERGY_NUM_THREADS,\n"
      "  or one per core). --pairs-only times only the pair-term case, a\n"
      "  batch of B = 4 problems of M × M = 64 × 64 by default.\n");
}

bool parse(int argc, char **argv, Options &options) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h")
      return false;
    if (flag == "--pairs-only") {
      options.pairsOnly = true;
      continue;
    }
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
    else if (flag == "--pairs-batch")
      options.pairsBatch = std::atoll(value.c_str());
    else if (flag == "--pairs-n")
      options.pairsN = std::atoll(value.c_str());
    else if (flag == "--isa")
      options.isa = value == "scalar"   ? ENERGY_ISA_SCALAR
                    : value == "avx2"   ? ENERGY_ISA_AVX2
                    : value == "avx512" ? ENERGY_ISA_AVX512
                                        : -2;
    else
      return false;
  }
  return options.n > 0 && options.depth > 0 && options.square > 0 &&
         options.repetitions > 0 && options.isa >= ENERGY_ISA_AUTOMATIC &&
         options.pairsBatch > 0 && options.pairsN > 0;
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

/// The cost of pair terms: a batch of `batch` problems (4 by default) of
/// n × n positions (64), D = 64, with 4 outputs of width 64 (2 a side),
/// plain, then with one output a side weighted by 2 pair terms of depth 64
/// (the others plain), each the median over repetitions of kCalls calls of
/// the kernel on the whole batch. Returns the kernel's status.
int32_t timePairTerms(int repetitions, int64_t batch, int64_t n) {
  constexpr int64_t depth = 64, width = 64, pairDepth = 64;
  constexpr int kCalls = 200;
  const int64_t positions = batch * n;
  std::vector<float> x = randomMatrix(positions * depth, 11);
  std::vector<float> m = randomMatrix(positions * depth, 12);
  std::vector<std::vector<float>> values, outputs, pairFeatures;
  for (int j = 0; j < 4; ++j) {
    values.push_back(randomMatrix(positions * width, 20 + j));
    outputs.emplace_back(positions * width);
  }
  for (int j = 0; j < 4; ++j)
    pairFeatures.push_back(randomMatrix(positions * pairDepth, 30 + j));
  const void *colValues[] = {values[0].data(), values[1].data()};
  const void *rowValues[] = {values[2].data(), values[3].data()};
  void *rowOutputs[] = {outputs[0].data(), outputs[1].data()};
  void *colOutputs[] = {outputs[2].data(), outputs[3].data()};
  int64_t widths[] = {width, width};
  const void *pairRowFeatures[] = {pairFeatures[0].data(),
                                   pairFeatures[1].data()};
  const void *pairColFeatures[] = {pairFeatures[2].data(),
                                   pairFeatures[3].data()};
  int64_t pairDepths[] = {pairDepth, pairDepth};
  // Per side: one plain output, one weighted by κ + α_0 t_0 + α_1 t_1.
  const double rowWeights[] = {1, 0, 0, 0.5, 0.7, -1.3};
  const double colWeights[] = {0.25, 2, 1, 1, 0, 0};

  energy_softmax_contract_args plain{};
  plain.batch = batch;
  plain.rows = n;
  plain.cols = n;
  plain.depth = depth;
  plain.row_features = x.data();
  plain.col_features = m.data();
  plain.scale = 1.0 / 8;
  plain.temperature = 1;
  plain.num_row_outputs = 2;
  plain.col_values = colValues;
  plain.row_output_widths = widths;
  plain.row_outputs = rowOutputs;
  plain.num_col_outputs = 2;
  plain.row_values = rowValues;
  plain.col_output_widths = widths;
  plain.col_outputs = colOutputs;
  energy_softmax_contract_args paired = plain;
  paired.num_pair_terms = 2;
  paired.pair_depths = pairDepths;
  paired.pair_row_features = pairRowFeatures;
  paired.pair_col_features = pairColFeatures;
  paired.row_output_weights = rowWeights;
  paired.col_output_weights = colWeights;

  int32_t status = 0;
  auto calls = [&](const energy_softmax_contract_args &args) {
    return [&] {
      for (int i = 0; i < kCalls; ++i)
        status |= energy_support_softmax_contract_f32(&args);
    };
  };
  // Each pass recomputes the scores (2·N²·D) and sums 2 outputs (2·N²·W
  // each); a pass with a weighted output adds 2·N²·P per pair term.
  double plainFlops =
      kCalls * batch * 2.0 * (2.0 * n * n * depth + 2 * 2.0 * n * n * width);
  double pairedFlops =
      plainFlops + kCalls * batch * 2.0 * (2 * 2.0 * n * n * pairDepth);
  std::printf("\npair terms: batch %lld of %lld x %lld, D = %lld, 4 outputs "
              "of width %lld (2 a side), per call:\n",
              static_cast<long long>(batch), static_cast<long long>(n),
              static_cast<long long>(n), static_cast<long long>(depth),
              static_cast<long long>(width));
  Timing plainTime = measure(repetitions, calls(plain));
  Timing pairedTime = measure(repetitions, calls(paired));
  auto line = [&](const char *what, double flops, Timing timing) {
    std::printf("%-44s %8.1f us  %8.1f GFLOP/s  (fastest %.1f)\n", what,
                timing.median / kCalls * 1e6, flops / timing.median * 1e-9,
                flops / timing.fastest * 1e-9);
  };
  line("plain (no pair terms)", plainFlops, plainTime);
  line("2 pair terms (P = 64), 2 outputs weighted", pairedFlops, pairedTime);
  std::printf("pair terms / plain time: %.2f\n",
              pairedTime.median / plainTime.median);
  return status;
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
  if (options.pairsOnly) {
    std::printf("threads: kernel pool %d; kernel path: %s; median of %d "
                "after a warm-up\n",
                energy_support_num_threads(),
                isaNames[energy_support_active_isa()], options.repetitions);
    int32_t status =
        timePairTerms(options.repetitions, options.pairsBatch, options.pairsN);
    if (status != ENERGY_CONTRACT_OK) {
      std::fprintf(stderr, "the kernel failed: %d\n", status);
      return 1;
    }
    return 0;
  }
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
  if (int32_t code = timePairTerms(options.repetitions, options.pairsBatch,
                                   options.pairsN);
      code != ENERGY_CONTRACT_OK) {
    std::fprintf(stderr, "the kernel failed: %d\n", code);
    return 1;
  }
  return 0;
}
