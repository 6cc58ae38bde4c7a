//===- PanelProductTest.cpp - Products on packed column panels ------------===//
//
// The vector paths' panel product (PanelProduct.h) against sums in long
// double, for both transposes, accumulation, leading dims past the sizes,
// narrow and wide tiles, remainders of rows and columns and more than one
// block of the inner dim; a product cut into pieces of rows or columns, and
// the AVX2 and AVX-512 paths, give the same bits as the whole product.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport/IsaKernels.h"

#include "energy/KernelSupport/InstructionSet.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using energy::kernels::ProductArgs;

template <typename T> using ProductFunction = bool (*)(const ProductArgs<T> &);

/// The paths this CPU runs, with their product of T.
template <typename T>
std::vector<std::pair<const char *, ProductFunction<T>>> paths() {
  std::vector<std::pair<const char *, ProductFunction<T>>> result;
#if ENERGY_KERNELS_X86
  int32_t supported = energy_support_supported_isa();
  if constexpr (std::is_same_v<T, float>) {
    if (supported >= ENERGY_ISA_AVX2)
      result.push_back({"avx2", energy::kernels::avx2::panelProductF32});
    if (supported >= ENERGY_ISA_AVX512)
      result.push_back({"avx512", energy::kernels::avx512::panelProductF32});
  } else {
    if (supported >= ENERGY_ISA_AVX2)
      result.push_back({"avx2", energy::kernels::avx2::panelProductF64});
    if (supported >= ENERGY_ISA_AVX512)
      result.push_back({"avx512", energy::kernels::avx512::panelProductF64});
  }
#endif
  return result;
}

struct Case {
  int64_t m, n, k;
};

/// A product of the case's sizes with random operands in [-1, 1] (leading
/// dims 3 past the rows), checked against long double sums; returns C.
template <typename T>
std::vector<T> checkProduct(ProductFunction<T> product, Case sizes,
                            bool transposeA, bool transposeB, bool accumulate,
                            std::mt19937 &generator) {
  const auto [m, n, k] = sizes;
  std::uniform_real_distribution<double> uniform(-1, 1);
  const int64_t lda = (transposeA ? m : k) + 3, ldb = (transposeB ? k : n) + 3,
                ldc = n + 3;
  std::vector<T> a((transposeA ? k : m) * lda), b((transposeB ? n : k) * ldb),
      c(m * ldc);
  for (T &value : a)
    value = T(uniform(generator));
  for (T &value : b)
    value = T(uniform(generator));
  for (T &value : c)
    value = accumulate ? T(uniform(generator)) : T(1e3);
  const std::vector<T> initial = c;
  ProductArgs<T> args{transposeA, transposeB, m,        n,
                      k,          a.data(),   lda,      b.data(),
                      ldb,        accumulate, c.data(), ldc};
  REQUIRE(product(args));
  // k products of numbers in [-1, 1]: a rounding error of at most k²·u.
  const double tolerance =
      double(k * k) * std::numeric_limits<T>::epsilon() / 2;
  int64_t wrong = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      if (j >= n) {
        wrong += c[i * ldc + j] != initial[i * ldc + j];
        continue;
      }
      long double expected = accumulate ? initial[i * ldc + j] : 0.0L;
      for (int64_t q = 0; q < k; ++q)
        expected +=
            (long double)(transposeA ? a[q * lda + i] : a[i * lda + q]) *
            (transposeB ? b[j * ldb + q] : b[q * ldb + j]);
      wrong += std::abs(double(c[i * ldc + j] - expected)) > tolerance;
    }
  CHECK_MESSAGE(wrong == 0, wrong << " entries wrong or written past n");
  return c;
}

const Case kCases[] = {{16, 16, 16},   {23, 17, 37},  {48, 31, 16},
                       {53, 33, 64},   {16, 64, 512}, {17, 65, 700},
                       {100, 130, 41}, {6, 200, 1030}};

template <typename T> void checkAllPaths() {
#if ENERGY_KERNELS_X86
  if (energy_support_supported_isa() >= ENERGY_ISA_AVX2)
    REQUIRE_FALSE(paths<T>().empty());
#endif
  for (const auto &path : paths<T>())
    for (Case sizes : kCases)
      for (int flags = 0; flags < 8; ++flags) {
        INFO(path.first << ": " << sizes.m << " x " << sizes.n << " x "
                        << sizes.k << ", flags " << flags);
        std::mt19937 generator(2026);
        checkProduct<T>(path.second, sizes, flags & 1, flags & 2, flags & 4,
                        generator);
      }
}

/// C computed whole and in pieces (two of rows, then two of columns, each
/// from the same operands at offsets): the same bits.
template <typename T> void checkPieces(ProductFunction<T> product) {
  const int64_t m = 53, n = 150, k = 700;
  std::mt19937 generator(7);
  std::uniform_real_distribution<double> uniform(-1, 1);
  for (int flags = 0; flags < 4; ++flags) {
    bool transposeA = flags & 1, transposeB = flags & 2;
    const int64_t lda = transposeA ? m : k, ldb = transposeB ? k : n;
    std::vector<T> a(m * k), b(k * n), whole(m * n), rows(m * n),
        columns(m * n);
    for (T &value : a)
      value = T(uniform(generator));
    for (T &value : b)
      value = T(uniform(generator));
    REQUIRE(product({transposeA, transposeB, m, n, k, a.data(), lda, b.data(),
                     ldb, false, whole.data(), n}));
    for (auto [first, count] : {std::pair<int64_t, int64_t>{0, 29}, {29, 24}})
      REQUIRE(product({transposeA, transposeB, count, n, k,
                       a.data() + (transposeA ? first : first * lda), lda,
                       b.data(), ldb, false, rows.data() + first * n, n}));
    for (auto [first, count] : {std::pair<int64_t, int64_t>{0, 64}, {64, 86}})
      REQUIRE(product({transposeA, transposeB, m, count, k, a.data(), lda,
                       b.data() + (transposeB ? first * ldb : first), ldb,
                       false, columns.data() + first, n}));
    INFO("flags " << flags);
    CHECK(rows == whole);
    CHECK(columns == whole);
  }
}

} // namespace

TEST_CASE("panel products against long double sums (f32)") {
  checkAllPaths<float>();
}

TEST_CASE("panel products against long double sums (f64)") {
  checkAllPaths<double>();
}

TEST_CASE("panel products give the same bits cut into pieces, on every "
          "vector path") {
  auto available = paths<float>();
  for (const auto &path : available) {
    INFO(path.first);
    checkPieces<float>(path.second);
  }
  for (const auto &path : paths<double>()) {
    INFO(path.first);
    checkPieces<double>(path.second);
  }
  if (available.size() < 2)
    return;
  // Each entry is the same chain of fused multiply-adds on either path.
  std::vector<std::vector<float>> results;
  for (auto [name, product] : available) {
    std::mt19937 generator(11);
    results.push_back(checkProduct<float>(product, {53, 150, 700}, true, false,
                                          false, generator));
  }
  CHECK(results[0] == results[1]);
}
