//===- MatrixProduct.cpp - Matrix products through a tuned BLAS -----------===//
//
// Plain matrix products of compiled kernels (projections X Wᵀ ahead of a
// softmax contraction, products in step programs) go to OpenBLAS, loaded
// with dlopen the first time one is needed, so that artifacts carry no link
// dependency and still run, on the fallback loop here, where OpenBLAS is
// missing. Debian's OpenBLAS 0.3.21 does not recognise recent Intel CPUs
// (family 6, model 207 among them) and falls back to its SSE3 "Prescott"
// kernels, about five times slower than its AVX-512 ones: when this library
// loads OpenBLAS it names the core the CPU supports (OPENBLAS_CORETYPE:
// SkylakeX with AVX-512, Haswell with AVX2), unless the user named one or
// the process had loaded OpenBLAS already.
//
//===----------------------------------------------------------------------===//

#include "energy/KernelSupport/MatrixProduct.h"
#include "energy/KernelSupport/InstructionSet.h"
#include "energy/KernelSupport/KernelSupport.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <type_traits>

namespace {

// The CBLAS enumerators OpenBLAS expects.
constexpr int kRowMajor = 101, kNoTranspose = 111, kTranspose = 112;

using SgemmFunction = void (*)(int, int, int, int, int, int, float,
                               const float *, int, const float *, int, float,
                               float *, int);
using DgemmFunction = void (*)(int, int, int, int, int, int, double,
                               const double *, int, const double *, int, double,
                               double *, int);
using SetThreadsFunction = void (*)(int);
using CoreNameFunction = char *(*)(void);

struct Blas {
  SgemmFunction sgemm = nullptr;
  DgemmFunction dgemm = nullptr;
  SetThreadsFunction setThreads = nullptr;
  std::string description = "fallback";
};

Blas loadBlas() {
  Blas blas;
  if (const char *choice = std::getenv("ENERGY_BLAS");
      choice && std::strcmp(choice, "none") == 0)
    return blas;
  const char *library = "libopenblas.so.0";
  void *handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
  if (!handle) {
    // Name the core this CPU supports before OpenBLAS picks one, unless the
    // user did; OpenBLAS reads the name once, when it loads. (Loading it,
    // looking at its choice and loading it again races with the threads
    // its first load started.)
    int32_t isa = energy_support_supported_isa();
    const char *core = isa == ENERGY_ISA_AVX512 ? "SkylakeX"
                       : isa == ENERGY_ISA_AVX2 ? "Haswell"
                                                : nullptr;
    bool named = core && !std::getenv("OPENBLAS_CORETYPE");
    if (named)
      setenv("OPENBLAS_CORETYPE", core, /*overwrite=*/0);
    handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (named)
      unsetenv("OPENBLAS_CORETYPE");
  }
  if (!handle)
    return blas;
  auto coreName = reinterpret_cast<CoreNameFunction>(
      dlsym(handle, "openblas_get_corename"));
  blas.sgemm = reinterpret_cast<SgemmFunction>(dlsym(handle, "cblas_sgemm"));
  blas.dgemm = reinterpret_cast<DgemmFunction>(dlsym(handle, "cblas_dgemm"));
  blas.setThreads = reinterpret_cast<SetThreadsFunction>(
      dlsym(handle, "openblas_set_num_threads"));
  if (!blas.sgemm || !blas.dgemm) {
    blas.sgemm = nullptr;
    blas.dgemm = nullptr;
    return blas;
  }
  blas.description =
      std::string("openblas (") + (coreName ? coreName() : "?") + ")";
  return blas;
}

const Blas &blas() {
  static const Blas loaded = loadBlas();
  return loaded;
}

/// OpenBLAS runs on as many threads as the kernels' pool.
void matchThreads(const Blas &library) {
  static std::atomic<int> current{0};
  int threads = energy_support_num_threads();
  if (library.setThreads && current.exchange(threads) != threads)
    library.setThreads(threads);
}

/// Whether OpenBLAS takes a product of these sizes (its interface counts in
/// int).
bool fitsBlas(int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kLimit = 1 << 30;
  return m > 0 && n > 0 && k > 0 && m < kLimit && n < kLimit && k < kLimit;
}

/// c = op(a) · op(b), or c += with `add`, in i, k, j order: the innermost
/// loop runs along rows of b (when not transposed) and of c, so the
/// compiler vectorises it.
template <typename T>
void fallbackProduct(int64_t m, int64_t n, int64_t k, const T *a,
                     bool transposeA, const T *b, bool transposeB, bool add,
                     T *c) {
  for (int64_t i = 0; i < m; ++i) {
    T *row = c + i * n;
    if (!add)
      std::fill(row, row + n, T(0));
    for (int64_t p = 0; p < k; ++p) {
      T factor = transposeA ? a[p * m + i] : a[i * k + p];
      if (transposeB) {
        for (int64_t j = 0; j < n; ++j)
          row[j] += factor * b[j * k + p];
        continue;
      }
      const T *other = b + p * n;
      for (int64_t j = 0; j < n; ++j)
        row[j] += factor * other[j];
    }
  }
}

void blasProduct(const Blas &library, int transposeA, int transposeB, int m,
                 int n, int k, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c) {
  library.sgemm(kRowMajor, transposeA, transposeB, m, n, k, 1.0f, a, lda, b,
                ldb, beta, c, n);
}

void blasProduct(const Blas &library, int transposeA, int transposeB, int m,
                 int n, int k, const double *a, int lda, const double *b,
                 int ldb, double beta, double *c) {
  library.dgemm(kRowMajor, transposeA, transposeB, m, n, k, 1.0, a, lda, b, ldb,
                beta, c, n);
}

template <typename T>
void batchProducts(int64_t batch, int64_t m, int64_t n, int64_t k, const T *a,
                   int64_t aStride, const T *b, int64_t bStride, T *c,
                   int64_t flags) {
  bool transposeA = flags & ENERGY_PRODUCT_TRANSPOSE_A;
  bool transposeB = flags & ENERGY_PRODUCT_TRANSPOSE_B;
  bool sum = flags & ENERGY_PRODUCT_SUM_BATCH;
  const Blas &library = blas();
  bool useBlas =
      (std::is_same_v<T, float> ? bool(library.sgemm) : bool(library.dgemm)) &&
      fitsBlas(m, n, k);
  if (useBlas)
    matchThreads(library);
  // Products that are one GEMM of the stacked matrices: A[p] B for every p
  // (the rows of all A[p] times one B), and Σ_p A[p]ᵀ B[p] (a sum over the
  // rows of all of them).
  if (useBlas && batch > 1 && !transposeA && !sum && bStride == 0 &&
      aStride == m * k && fitsBlas(batch * m, n, k)) {
    m *= batch;
    batch = 1;
  } else if (useBlas && batch > 1 && transposeA && !transposeB && sum &&
             aStride == m * k && bStride == k * n &&
             fitsBlas(m, n, batch * k)) {
    k *= batch;
    batch = 1;
  }
  if (sum && (batch == 0 || !useBlas))
    std::fill(c, c + m * n, T(0));
  for (int64_t p = 0; p < batch; ++p) {
    const T *ap = a + p * aStride, *bp = b + p * bStride;
    T *cp = sum ? c : c + p * m * n;
    bool add = sum && p > 0;
    if (useBlas)
      blasProduct(library, transposeA ? kTranspose : kNoTranspose,
                  transposeB ? kTranspose : kNoTranspose, int(m), int(n),
                  int(k), ap, int(transposeA ? m : k), bp,
                  int(transposeB ? k : n), T(add ? 1 : 0), cp);
    else
      fallbackProduct(m, n, k, ap, transposeA, bp, transposeB, sum, cp);
  }
}

} // namespace

extern "C" {

void energy_support_matmul_f32(int64_t m, int64_t n, int64_t k, const float *a,
                               const float *b, float *c) {
  batchProducts(1, m, n, k, a, 0, b, 0, c, 0);
}

void energy_support_matmul_f64(int64_t m, int64_t n, int64_t k, const double *a,
                               const double *b, double *c) {
  batchProducts(1, m, n, k, a, 0, b, 0, c, 0);
}

void energy_support_matmul_batch_f32(int64_t batch, int64_t m, int64_t n,
                                     int64_t k, const float *a, int64_t aStride,
                                     const float *b, int64_t bStride, float *c,
                                     int64_t flags) {
  batchProducts(batch, m, n, k, a, aStride, b, bStride, c, flags);
}

void energy_support_matmul_batch_f64(int64_t batch, int64_t m, int64_t n,
                                     int64_t k, const double *a,
                                     int64_t aStride, const double *b,
                                     int64_t bStride, double *c,
                                     int64_t flags) {
  batchProducts(batch, m, n, k, a, aStride, b, bStride, c, flags);
}

const char *energy_support_matmul_backend(void) {
  return blas().description.c_str();
}
}
