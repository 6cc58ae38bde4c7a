//===- fused_attention_check.cpp - cuDNN's fused attention, checked -------===//
//
// energy_support_cuda_fused_attention_bf16 and the built-in tensor-core
// kernels of energy_support_cuda_softmax_contract_bf16 (mma.sync's, and on
// sm_90 wgmma's, plain and pipelined) against the host's f32 contraction on the
// same inputs (shapes with padding, several tables, the causal mask, the
// normalisers, and for the built-in kernels column outputs, also given cuDNN's
// normalisers as the plan splits such a contraction), that cuDNN declines
// what it should, then the time of benchmark (a)'s contraction on each.
//
//===----------------------------------------------------------------------===//

#include "energy/KernelSupport/KernelSupport.h"
#include "energy/KernelSupport/SoftmaxContract.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

/// Exit status of a check that cannot run here (ctest's and automake's).
constexpr int kSkipped = 77;

/// max |fused − host| / max |host| allowed over an output: the project's
/// bf16 tolerance (tests/e2e/gpu_check.py). Q and K rounded to bf16 move
/// each score by about 2⁻⁹ of Σ|q_i k_i| (≈ 0.02 for these unit-variance
/// scores), the weights by as much relatively, and the weights and outputs
/// are rounded to bf16 again; a wrong row, column, mask or table moves an
/// output by far more.
constexpr double kTolerance = 3e-2;

/// `count` floats of managed memory, which the host and the GPU both reach.
class Managed {
public:
  explicit Managed(int64_t count)
      : data(static_cast<float *>(energy_support_cuda_alloc(
            std::max<int64_t>(count, 1) * sizeof(float)))),
        count(count) {}
  Managed(const Managed &) = delete;
  Managed &operator=(const Managed &) = delete;
  ~Managed() { energy_support_cuda_free(data); }
  float *get() const { return data; }
  int64_t size() const { return count; }

private:
  float *data;
  int64_t count;
};

void fillNormal(Managed &array, std::mt19937_64 &random) {
  std::normal_distribution<double> normal;
  for (int64_t i = 0; i < array.size(); ++i)
    array.get()[i] = static_cast<float>(normal(random));
}

double relativeDifference(const float *got, const float *expected,
                          int64_t count) {
  double largest = 0, difference = 0;
  for (int64_t i = 0; i < count; ++i) {
    largest = std::max(largest, std::fabs(double(expected[i])));
    difference = std::max(difference, std::fabs(double(got[i]) - expected[i]));
  }
  return largest > 0 ? difference / largest : difference;
}

/// One problem: features, tables and outputs in managed memory.
struct Problem {
  int64_t batch, rows, cols, depth;
  std::vector<int64_t> widths, colWidths;
  bool causal, valuesAreKeys;
  Managed queries, keys;
  std::vector<std::unique_ptr<Managed>> tables, outputs, expected;
  Managed lse, expectedLse;
  std::vector<const void *> tablePointers, colTablePointers;
  std::vector<void *> outputPointers, expectedPointers;
  std::vector<void *> colOutputPointers, colExpectedPointers;
  energy_contract_constraint causalMask{1, -1, 0, ENERGY_CONSTRAINT_GE};

  Problem(int64_t batch, int64_t rows, int64_t cols, int64_t depth,
          std::vector<int64_t> widths, bool causal, bool valuesAreKeys,
          uint64_t seed, std::vector<int64_t> colWidths = {})
      : batch(batch), rows(rows), cols(cols), depth(depth), widths(widths),
        colWidths(colWidths), causal(causal), valuesAreKeys(valuesAreKeys),
        queries(batch * rows * depth), keys(batch * cols * depth),
        lse(batch * rows), expectedLse(batch * rows) {
    std::mt19937_64 random(seed);
    fillNormal(queries, random);
    fillNormal(keys, random);
    for (int64_t width : widths) {
      if (valuesAreKeys) {
        tablePointers.push_back(keys.get());
      } else {
        tables.push_back(std::make_unique<Managed>(batch * cols * width));
        fillNormal(*tables.back(), random);
        tablePointers.push_back(tables.back()->get());
      }
      outputs.push_back(std::make_unique<Managed>(batch * rows * width));
      expected.push_back(std::make_unique<Managed>(batch * rows * width));
      outputPointers.push_back(outputs.back()->get());
      expectedPointers.push_back(expected.back()->get());
    }
    // The column side's tables (one value per row) and outputs (per
    // column), after the row side's in `outputs` and `expected`.
    for (int64_t width : colWidths) {
      tables.push_back(std::make_unique<Managed>(batch * rows * width));
      fillNormal(*tables.back(), random);
      colTablePointers.push_back(tables.back()->get());
      outputs.push_back(std::make_unique<Managed>(batch * cols * width));
      expected.push_back(std::make_unique<Managed>(batch * cols * width));
      colOutputPointers.push_back(outputs.back()->get());
      colExpectedPointers.push_back(expected.back()->get());
    }
  }

  energy_softmax_contract_args args(bool reference) {
    energy_softmax_contract_args a{};
    a.rows = rows;
    a.cols = cols;
    a.depth = depth;
    a.row_features = queries.get();
    a.col_features = keys.get();
    a.scale = 1;
    a.temperature = std::sqrt(double(depth));
    a.num_constraints = causal ? 1 : 0;
    a.constraints = &causalMask;
    a.lse = reference ? expectedLse.get() : lse.get();
    a.num_row_outputs = static_cast<int64_t>(widths.size());
    a.col_values = tablePointers.data();
    a.row_output_widths = widths.data();
    a.row_outputs = reference ? expectedPointers.data() : outputPointers.data();
    a.num_col_outputs = static_cast<int64_t>(colWidths.size());
    a.row_values = colTablePointers.data();
    a.col_output_widths = colWidths.data();
    a.col_outputs =
        reference ? colExpectedPointers.data() : colOutputPointers.data();
    a.batch = batch;
    return a;
  }

  std::string describe() const {
    std::string text = std::to_string(batch) + " x " + std::to_string(rows) +
                       " x " + std::to_string(cols) + ", depth " +
                       std::to_string(depth) + ", widths";
    for (int64_t width : widths)
      text += " " + std::to_string(width);
    if (!colWidths.empty())
      text += ", column widths";
    for (int64_t width : colWidths)
      text += " " + std::to_string(width);
    return text + (causal ? ", causal" : "") +
           (valuesAreKeys ? ", values = keys" : "");
  }
};

/// `contract` (named `what`) on `problem` against the host's contraction.
bool check(Problem &problem, const char *what,
           int32_t (*contract)(const energy_softmax_contract_args *)) {
  energy_softmax_contract_args got = problem.args(false);
  energy_softmax_contract_args host = problem.args(true);
  int32_t code = contract(&got);
  int32_t hostCode = energy_support_softmax_contract_f32(&host);
  if (code == ENERGY_CONTRACT_OK)
    code = energy_support_cuda_fence() == ENERGY_KERNEL_OK
               ? ENERGY_CONTRACT_OK
               : ENERGY_CONTRACT_DEVICE_ERROR;
  if (code != ENERGY_CONTRACT_OK || hostCode != ENERGY_CONTRACT_OK) {
    std::printf("FAIL %s, %s: codes %d (%s) and %d (host)\n", what,
                problem.describe().c_str(), code,
                energy_support_cuda_last_error(), hostCode);
    return false;
  }
  double worst = relativeDifference(
      problem.lse.get(), problem.expectedLse.get(), problem.lse.size());
  std::string detail = "lse " + std::to_string(worst);
  for (size_t j = 0; j < problem.outputs.size(); ++j) {
    double difference = relativeDifference(problem.outputs[j]->get(),
                                           problem.expected[j]->get(),
                                           problem.outputs[j]->size());
    detail +=
        ", output " + std::to_string(j) + " " + std::to_string(difference);
    worst = std::max(worst, difference);
  }
  bool ok = worst <= kTolerance;
  std::printf("%s %s, %s: %s\n", ok ? "ok  " : "FAIL", what,
              problem.describe().c_str(), detail.c_str());
  return ok;
}

/// cuDNN's fused attention on `problem`, which it must take.
bool checkFused(Problem &problem) {
  energy_softmax_contract_args fused = problem.args(false);
  if (const char *misfit = energy_support_cuda_fused_attention_misfit(&fused)) {
    std::printf("FAIL %s: cuDNN does not take it: %s\n",
                problem.describe().c_str(), misfit);
    return false;
  }
  return check(problem, "cuDNN", energy_support_cuda_fused_attention_bf16);
}

/// `a` split as the plan splits a contraction with column sums whose row
/// side cuDNN computes (energy-plan-engines): the row side on cuDNN, its
/// normalisers into a->lse, then the column sums given them on the
/// built-in kernels.
energy_softmax_contract_args rowSide(const energy_softmax_contract_args &a) {
  energy_softmax_contract_args rows = a;
  rows.num_col_outputs = 0;
  rows.row_values = nullptr;
  rows.col_output_widths = nullptr;
  rows.col_outputs = nullptr;
  return rows;
}
int32_t splitOnCudnn(const energy_softmax_contract_args *a) {
  energy_softmax_contract_args rows = rowSide(*a), cols = *a;
  cols.num_row_outputs = 0;
  cols.col_values = nullptr;
  cols.row_output_widths = nullptr;
  cols.row_outputs = nullptr;
  cols.given_lse = a->lse;
  cols.lse = nullptr;
  if (int32_t code = energy_support_cuda_fused_attention_bf16(&rows))
    return code;
  return energy_support_cuda_softmax_contract_bf16(&cols);
}

/// Whether the built-in tensor-core kernels `kernels` run here (else says
/// why not); they are then the bf16 contraction's.
bool chooseKernels(const char *kernels) {
  if (energy_support_cuda_tensor_core_kernels(kernels) == ENERGY_KERNEL_OK)
    return true;
  std::printf("skip the %s kernels: %s\n", kernels,
              energy_support_cuda_last_error());
  return false;
}

/// The contraction of benchmark (a) (16 heads of 128, N rows, values =
/// keys), median milliseconds of `reps` calls after one, each to the end
/// of its GPU work.
double timeCall(int32_t (*contract)(const energy_softmax_contract_args *),
                Problem &problem, int reps) {
  energy_softmax_contract_args a = problem.args(false);
  a.lse = nullptr;
  if (contract(&a) != ENERGY_CONTRACT_OK ||
      energy_support_cuda_fence() != ENERGY_KERNEL_OK)
    return NAN;
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    auto start = std::chrono::steady_clock::now();
    if (contract(&a) != ENERGY_CONTRACT_OK ||
        energy_support_cuda_fence() != ENERGY_KERNEL_OK)
      return NAN;
    times.push_back(std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start)
                        .count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  int64_t large = argc > 1 ? std::atoll(argv[1]) : 8192;
  int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  energy_support_set_log_handler([](int32_t, const char *message) {
    std::fprintf(stderr, "%s\n", message);
  });
  void *probe = energy_support_cuda_alloc(256);
  if (!probe) {
    std::printf("fused-attention-check: no GPU here (%s); skipped\n",
                energy_support_cuda_last_error());
    return kSkipped;
  }
  energy_support_cuda_free(probe);

  bool ok = true;
  uint64_t seed = 1;
  struct Case {
    int64_t batch, rows, cols, depth;
    std::vector<int64_t> widths;
    bool causal, valuesAreKeys;
  };
  const Case cases[] = {Case{2, 64, 64, 64, {64}, false, false},
                        Case{3, 100, 77, 70, {20, 36}, false, false},
                        Case{4, 128, 128, 128, {128}, true, true},
                        Case{1, 33, 33, 16, {8}, true, false},
                        Case{16, 1000, 1000, 128, {128}, false, true}};
  for (const Case &c : cases) {
    Problem problem(c.batch, c.rows, c.cols, c.depth, c.widths, c.causal,
                    c.valuesAreKeys, seed++);
    ok = checkFused(problem) && ok;
  }
  // The built-in kernels, also on column sides (which cuDNN does not take),
  // and cuDNN's row side with their column side given its normalisers.
  const Case twoSided[] = {Case{2, 130, 70, 40, {24}, false, false},
                           Case{1, 200, 200, 128, {64, 64}, true, false}};
  for (const char *kernels : {"mma", "wgmma", "wgmma-pipelined"}) {
    if (!chooseKernels(kernels))
      continue;
    for (const Case &c : cases) {
      Problem problem(c.batch, c.rows, c.cols, c.depth, c.widths, c.causal,
                      c.valuesAreKeys, seed++);
      ok = check(problem, kernels, energy_support_cuda_softmax_contract_bf16) &&
           ok;
    }
    for (const Case &c : twoSided) {
      Problem problem(c.batch, c.rows, c.cols, c.depth, c.widths, c.causal,
                      c.valuesAreKeys, seed++, {c.depth / 2, 16});
      ok = check(problem, kernels, energy_support_cuda_softmax_contract_bf16) &&
           ok;
      energy_softmax_contract_args rows = rowSide(problem.args(false));
      if (const char *misfit =
              energy_support_cuda_fused_attention_misfit(&rows)) {
        std::printf("FAIL %s: cuDNN does not take its row side: %s\n",
                    problem.describe().c_str(), misfit);
        ok = false;
        continue;
      }
      std::string what = std::string("cuDNN's rows, ") + kernels + "'s columns";
      ok = check(problem, what.c_str(), splitOnCudnn) && ok;
    }
  }
  // What it must decline: pair terms, a column side, other constraints.
  {
    Problem problem(1, 16, 16, 8, {8}, false, false, seed++);
    energy_softmax_contract_args a = problem.args(false);
    a.num_pair_terms = 1;
    energy_contract_constraint other{1, -1, 3, ENERGY_CONSTRAINT_GE};
    energy_softmax_contract_args b = problem.args(false);
    b.num_constraints = 1;
    b.constraints = &other;
    const char *pairs = energy_support_cuda_fused_attention_misfit(&a);
    std::string pairsWhy = pairs ? pairs : "";
    const char *shifted = energy_support_cuda_fused_attention_misfit(&b);
    bool declined = !pairsWhy.empty() && shifted;
    std::printf("%s declines pair terms (%s) and a shifted mask (%s)\n",
                declined ? "ok  " : "FAIL", pairsWhy.c_str(),
                shifted ? shifted : "taken");
    ok = declined && ok;
  }
  for (bool causal : {false, true}) {
    Problem problem(16, large, large, 128, {128}, causal, true, seed++);
    double flops = 4.0 * 16 * large * large * 128 * (causal ? 0.5 : 1.0);
    std::string line = std::string("time (a)") + (causal ? " causal" : "") +
                       " N = " + std::to_string(large) + ":";
    auto add = [&](const char *what, double milliseconds) {
      char text[128];
      std::snprintf(text, sizeof text, " %s %.3f ms (%.0f TFLOP/s)", what,
                    milliseconds, flops / milliseconds * 1e-9);
      line += text;
    };
    add("cuDNN",
        timeCall(energy_support_cuda_fused_attention_bf16, problem, reps));
    for (const char *kernels : {"mma", "wgmma", "wgmma-pipelined"})
      if (energy_support_cuda_tensor_core_kernels(kernels) == ENERGY_KERNEL_OK)
        add(kernels,
            timeCall(energy_support_cuda_softmax_contract_bf16, problem, reps));
    std::printf("%s\n", line.c_str());
  }
  std::printf("\n%s\n", ok ? "fused-attention-check: every check passed"
                           : "fused-attention-check: FAILED");
  return ok ? 0 : 1;
}
