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
#include <string>
#include <dlfcn.h>

namespace {
using Handle = void *;
constexpr int kNoTranspose = 0; // CUBLAS_OP_N
constexpr int kReal32 = 0;      // CUDA_R_32F
// CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT
constexpr int kComputeFast16bf = 75, kDefaultAlgorithm = -1;

struct Cublas {
  int (*create)(Handle *) = nullptr;
  int (*sgemm)(Handle, int, int, int, int, int, const float *, const float *,
               int, const float *, int, const float *, float *,
               int) = nullptr;
  int (*dgemm)(Handle, int, int, int, int, int, const double *,
               const double *, int, const double *, int, const double *,
               double *, int) = nullptr;
  int (*gemmEx)(Handle, int, int, int, int, int, const void *, const void *,
                int, int, const void *, int, int, const void *, void *, int,
                int, int, int) = nullptr;
  Handle handle = nullptr;
};

/// cuBLAS with a handle on the primary context, or null.
const Cublas *cublas() {
  static Cublas *loaded = [] () -> Cublas * {
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
    api->sgemm = reinterpret_cast<decltype(api->sgemm)>(
        dlsym(library, "cublasSgemm_v2"));
    api->dgemm = reinterpret_cast<decltype(api->dgemm)>(
        dlsym(library, "cublasDgemm_v2"));
    api->gemmEx =
        reinterpret_cast<decltype(api->gemmEx)>(dlsym(library, "cublasGemmEx"));
    if (!api->create || !api->sgemm || !api->dgemm || !api->gemmEx ||
        api->create(&api->handle) != 0)
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

// Row-major C = A · B is column-major Cᵀ = Bᵀ · Aᵀ: cuBLAS gets B, then A.
int gemm(const Cublas &api, int m, int n, int k, const float *a, const float *b,
         float *c, Precision precision) {
  const float one = 1, zero = 0;
  if (precision == Precision::Bf16)
    return api.gemmEx(api.handle, kNoTranspose, kNoTranspose, n, m, k, &one, b,
                      kReal32, n, a, kReal32, k, &zero, c, kReal32, n,
                      kComputeFast16bf, kDefaultAlgorithm);
  return api.sgemm(api.handle, kNoTranspose, kNoTranspose, n, m, k, &one, b, n,
                   a, k, &zero, c, n);
}

int gemm(const Cublas &api, int m, int n, int k, const double *a,
         const double *b, double *c, Precision) {
  const double one = 1, zero = 0;
  return api.dgemm(api.handle, kNoTranspose, kNoTranspose, n, m, k, &one, b, n,
                   a, k, &zero, c, n);
}

/// c = a · b through cuBLAS, or `onHost` where it cannot be had or fails.
template <typename T>
void product(int64_t m, int64_t n, int64_t k, const T *a, const T *b, T *c,
             Precision precision,
             void (*onHost)(int64_t, int64_t, int64_t, const T *, const T *,
                            T *),
             const char *name) {
  auto start = std::chrono::steady_clock::now();
  const Cublas *api = fitsInt(m, n, k) ? cublas() : nullptr;
  bool onDevice =
      api && gemm(*api, int(m), int(n), int(k), a, b, c, precision) == 0 &&
      energy::cuda::driverApi().ctxSynchronize() == energy::cuda::kSuccess;
  if (!onDevice)
    onHost(m, n, k, a, b, c);
  traceProduct(onDevice ? name : "a product on the host", m, n, k, start);
}
} // namespace

extern "C" void energy_support_cuda_matmul_f32(int64_t m, int64_t n,
                                               int64_t k, const float *a,
                                               const float *b, float *c) {
  product(m, n, k, a, b, c, Precision::Full, energy_support_matmul_f32,
          "cublasSgemm");
}

extern "C" void energy_support_cuda_matmul_f64(int64_t m, int64_t n,
                                               int64_t k, const double *a,
                                               const double *b, double *c) {
  product(m, n, k, a, b, c, Precision::Full, energy_support_matmul_f64,
          "cublasDgemm");
}

extern "C" void energy_support_cuda_matmul_bf16(int64_t m, int64_t n, int64_t k,
                                                const float *a, const float *b,
                                                float *c) {
  product(m, n, k, a, b, c, Precision::Bf16, energy_support_matmul_f32,
          "cublasGemmEx (bf16 products)");
}
