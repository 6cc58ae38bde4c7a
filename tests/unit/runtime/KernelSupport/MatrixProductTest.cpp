//===- MatrixProductTest.cpp - Batches of matrix products -----------------===//
//
// energy_support_matmul_batch_* against products summed in long double, for
// every combination of transposed operands, shared operands (stride 0) and
// summed batches, through the panel product and OpenBLAS (for thin
// products), and in other runs of this test through OpenBLAS alone
// (ENERGY_NO_PANEL_PRODUCTS) or the fallback loop alone (and ENERGY_BLAS=
// none); products large enough to be cut into pieces (of rows or columns of
// C, or for Aᵀ B of long A and B of their rows) for the thread pool give
// the same bits on 1 and 3 threads. The products that keep a B packed
// (energy_support_matmul_batch_packed_*) give the plain products' bits, when
// they pack it and when they read it packed.
//
//===----------------------------------------------------------------------===//

#include "energy/KernelSupport/MatrixProduct.h"
#include "energy/KernelSupport/KernelSupport.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace {

/// Element (i, j) of op(matrix) where op(matrix) is rows × columns.
template <typename T>
long double at(const T *matrix, bool transposed, int64_t rows, int64_t columns,
               int64_t i, int64_t j) {
  return transposed ? matrix[j * rows + i] : matrix[i * columns + j];
}

struct Sizes {
  int64_t batch, m, n, k;
};

template <typename T>
void checkBatch(void (*batchProduct)(int64_t, int64_t, int64_t, int64_t,
                                     const T *, int64_t, const T *, int64_t,
                                     T *, int64_t),
                double tolerance, Sizes sizes = {3, 5, 7, 6},
                bool sameOnThreads = false, bool zeroA = false,
                bool zeroB = false) {
  const auto [batch, m, n, k] = sizes;
  std::mt19937 generator(2026);
  std::uniform_real_distribution<double> uniform(-1, 1);
  for (int64_t flags = 0; flags < 16; ++flags)
    for (bool sharedA : {false, true})
      for (bool sharedB : {false, true}) {
        if (sharedA && sharedB)
          continue;
        bool transposeA = flags & ENERGY_PRODUCT_TRANSPOSE_A;
        bool transposeB = flags & ENERGY_PRODUCT_TRANSPOSE_B;
        bool sum = flags & ENERGY_PRODUCT_SUM_BATCH;
        bool accumulate = flags & ENERGY_PRODUCT_ACCUMULATE;
        int64_t aStride = sharedA ? 0 : m * k, bStride = sharedB ? 0 : k * n;
        std::vector<T> a((sharedA ? 1 : batch) * m * k),
            b((sharedB ? 1 : batch) * k * n);
        for (T &value : a)
          value = zeroA ? T(uniform(generator) < 0 ? -0.0 : 0.0)
                        : T(uniform(generator));
        for (T &value : b)
          value = zeroB ? T(uniform(generator) < 0 ? -0.0 : 0.0)
                        : T(uniform(generator));
        // Garbage in c: a product overwrites it (or the sum starts at 0);
        // values in [-1, 1] that the products are added to.
        std::vector<T> initial((sum ? 1 : batch) * m * n, T(1e3));
        if (accumulate)
          for (T &value : initial)
            value = T(uniform(generator));
        std::vector<T> c = initial;
        batchProduct(batch, m, n, k, a.data(), aStride, b.data(), bStride,
                     c.data(), flags);
        std::vector<long double> expected(c.size(), 0.0L);
        if (accumulate)
          std::copy(initial.begin(), initial.end(), expected.begin());
        for (int64_t p = 0; p < batch; ++p)
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              long double total = 0;
              for (int64_t q = 0; q < k; ++q)
                total += at(a.data() + p * aStride, transposeA, m, k, i, q) *
                         at(b.data() + p * bStride, transposeB, k, n, q, j);
              expected[(sum ? 0 : p * m * n) + i * n + j] += total;
            }
        INFO("flags " << flags << ", shared a " << sharedA << ", shared b "
                      << sharedB);
        for (size_t e = 0; e < c.size(); ++e)
          CHECK(std::abs(double(c[e] - expected[e])) <= tolerance);
        if (!sameOnThreads)
          continue;
        int32_t threads = energy_support_num_threads();
        for (int32_t other : {1, 3}) {
          energy_support_set_num_threads(other);
          std::vector<T> again = initial;
          batchProduct(batch, m, n, k, a.data(), aStride, b.data(), bStride,
                       again.data(), flags);
          CHECK_MESSAGE(again == c,
                        "different bits on " << other << " threads");
        }
        energy_support_set_num_threads(threads);
      }
}

/// The plain product, then the packed product into a new cache (which packs
/// it) and again (which reads it where the panel product runs): the same
/// bits each time; c holds the result.
template <typename T,
          void (*Plain)(int64_t, int64_t, int64_t, int64_t, const T *, int64_t,
                        const T *, int64_t, T *, int64_t),
          void (*Packed)(int64_t, int64_t, int64_t, int64_t, const T *, int64_t,
                         const T *, int64_t, T *, int64_t, T *, T *)>
void packedTwice(int64_t batch, int64_t m, int64_t n, int64_t k, const T *a,
                 int64_t aStride, const T *b, int64_t bStride, T *c,
                 int64_t flags) {
  int64_t results = (flags & ENERGY_PRODUCT_SUM_BATCH ? 1 : batch) * m * n;
  std::vector<T> initial(c, c + results), plain = initial;
  Plain(batch, m, n, k, a, aStride, b, bStride, plain.data(), flags);
  std::vector<T> cache((bStride ? batch : 1) * n * k, T(7));
  T valid = 0;
  for (int time = 0; time < 2; ++time) {
    std::copy(initial.begin(), initial.end(), c);
    Packed(batch, m, n, k, a, aStride, b, bStride, c, flags, cache.data(),
           &valid);
    CHECK_MESSAGE(std::memcmp(c, plain.data(), results * sizeof(T)) == 0,
                  "packed product " << time << " differs from the plain one");
  }
}

bool onPanelProducts() {
  return std::strncmp(energy_support_matmul_backend(), "panel", 5) == 0;
}

} // namespace

// Each entry sums at most 3 · 6 products of numbers in [-1, 1] (and, added
// to c, a number in [-1, 1]): rounding errors of 19 terms of size ≤ 1, a
// few ulps each.
TEST_CASE("batch products: transposes, shared operands, sums (f32)") {
  checkBatch<float>(energy_support_matmul_batch_f32, 1e-5);
}

TEST_CASE("batch products: transposes, shared operands, sums (f64)") {
  checkBatch<double>(energy_support_matmul_batch_f64, 1e-13);
}

// Products of 300 × 80 by 80 × 96 (summed over 3: 240 products a sum) are
// cut into pieces of rows (whole multiples of 64): the same bits on 1, 3 and
// the default number of threads, and rounding errors of 240 terms of size ≤ 1.
TEST_CASE("batch products cut into pieces for the thread pool (f32)") {
  checkBatch<float>(energy_support_matmul_batch_f32, 1e-4, {3, 300, 96, 80},
                    /*sameOnThreads=*/true);
}

// Aᵀ B summed over long rows (4 × 200 and 800, stacked) into a small C
// (40 × 48) is cut into pieces of rows of A and B, each summed into a
// partial C, the partials added in order: the same bits on 1, 3 and the
// default number of threads, and rounding errors of 800 terms of size ≤ 1.
TEST_CASE("products summed over long rows are cut into pieces of rows (f32)") {
  checkBatch<float>(energy_support_matmul_batch_f32, 2e-4, {4, 40, 48, 200},
                    /*sameOnThreads=*/true);
  checkBatch<float>(energy_support_matmul_batch_f32, 2e-4, {1, 40, 48, 800},
                    /*sameOnThreads=*/true);
}

// An A of zeros (some of them −0) is skipped: C is zeros, or what it held
// where the products are added to it, exactly.
TEST_CASE("batch products of an A of zeros are zeros") {
  checkBatch<float>(energy_support_matmul_batch_f32, 0, {3, 5, 7, 6},
                    /*sameOnThreads=*/false, /*zeroA=*/true);
  checkBatch<double>(energy_support_matmul_batch_f64, 0, {4, 40, 48, 200},
                     /*sameOnThreads=*/true, /*zeroA=*/true);
  // Not computed: a NaN of B does not reach C.
  std::vector<float> a(6, 0.f), b(6, std::nanf("")), c(4, 5.f);
  energy_support_matmul_batch_f32(1, 2, 2, 3, a.data(), 6, b.data(), 6,
                                  c.data(), 0);
  for (float value : c)
    CHECK(value == 0.f);
}

// So is a B of zeros (the zero codes of LISTA's first step in the product
// that adds S's gradient): C is zeros, or what it held, and a NaN of A does
// not reach it.
TEST_CASE("batch products of a B of zeros are zeros") {
  checkBatch<float>(energy_support_matmul_batch_f32, 0, {3, 5, 7, 6},
                    /*sameOnThreads=*/false, /*zeroA=*/false, /*zeroB=*/true);
  checkBatch<double>(energy_support_matmul_batch_f64, 0, {4, 40, 48, 200},
                     /*sameOnThreads=*/true, /*zeroA=*/false, /*zeroB=*/true);
  std::vector<float> a(6, std::nanf("")), b(6, 0.f), c(4, 5.f);
  energy_support_matmul_batch_f32(1, 2, 2, 3, a.data(), 6, b.data(), 6,
                                  c.data(), 0);
  for (float value : c)
    CHECK(value == 0.f);
}

TEST_CASE("batch products: an empty batch sums to zeros (adds nothing when "
          "accumulating), empty inner dims give zeros") {
  std::vector<float> a(6, 1.f), b(6, 1.f), c(4, 5.f);
  energy_support_matmul_batch_f32(0, 2, 2, 3, a.data(), 6, b.data(), 6,
                                  c.data(), ENERGY_PRODUCT_SUM_BATCH);
  for (float value : c)
    CHECK(value == 0.f);
  std::vector<float> kept(4, 5.f);
  energy_support_matmul_batch_f32(
      0, 2, 2, 3, a.data(), 6, b.data(), 6, kept.data(),
      ENERGY_PRODUCT_SUM_BATCH | ENERGY_PRODUCT_ACCUMULATE);
  for (float value : kept)
    CHECK(value == 5.f);
  std::vector<float> d(8, 5.f);
  energy_support_matmul_batch_f32(2, 2, 2, 0, a.data(), 0, b.data(), 0,
                                  d.data(), 0);
  for (float value : d)
    CHECK(value == 0.f);
}

// Products that keep B packed: every flag and shared operand; 300 columns
// in two pieces for the pool (whole panels and a part of one in the
// second), an inner dim of two blocks of the panels (530); 160 rows in two
// blocks.
TEST_CASE("batch products that keep B packed give the plain products' bits") {
  checkBatch<float>(packedTwice<float, energy_support_matmul_batch_f32,
                                energy_support_matmul_batch_packed_f32>,
                    1e-5);
  checkBatch<float>(packedTwice<float, energy_support_matmul_batch_f32,
                                energy_support_matmul_batch_packed_f32>,
                    1e-3, {1, 70, 300, 530}, /*sameOnThreads=*/true);
  checkBatch<double>(packedTwice<double, energy_support_matmul_batch_f64,
                                 energy_support_matmul_batch_packed_f64>,
                     1e-12, {2, 160, 72, 40}, /*sameOnThreads=*/true);
}

// The flag: 0 packs B and sets it to 1; 1 reads the cache (what it holds,
// even if B changed: the runtime clears the flags when a call begins);
// -1 keeps nothing and packs B for the product alone.
TEST_CASE("a product keeps B packed under its flag") {
  const int64_t m = 40, n = 128, k = 64;
  std::vector<float> a(m * k, 1.f), b(k * n, 1.f), c(m * n);
  std::vector<float> cache(n * k, 0.f);
  float valid = -1;
  energy_support_matmul_batch_packed_f32(1, m, n, k, a.data(), 0, b.data(), 0,
                                         c.data(), 0, cache.data(), &valid);
  CHECK(valid == -1.f);
  CHECK(c[0] == float(k));
  for (float value : cache)
    REQUIRE(value == 0.f);
  valid = 0;
  energy_support_matmul_batch_packed_f32(1, m, n, k, a.data(), 0, b.data(), 0,
                                         c.data(), 0, cache.data(), &valid);
  CHECK(c[m * n - 1] == float(k));
  if (!onPanelProducts()) {
    CHECK(valid == 0.f);
    return;
  }
  CHECK(valid == 1.f);
  // Kept: a B of twos is not read, the ones packed are.
  std::fill(b.begin(), b.end(), 2.f);
  energy_support_matmul_batch_packed_f32(1, m, n, k, a.data(), 0, b.data(), 0,
                                         c.data(), 0, cache.data(), &valid);
  CHECK(c[0] == float(k));
  valid = 0;
  energy_support_matmul_batch_packed_f32(1, m, n, k, a.data(), 0, b.data(), 0,
                                         c.data(), 0, cache.data(), &valid);
  CHECK(c[0] == float(2 * k));
}
