//===- gpu_quadratic_check.cpp - The GPU quadratic contraction, checked ---===//
//
// energy_support_cuda_quadratic_contract_* against the host functions on the
// same inputs, then the f32 call timed at N = 1e6, K = 64, D = 32.
//
//===----------------------------------------------------------------------===//

#include "energy/KernelSupport/KernelSupport.h"
#include "energy/KernelSupport/QuadraticContract.h"
#include "energy/KernelSupport/SoftmaxContract.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

/// Exit status of a check that cannot run here (ctest's and automake's).
constexpr int kSkipped = 77;

/// Normwise relative differences allowed: max |gpu − host| / max |host|
/// over an output. The host computes in double; the GPU in T, so an f32
/// score s carries about 1e-6 · |s| of rounding (scores of tens here), the
/// weights as much relative error, and sums over up to 4096 rows of f32
/// terms add about as much again: 1e-4 leaves a wide margin, while a wrong
/// row, component, patch or chunk moves an output by far more.
constexpr double kToleranceF32 = 1e-4, kToleranceF64 = 1e-10;

const char *kindName(int64_t kind) {
  switch (kind) {
  case ENERGY_MOMENT_WEIGHT:
    return "weight";
  case ENERGY_MOMENT_POINT:
    return "point";
  case ENERGY_MOMENT_CENTRED:
    return "centred";
  default:
    return "centred-outer";
  }
}

int64_t widthOf(int64_t kind, int64_t depth) {
  return kind == ENERGY_MOMENT_WEIGHT          ? 1
         : kind == ENERGY_MOMENT_CENTRED_OUTER ? depth * depth
                                               : depth;
}

/// `count` elements of managed memory (energy_support_cuda_alloc), which
/// the host and the GPU both reach; freed with the array.
template <typename T> class Managed {
public:
  explicit Managed(int64_t count) : count(count) {
    data = static_cast<T *>(
        energy_support_cuda_alloc(std::max<int64_t>(count, 1) * sizeof(T)));
  }
  Managed(const Managed &) = delete;
  Managed &operator=(const Managed &) = delete;
  ~Managed() { energy_support_cuda_free(data); }
  T *get() const { return data; }
  int64_t size() const { return count; }
  bool ok() const { return data != nullptr; }

private:
  T *data = nullptr;
  int64_t count;
};

/// A mixture in managed memory: means in [-1.5, 1.5]^D, each point one
/// component's mean plus N(0, 1) noise, precisions 1 on the diagonal plus
/// U(-0.3, 0.3) entries (not symmetric: only P + Pᵀ counts), bias in
/// [-2, 0], scale −1/2.
template <typename T> struct Mixture {
  int64_t rows, cols, depth;
  Managed<T> points, means, precisions, bias;

  Mixture(int64_t rows, int64_t cols, int64_t depth, uint64_t seed)
      : rows(rows), cols(cols), depth(depth), points(rows * depth),
        means(cols * depth), precisions(cols * depth * depth), bias(cols) {
    if (!ok())
      return;
    std::mt19937_64 random(seed);
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    std::normal_distribution<double> normal;
    for (int64_t i = 0; i < cols * depth; ++i)
      means.get()[i] = static_cast<T>(1.5 * uniform(random));
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t i = 0; i < depth; ++i)
        for (int64_t j = 0; j < depth; ++j)
          precisions.get()[(c * depth + i) * depth + j] =
              static_cast<T>((i == j) + 0.3 * uniform(random));
    for (int64_t c = 0; c < cols; ++c)
      bias.get()[c] = static_cast<T>(-1 + uniform(random));
    std::uniform_int_distribution<int64_t> component(0, cols - 1);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t c = component(random);
      for (int64_t i = 0; i < depth; ++i)
        points.get()[r * depth + i] =
            static_cast<T>(means.get()[c * depth + i] + normal(random));
    }
  }

  bool ok() const {
    return points.ok() && means.ok() && precisions.ok() && bias.ok();
  }

  energy_quadratic_contract_args args(void *lse,
                                      const std::vector<int64_t> &kinds,
                                      void *const *outputs) const {
    energy_quadratic_contract_args a{};
    a.rows = rows;
    a.cols = cols;
    a.depth = depth;
    a.points = points.get();
    a.means = means.get();
    a.precisions = precisions.get();
    a.bias = bias.get();
    a.scale = -0.5;
    a.lse = lse;
    a.num_col_outputs = static_cast<int64_t>(kinds.size());
    a.col_output_kinds = kinds.data();
    a.col_outputs = outputs;
    return a;
  }
};

template <typename T> struct Functions;
template <> struct Functions<float> {
  static constexpr const char *name = "f32";
  static constexpr double tolerance = kToleranceF32;
  static int32_t gpu(const energy_quadratic_contract_args *a) {
    return energy_support_cuda_quadratic_contract_f32(a);
  }
  static int32_t host(const energy_quadratic_contract_args *a) {
    return energy_support_quadratic_contract_f32(a);
  }
};
template <> struct Functions<double> {
  static constexpr const char *name = "f64";
  static constexpr double tolerance = kToleranceF64;
  static int32_t gpu(const energy_quadratic_contract_args *a) {
    return energy_support_cuda_quadratic_contract_f64(a);
  }
  static int32_t host(const energy_quadratic_contract_args *a) {
    return energy_support_quadratic_contract_f64(a);
  }
};

/// max |a − b| / max |b| (0 when both are zero; ∞ on NaN).
template <typename T>
double relativeDifference(const T *a, const T *b, int64_t count) {
  double difference = 0, size = 0;
  for (int64_t i = 0; i < count; ++i) {
    double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (std::isnan(d))
      return INFINITY;
    difference = std::max(difference, d);
    size = std::max(size, std::fabs(static_cast<double>(b[i])));
  }
  return difference == 0 ? 0 : size == 0 ? INFINITY : difference / size;
}

/// The outputs of one call: the lse (when asked for) and each column
/// output, in managed memory for the GPU's call.
template <typename T> struct Outputs {
  std::vector<Managed<T> *> arrays;
  std::vector<void *> pointers;
  Managed<T> lse;

  Outputs(const Mixture<T> &m, const std::vector<int64_t> &kinds)
      : lse(m.rows) {
    for (int64_t kind : kinds) {
      arrays.push_back(new Managed<T>(m.cols * widthOf(kind, m.depth)));
      pointers.push_back(arrays.back()->get());
      std::fill(arrays.back()->get(),
                arrays.back()->get() + arrays.back()->size(), T(NAN));
    }
    std::fill(lse.get(), lse.get() + lse.size(), T(NAN));
  }
  ~Outputs() {
    for (Managed<T> *array : arrays)
      delete array;
  }
  bool ok() const {
    for (Managed<T> *array : arrays)
      if (!array->ok())
        return false;
    return lse.ok();
  }
};

/// One variant of the outputs on one problem, on the GPU and the host: the
/// differences printed, false when one is beyond the tolerance, a call
/// fails or two GPU calls differ in a bit.
template <typename T>
bool checkVariant(const Mixture<T> &m, const char *variant, bool withLse,
                  const std::vector<int64_t> &kinds) {
  using F = Functions<T>;
  Outputs<T> gpu(m, kinds), host(m, kinds);
  if (!gpu.ok() || !host.ok()) {
    std::printf("  %-26s cannot allocate the outputs: %s\n", variant,
                energy_support_cuda_last_error());
    return false;
  }
  energy_quadratic_contract_args onGpu =
      m.args(withLse ? gpu.lse.get() : nullptr, kinds, gpu.pointers.data());
  energy_quadratic_contract_args onHost =
      m.args(withLse ? host.lse.get() : nullptr, kinds, host.pointers.data());
  int32_t gpuCode = F::gpu(&onGpu);
  int32_t hostCode = F::host(&onHost);
  if (gpuCode != ENERGY_CONTRACT_OK || hostCode != ENERGY_CONTRACT_OK) {
    std::printf("  %-26s FAILED: GPU call %d (%s), host call %d\n", variant,
                gpuCode, energy_support_cuda_last_error(), hostCode);
    return false;
  }
  bool passed = true;
  std::string line;
  char text[96];
  auto report = [&](const char *what, double difference) {
    bool ok = difference <= F::tolerance;
    passed = passed && ok;
    std::snprintf(text, sizeof text, " %s %.2e%s", what, difference,
                  ok ? "" : " (OVER)");
    line += text;
  };
  if (withLse)
    report("lse", relativeDifference(gpu.lse.get(), host.lse.get(), m.rows));
  for (size_t j = 0; j < kinds.size(); ++j)
    report(kindName(kinds[j]),
           relativeDifference(gpu.arrays[j]->get(), host.arrays[j]->get(),
                              gpu.arrays[j]->size()));
  // Again, for the same bits.
  std::vector<std::vector<T>> first;
  first.emplace_back(gpu.lse.get(), gpu.lse.get() + (withLse ? m.rows : 0));
  for (Managed<T> *array : gpu.arrays)
    first.emplace_back(array->get(), array->get() + array->size());
  bool same = F::gpu(&onGpu) == ENERGY_CONTRACT_OK;
  same = same && std::memcmp(first[0].data(), gpu.lse.get(),
                             first[0].size() * sizeof(T)) == 0;
  for (size_t j = 0; j < gpu.arrays.size(); ++j)
    same = same && std::memcmp(first[j + 1].data(), gpu.arrays[j]->get(),
                               first[j + 1].size() * sizeof(T)) == 0;
  passed = passed && same;
  std::printf("  %-26s%s;%s\n", variant, line.c_str(),
              same ? " same bits again" : " DIFFERENT BITS AGAIN");
  return passed;
}

template <typename T>
bool checkShape(int64_t rows, int64_t cols, int64_t depth, uint64_t seed) {
  std::printf("%s N = %lld, K = %lld, D = %lld%s (max |gpu - host| / max "
              "|host|, at most %.0e):\n",
              Functions<T>::name, static_cast<long long>(rows),
              static_cast<long long>(cols), static_cast<long long>(depth),
              depth > 64 ? " (on the host: D > 64)" : "",
              Functions<T>::tolerance);
  Mixture<T> m(rows, cols, depth, seed);
  if (!m.ok()) {
    std::printf("  cannot allocate the problem: %s\n",
                energy_support_cuda_last_error());
    return false;
  }
  bool ok = checkVariant(m, "lse and every moment", true,
                         {ENERGY_MOMENT_WEIGHT, ENERGY_MOMENT_POINT,
                          ENERGY_MOMENT_CENTRED, ENERGY_MOMENT_CENTRED_OUTER});
  ok = checkVariant(m, "no lse, no outer, twice", false,
                    {ENERGY_MOMENT_CENTRED, ENERGY_MOMENT_WEIGHT,
                     ENERGY_MOMENT_POINT, ENERGY_MOMENT_WEIGHT}) &&
       ok;
  ok = checkVariant(m, "lse only", true, {}) && ok;
  return ok;
}

/// The median of `times`.
double median(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// Times the f32 call at N × K × D (median of `reps` after a warm-up), lse
/// only and with the column outputs of an EM step; checks that the weights
/// add up to N and the first rows' lse against the host's.
bool timeLarge(int64_t rows, int64_t cols, int64_t depth, int reps) {
  std::printf("\nf32 N = %lld, K = %lld, D = %lld: median of %d calls after "
              "a warm-up (ENERGY_CUDA_TRACE=1 times each kernel)\n",
              static_cast<long long>(rows), static_cast<long long>(cols),
              static_cast<long long>(depth), reps);
  Mixture<float> m(rows, cols, depth, 2026);
  const std::vector<int64_t> kinds = {ENERGY_MOMENT_WEIGHT, ENERGY_MOMENT_POINT,
                                      ENERGY_MOMENT_CENTRED_OUTER};
  Outputs<float> out(m, kinds);
  if (!m.ok() || !out.ok()) {
    std::printf("  cannot allocate the problem: %s\n",
                energy_support_cuda_last_error());
    return false;
  }
  bool ok = true;
  auto time = [&](const char *what, const std::vector<int64_t> &asked) {
    energy_quadratic_contract_args a =
        m.args(out.lse.get(), asked, out.pointers.data());
    std::vector<double> times;
    for (int i = 0; i <= reps; ++i) {
      auto start = std::chrono::steady_clock::now();
      int32_t code = energy_support_cuda_quadratic_contract_f32(&a);
      double ms = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - start)
                      .count();
      if (code != ENERGY_CONTRACT_OK) {
        std::printf("  %-40s FAILED (%d): %s\n", what, code,
                    energy_support_cuda_last_error());
        ok = false;
        return;
      }
      if (i > 0)
        times.push_back(ms);
    }
    std::printf("  %-40s %8.2f ms (fastest %.2f)\n", what, median(times),
                *std::min_element(times.begin(), times.end()));
  };
  time("lse only (the row pass)", {});
  time("lse + weight, point, centred-outer", kinds);
  if (!ok)
    return false;

  // Every row's weights add up to 1, so the weight sums to N.
  double total = 0;
  for (int64_t c = 0; c < cols; ++c)
    total += out.arrays[0]->get()[c];
  double weightError = std::fabs(total - rows) / rows;
  // The first rows' lse against the host's (the column sums need every
  // row, which the host would take minutes over).
  const int64_t sample = std::min<int64_t>(rows, 2048);
  std::vector<float> hostLse(sample);
  const std::vector<int64_t> none;
  energy_quadratic_contract_args a = m.args(hostLse.data(), none, nullptr);
  a.rows = sample;
  if (energy_support_quadratic_contract_f32(&a) != ENERGY_CONTRACT_OK) {
    std::printf("  the host's lse failed\n");
    return false;
  }
  double lseDifference =
      relativeDifference(out.lse.get(), hostLse.data(), sample);
  bool sane = weightError <= kToleranceF32 && lseDifference <= kToleranceF32;
  std::printf("  |sum of the weights - N| / N %.2e; first %lld rows' lse "
              "against the host %.2e%s\n",
              weightError, static_cast<long long>(sample), lseDifference,
              sane ? "" : " (OVER)");
  return sane;
}

void usage() {
  std::printf(
      "usage: gpu-quadratic-check [--no-timing] [--n N] [--reps R]\n"
      "  Checks energy_support_cuda_quadratic_contract_f32/f64 against the\n"
      "  host functions, then times the f32 call at N rows (1000000), K = 64,\n"
      "  D = 32, median of R (5) calls. Exit status 0: every check passed;\n"
      "  1: one failed; 77: no GPU.\n");
}

} // namespace

int main(int argc, char **argv) {
  energy_support_set_log_handler([](int32_t, const char *message) {
    std::fprintf(stderr, "%s\n", message);
  });
  bool timing = true;
  int64_t large = 1000000;
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--no-timing") {
      timing = false;
    } else if (flag == "--n" && i + 1 < argc) {
      large = std::atoll(argv[++i]);
    } else if (flag == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      usage();
      return flag == "--help" || flag == "-h" ? 0 : 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0); // each line as it is printed
  // Managed memory is the first thing that needs a GPU.
  void *probe = energy_support_cuda_alloc(256);
  if (!probe) {
    std::printf("gpu-quadratic-check: no GPU here (%s); skipped\n",
                energy_support_cuda_last_error());
    return kSkipped;
  }
  energy_support_cuda_free(probe);

  struct Shape {
    int64_t rows, cols, depth;
  };
  bool ok = true;
  uint64_t seed = 1;
  for (Shape s : {Shape{1000, 3, 2}, Shape{4096, 64, 32}, Shape{777, 5, 17},
                  Shape{300, 4, 64}, Shape{100, 2, 70}}) {
    ok = checkShape<float>(s.rows, s.cols, s.depth, seed) && ok;
    ok = checkShape<double>(s.rows, s.cols, s.depth, seed++) && ok;
  }
  if (timing)
    ok = timeLarge(large, 64, 32, reps) && ok;
  std::printf("\n%s\n", ok ? "gpu-quadratic-check: every check passed"
                           : "gpu-quadratic-check: FAILED");
  return ok ? 0 : 1;
}
