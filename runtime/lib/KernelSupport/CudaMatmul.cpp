//===- CudaMatmul.cpp - Matrix products of CUDA artifacts through cuBLAS --===//
//
// energy_support_cuda_matmul_*: MatrixProduct.h's row-major C = A · B with
// cuBLAS (libcublas.so.13, or the library ENERGY_CUBLAS names, opened with
// dlopen on first use) on memory the GPU reaches; on the host when cuBLAS
// cannot be had or a size does not fit its 32-bit interface.
//
//===----------------------------------------------------------------------===//

#include "CudaLaunch.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/KernelSupport/MatrixProduct.h"

#include <chrono>
#include <climits>
#include <dlfcn.h>
#include <mutex>
#include <string>

namespace {
using Handle = void *;
constexpr int kNoTranspose = 0, kTranspose = 1; // CUBLAS_OP_N, CUBLAS_OP_T
constexpr int kReal32 = 0;                      // CUDA_R_32F
// CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT
constexpr int kComputeFast16bf = 75, kDefaultAlgorithm = -1;

struct Cublas {
  int (*create)(Handle *) = nullptr;
  int (*setStream)(Handle, void *) = nullptr;
  int (*sgemm)(Handle, int, int, int, int, int, const float *, const float *,
               int, const float *, int, const float *, float *, int) = nullptr;
  int (*dgemm)(Handle, int, int, int, int, int, const double *, const double *,
               int, const double *, int, const double *, double *,
               int) = nullptr;
  int (*gemmEx)(Handle, int, int, int, int, int, const void *, const void *,
                int, int, const void *, int, int, const void *, void *, int,
                int, int, int) = nullptr;
  Handle handle = nullptr;
};

/// cuBLAS with a handle on the primary context, or null.
const Cublas *cublas() {
  static Cublas *loaded = []() -> Cublas * {
    if (!energy::cuda::makeContextCurrent().empty())
      return nullptr;
    const char *path = std::getenv("ENERGY_CUBLAS");
    void *library = nullptr;
    for (const char *name : {path, "libcublas.so.13", "libcublas.so"})
      if (name && (library = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
        break;
    if (!library)
      return nullptr;
    auto *api = new Cublas();
    api->create = reinterpret_cast<decltype(api->create)>(
        dlsym(library, "cublasCreate_v2"));
    api->setStream = reinterpret_cast<decltype(api->setStream)>(
        dlsym(library, "cublasSetStream_v2"));
    api->sgemm = reinterpret_cast<decltype(api->sgemm)>(
        dlsym(library, "cublasSgemm_v2"));
    api->dgemm = reinterpret_cast<decltype(api->dgemm)>(
        dlsym(library, "cublasDgemm_v2"));
    api->gemmEx =
        reinterpret_cast<decltype(api->gemmEx)>(dlsym(library, "cublasGemmEx"));
    if (!api->create || !api->setStream || !api->sgemm || !api->dgemm ||
        !api->gemmEx || api->create(&api->handle) != 0)
      return nullptr;
    return api;
  }();
  return loaded;
}

void traceProduct(const char *what, int64_t m, int64_t n, int64_t k,
                  std::chrono::steady_clock::time_point start) {
  if (!energy::cuda::tracing())
    return;
  std::string label = std::string(what) + " " + std::to_string(m) + "x" +
                      std::to_string(n) + "x" + std::to_string(k);
  energy::cuda::trace(label.c_str(), m * n,
                      std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count());
}

bool fitsInt(int64_t m, int64_t n, int64_t k) {
  return m > 0 && n > 0 && k > 0 && m <= INT_MAX && n <= INT_MAX &&
         k <= INT_MAX;
}

/// How cuBLAS computes f32 products: in f32, or with inputs rounded to
/// bf16 on tensor cores (energyc --dtype bf16).
enum class Precision { Full, Bf16 };

/// One product of a batch: op(a) (m × k) times op(b) (k × n), row-major.
template <typename T> struct Product {
  int m, n, k;
  const T *a;
  bool transposeA;
  const T *b;
  bool transposeB;
  T *c;
  bool add;

  // Row-major C = op(A) · op(B) is column-major Cᵀ = op(B)ᵀ · op(A)ᵀ:
  // cuBLAS gets B, then A, each with its own op and leading dimension.
  int opA() const { return transposeA ? kTranspose : kNoTranspose; }
  int opB() const { return transposeB ? kTranspose : kNoTranspose; }
  int lda() const { return transposeA ? m : k; }
  int ldb() const { return transposeB ? k : n; }
};

int gemm(const Cublas &api, const Product<float> &p, Precision precision) {
  const float one = 1, beta = p.add ? 1 : 0;
  if (precision == Precision::Bf16)
    return api.gemmEx(api.handle, p.opB(), p.opA(), p.n, p.m, p.k, &one, p.b,
                      kReal32, p.ldb(), p.a, kReal32, p.lda(), &beta, p.c,
                      kReal32, p.n, kComputeFast16bf, kDefaultAlgorithm);
  return api.sgemm(api.handle, p.opB(), p.opA(), p.n, p.m, p.k, &one, p.b,
                   p.ldb(), p.a, p.lda(), &beta, p.c, p.n);
}

int gemm(const Cublas &api, const Product<double> &p, Precision) {
  const double one = 1, beta = p.add ? 1 : 0;
  return api.dgemm(api.handle, p.opB(), p.opA(), p.n, p.m, p.k, &one, p.b,
                   p.ldb(), p.a, p.lda(), &beta, p.c, p.n);
}

/// The products of a batch (MatrixProduct.h) through cuBLAS, one call
/// each, or `onHost` where it cannot be had or fails.
template <typename T>
void products(int64_t batch, int64_t m, int64_t n, int64_t k, const T *a,
              int64_t aStride, const T *b, int64_t bStride, T *c, int64_t flags,
              Precision precision,
              void (*onHost)(int64_t, int64_t, int64_t, int64_t, const T *,
                             int64_t, const T *, int64_t, T *, int64_t),
              const char *name) {
  auto start = std::chrono::steady_clock::now();
  const Cublas *api = fitsInt(m, n, k) && batch > 0 ? cublas() : nullptr;
  bool sum = flags & ENERGY_PRODUCT_SUM_BATCH;
  bool accumulate = flags & ENERGY_PRODUCT_ACCUMULATE;
  int64_t done = 0;
  // One handle serves every thread: each sets its stream, then queues.
  static std::mutex handleLock;
  std::unique_lock<std::mutex> guard(handleLock, std::defer_lock);
  if (api) {
    guard.lock();
    if (api->setStream(api->handle, energy::cuda::currentStream()) != 0)
      api = nullptr;
  }
  for (; api && done < batch; ++done)
    if (gemm(*api,
             Product<T>{
                 int(m), int(n), int(k), a + done * aStride,
                 bool(flags & ENERGY_PRODUCT_TRANSPOSE_A), b + done * bStride,
                 bool(flags & ENERGY_PRODUCT_TRANSPOSE_B),
                 sum ? c : c + done * m * n, accumulate || (sum && done > 0)},
             precision) != 0)
      break;
  if (guard.owns_lock())
    guard.unlock();
  if (done == batch && !energy::cuda::launchesWait()) {
    // The products follow the kernels launched before them on the stream;
    // the host waits where it next reads what they write
    // (energy_support_cuda_fence).
    energy::cuda::notePending(name);
    return;
  }
  // What the host does, it does after everything queued before.
  bool onDevice =
      energy::cuda::waitForGpu() == energy::cuda::kSuccess && done == batch;
  // What the GPU did not do: all of it again, or, when the products add to
  // c, the ones after those it did (the others are already added).
  int64_t first = accumulate ? done : 0;
  if (!onDevice && first < batch)
    onHost(batch - first, m, n, k, a + first * aStride, aStride,
           b + first * bStride, bStride, sum ? c : c + first * m * n, flags);
  traceProduct(onDevice ? name : "a product on the host", m, n, k, start);
}
} // namespace

extern "C" void energy_support_cuda_matmul_f32(int64_t m, int64_t n, int64_t k,
                                               const float *a, const float *b,
                                               float *c) {
  products(1, m, n, k, a, 0, b, 0, c, 0, Precision::Full,
           energy_support_matmul_batch_f32, "cublasSgemm");
}

extern "C" void energy_support_cuda_matmul_f64(int64_t m, int64_t n, int64_t k,
                                               const double *a, const double *b,
                                               double *c) {
  products(1, m, n, k, a, 0, b, 0, c, 0, Precision::Full,
           energy_support_matmul_batch_f64, "cublasDgemm");
}

extern "C" void energy_support_cuda_matmul_bf16(int64_t m, int64_t n, int64_t k,
                                                const float *a, const float *b,
                                                float *c) {
  products(1, m, n, k, a, 0, b, 0, c, 0, Precision::Bf16,
           energy_support_matmul_batch_f32, "cublasGemmEx (bf16 products)");
}

extern "C" void energy_support_cuda_matmul_batch_f32(
    int64_t batch, int64_t m, int64_t n, int64_t k, const float *a,
    int64_t aStride, const float *b, int64_t bStride, float *c, int64_t flags) {
  products(batch, m, n, k, a, aStride, b, bStride, c, flags, Precision::Full,
           energy_support_matmul_batch_f32, "cublasSgemm (batch)");
}

extern "C" void energy_support_cuda_matmul_batch_f64(
    int64_t batch, int64_t m, int64_t n, int64_t k, const double *a,
    int64_t aStride, const double *b, int64_t bStride, double *c,
    int64_t flags) {
  products(batch, m, n, k, a, aStride, b, bStride, c, flags, Precision::Full,
           energy_support_matmul_batch_f64, "cublasDgemm (batch)");
}

extern "C" void energy_support_cuda_matmul_batch_bf16(
    int64_t batch, int64_t m, int64_t n, int64_t k, const float *a,
    int64_t aStride, const float *b, int64_t bStride, float *c, int64_t flags) {
  products(batch, m, n, k, a, aStride, b, bStride, c, flags, Precision::Bf16,
           energy_support_matmul_batch_f32,
           "cublasGemmEx (bf16 products, batch)");
}
