//===- MatrixProduct.cpp - Matrix products of compiled kernels ------------===//
//
// Plain matrix products of compiled kernels (projections X Wᵀ ahead of a
// softmax contraction, products in step programs) run on the vector paths'
// panel product (PanelProduct.h: one order of the sums whatever the cut,
// faster than OpenBLAS on the zoo's products, docs/benchmarks.md), or
// where a side is too thin for its tiles on OpenBLAS, loaded with dlopen
// the first time one is needed, so that artifacts carry no link dependency
// and still run, on the fallback loop here, where it is missing. Debian's
// OpenBLAS 0.3.21 does not recognise recent Intel CPUs (family 6, model 207
// among them) and falls back to its SSE3 "Prescott" kernels, about five
// times slower than its AVX-512 ones: when this library loads OpenBLAS it
// names the core the CPU supports (OPENBLAS_CORETYPE: SkylakeX with
// AVX-512, Haswell with AVX2), unless the user named one or the process had
// loaded OpenBLAS already. OpenBLAS runs on one thread (its own threads
// told to sleep at once, OPENBLAS_THREAD_TIMEOUT): large products are cut
// into pieces of rows or columns (of C, or for Aᵀ B into a small C of A
// and B) that the kernels' thread pool shares out, so that one pool, not
// two, uses the cores. A batch of products summed over the batch is one
// product over the batch's whole inner dim where the operands' layout
// allows it (the matrices stacked, or side by side in a copy).
//
//===----------------------------------------------------------------------===//

#include "energy/KernelSupport/MatrixProduct.h"
#include "energy/KernelSupport/InstructionSet.h"
#include "energy/KernelSupport/KernelSupport.h"

#include "IsaKernels.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

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

/// An environment variable set to a value for a scope, then restored.
class ScopedVariable {
public:
  ScopedVariable(const char *name, const char *value) : name(name) {
    if (const char *current = std::getenv(name))
      previous = current;
    setenv(name, value, /*overwrite=*/1);
  }
  ~ScopedVariable() {
    if (previous)
      setenv(name, previous->c_str(), /*overwrite=*/1);
    else
      unsetenv(name);
  }
  ScopedVariable(const ScopedVariable &) = delete;
  ScopedVariable &operator=(const ScopedVariable &) = delete;

private:
  const char *name;
  std::optional<std::string> previous;
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
    std::optional<ScopedVariable> coreType;
    if (core && !std::getenv("OPENBLAS_CORETYPE"))
      coreType.emplace("OPENBLAS_CORETYPE", core);
    // Its threads, which the products never use (they run on one thread,
    // below), sleep at once: each spins (yielding) for ~0.1 s after it
    // starts, beside the pool's threads, which slowed short runs down.
    // Loading it with OPENBLAS_NUM_THREADS=1 would start none, but changes
    // how much it allocates (docs/benchmarks.md, "Figures behind the
    // code").
    ScopedVariable timeout("OPENBLAS_THREAD_TIMEOUT", "4");
    handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
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

/// OpenBLAS runs on one thread. With its own threads beside the kernels'
/// pool, both on the same cores (the pool's workers spinning between
/// loops, OpenBLAS's yielding while they wait), a training step's small
/// products and loops slowed each other down.
void singleThreaded(const Blas &library) {
  static std::atomic<bool> done{false};
  if (library.setThreads && !done.exchange(true))
    library.setThreads(1);
}

/// Multiply-adds below which a product is one call on the calling thread (a
/// few microseconds); a larger bound left products of a training step on
/// one core while the others waited.
constexpr int64_t kPieceWork = int64_t(1) << 18;

/// The fewest rows or columns of C in a piece: every piece packs its part
/// of op(B) (a piece of rows all of it; OpenBLAS the other operand too),
/// which thin pieces pay for.
constexpr int64_t kPieceExtent = 128;

/// Rows or columns of C a piece's extent is a multiple of: whole panels of
/// the panel product's widest tiles, and of its tiles' rows.
constexpr int64_t kPieceAlignment = 64;

/// How a product of these sizes is cut into pieces of C: along its columns
/// where it has at least as many as rows, else along its rows, each piece
/// (but the last) a multiple of kPieceAlignment; from its sizes alone,
/// never from the number of threads, so that the result does not depend on
/// it.
struct Pieces {
  int64_t count;
  bool byColumns;
  int64_t extent; ///< rows or columns of a piece
};
Pieces piecesOf(int64_t m, int64_t n, int64_t k) {
  bool byColumns = n >= m;
  int64_t total = byColumns ? n : m;
  int64_t byWork = (m * n * k) / kPieceWork;
  int64_t byExtent = total / kPieceExtent;
  int64_t count = std::clamp<int64_t>(std::min(byWork, byExtent), 1, 64);
  int64_t extent = (total + count - 1) / count;
  extent = (extent + kPieceAlignment - 1) / kPieceAlignment * kPieceAlignment;
  return {(total + extent - 1) / extent, byColumns, extent};
}

/// Whether OpenBLAS takes a product of these sizes (its interface counts in
/// int).
bool fitsBlas(int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kLimit = 1 << 30;
  return m > 0 && n > 0 && k > 0 && m < kLimit && n < kLimit && k < kLimit;
}

/// c = op(a) · op(b), or c += with `add` (leading dims lda, ldb, ldc), in
/// i, k, j order: the innermost loop runs along rows of b (when not
/// transposed) and of c, so the compiler vectorises it.
template <typename T>
void fallbackProduct(int64_t m, int64_t n, int64_t k, const T *a, int64_t lda,
                     bool transposeA, const T *b, int64_t ldb, bool transposeB,
                     bool add, T *c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    T *row = c + i * ldc;
    if (!add)
      std::fill(row, row + n, T(0));
    for (int64_t p = 0; p < k; ++p) {
      T factor = transposeA ? a[p * lda + i] : a[i * lda + p];
      if (transposeB) {
        for (int64_t j = 0; j < n; ++j)
          row[j] += factor * b[j * ldb + p];
        continue;
      }
      const T *other = b + p * ldb;
      for (int64_t j = 0; j < n; ++j)
        row[j] += factor * other[j];
    }
  }
}

/// Whether the vector paths' panel product (PanelProduct.h) computes a
/// product of these sizes: any with an inner dim on AVX2 or AVX-512, thin
/// sides too (their tiles' tails masked; faster than OpenBLAS's kernels on
/// a class count of 10: benchmarks.md).
bool panelProductFits(int64_t m, int64_t n, int64_t k) {
  static const bool disabled = std::getenv("ENERGY_NO_PANEL_PRODUCTS");
  return !disabled &&
         energy::kernels::activeInstructionSet() >= ENERGY_ISA_AVX2 &&
         m >= 1 && n >= 1 && k >= 1;
}

bool panelProduct(const energy::kernels::ProductArgs<float> &args) {
  return ENERGY_KERNEL_FOR_ACTIVE_ISA(panelProductF32)(args);
}

bool panelProduct(const energy::kernels::ProductArgs<double> &args) {
  return ENERGY_KERNEL_FOR_ACTIVE_ISA(panelProductF64)(args);
}

bool packPanelCache(const energy::kernels::ProductArgs<float> &args,
                    float *cache) {
  return ENERGY_KERNEL_FOR_ACTIVE_ISA(packPanelCacheF32)(args, cache);
}

bool packPanelCache(const energy::kernels::ProductArgs<double> &args,
                    double *cache) {
  return ENERGY_KERNEL_FOR_ACTIVE_ISA(packPanelCacheF64)(args, cache);
}

void blasProduct(const Blas &library, int transposeA, int transposeB, int m,
                 int n, int k, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc) {
  library.sgemm(kRowMajor, transposeA, transposeB, m, n, k, 1.0f, a, lda, b,
                ldb, beta, c, ldc);
}

void blasProduct(const Blas &library, int transposeA, int transposeB, int m,
                 int n, int k, const double *a, int lda, const double *b,
                 int ldb, double beta, double *c, int ldc) {
  library.dgemm(kRowMajor, transposeA, transposeB, m, n, k, 1.0, a, lda, b, ldb,
                beta, c, ldc);
}

/// Whether OpenBLAS is there for products of T.
template <typename T> bool hasBlas(const Blas &library) {
  return std::is_same_v<T, float> ? bool(library.sgemm) : bool(library.dgemm);
}

/// Whole panels of an op(B) packed ahead (packPanelCache), for the pieces
/// of its products: those of the matrix, of `columns` columns, whose first
/// column is `firstColumn`; none where `panels` is null.
template <typename T> struct PackedPanels {
  const T *panels = nullptr;
  int64_t columns = 0, firstColumn = 0;
};

/// c = op(a) · op(b), or c += it with `add` (leading dims lda, ldb, ldc): the
/// panel product where it fits (reading `packed`'s panels where it can),
/// else OpenBLAS, else the fallback loop.
template <typename T>
void pieceProduct(const Blas &library, bool transposeA, bool transposeB,
                  int64_t m, int64_t n, int64_t k, const T *a, int64_t lda,
                  const T *b, int64_t ldb, bool add, T *c, int64_t ldc,
                  PackedPanels<T> packed = {}) {
  if (panelProductFits(m, n, k) &&
      panelProduct(energy::kernels::ProductArgs<T>{
          transposeA, transposeB, m, n, k, a, lda, b, ldb, add, c, ldc,
          packed.panels, packed.columns, packed.firstColumn}))
    return;
  if (hasBlas<T>(library)) {
    blasProduct(library, transposeA ? kTranspose : kNoTranspose,
                transposeB ? kTranspose : kNoTranspose, int(m), int(n), int(k),
                a, int(lda), b, int(ldb), T(add ? 1 : 0), c, int(ldc));
    return;
  }
  fallbackProduct(m, n, k, a, lda, transposeA, b, ldb, transposeB, add, c, ldc);
}

/// A batch of products for BLAS, cut into pieces of rows or columns of C:
/// work item i is piece i % pieces of product i / pieces (of every
/// product, summed in order, with `sum`).
template <typename T> struct PiecedProducts {
  const Blas *library;
  int64_t batch, m, n, k, pieces, extentPerPiece;
  bool byColumns;
  const T *a, *b;
  int64_t aStride, bStride;
  T *c;
  bool transposeA, transposeB, sum, accumulate;
  /// op(B[p])'s whole panels packed ahead at packed + p · n · k (p = 0 for
  /// a B shared by every p), or null.
  const T *packed;

  void run(int64_t item) const {
    int64_t piece = item % pieces;
    int64_t first = piece * extentPerPiece;
    int64_t extent =
        std::min(byColumns ? n : m, first + extentPerPiece) - first;
    if (extent <= 0)
      return;
    int64_t rows = byColumns ? m : extent, cols = byColumns ? extent : n;
    int64_t lda = transposeA ? m : k, ldb = transposeB ? k : n;
    // The piece's first row of op(A) (or column of op(B)) and of C.
    int64_t aOffset = byColumns ? 0 : (transposeA ? first : first * lda);
    int64_t bOffset = !byColumns ? 0 : (transposeB ? first * ldb : first);
    int64_t cOffset = byColumns ? first : first * n;
    int64_t begin = sum ? 0 : item / pieces, end = sum ? batch : begin + 1;
    for (int64_t p = begin; p < end; ++p) {
      const T *ap = a + p * aStride + aOffset, *bp = b + p * bStride + bOffset;
      T *cp = (sum ? c : c + p * m * n) + cOffset;
      PackedPanels<T> panels;
      if (packed)
        panels = {packed + (bStride ? p * n * k : 0), n, byColumns ? first : 0};
      pieceProduct(*library, transposeA, transposeB, rows, cols, k, ap, lda, bp,
                   ldb, accumulate || (sum && p > 0), cp, n, panels);
    }
  }

  static void chunk(void *context, int64_t begin, int64_t end) {
    auto *self = static_cast<const PiecedProducts *>(context);
    for (int64_t item = begin; item < end; ++item)
      self->run(item);
  }
};

/// Aᵀ B for a long A (k × m) and B (k × n), a small C (m × n): a sum over
/// k cut into pieces of rows of A and B, each summed into its own partial
/// C, the partials then added in order. Each thread reads only its pieces'
/// rows (in the pool, the rows it computed in the loops before), where
/// pieces of rows of C would each read all of A and B.
template <typename T> struct SummedRows {
  const Blas *library;
  int64_t m, n, k, pieces;
  const T *a, *b;
  T *partials;

  int64_t firstRow(int64_t piece) const { return piece * k / pieces; }

  static void chunk(void *context, int64_t begin, int64_t end) {
    auto *self = static_cast<const SummedRows *>(context);
    for (int64_t piece = begin; piece < end; ++piece) {
      int64_t first = self->firstRow(piece);
      int64_t rows = self->firstRow(piece + 1) - first;
      pieceProduct(*self->library, true, false, self->m, self->n, rows,
                   self->a + first * self->m, self->m,
                   self->b + first * self->n, self->n, false,
                   self->partials + piece * self->m * self->n, self->n);
    }
  }
};

/// The number of pieces of rows of A and B that Aᵀ B (k × m, k × n) is
/// summed in: from its sizes alone, never from the number of threads.
int64_t summedPiecesOf(int64_t m, int64_t n, int64_t k) {
  if (m * n > (int64_t(1) << 14))
    return 1;
  return std::clamp<int64_t>(std::min((m * n * k) / kPieceWork, k / 64), 1, 16);
}

/// Scratch memory of the kernels' cache, given back at the end of a scope.
template <typename T> class Scratch {
public:
  explicit Scratch(int64_t count)
      : data(static_cast<T *>(
            energy_support_scratch_alloc(count * int64_t(sizeof(T))))) {}
  ~Scratch() { energy_support_scratch_free(data); }
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  T *data;
};

/// The matrices[p] (rows × cols each, `stride` apart) side by side: row i
/// of the result is row i of every matrix, in order (rows × batch·cols).
template <typename T>
void sideBySide(int64_t batch, int64_t rows, int64_t cols, const T *matrices,
                int64_t stride, T *result) {
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(result + (i * batch + p) * cols,
                  matrices + p * stride + i * cols, cols * sizeof(T));
}

/// Whether every matrix of an operand (`count` elements each, `stride`
/// apart) is ±0: the scan stops at the first other element, which for most
/// operands is the first.
template <typename T>
bool allZero(int64_t batch, int64_t count, const T *a, int64_t stride) {
  const int64_t matrices = stride == 0 ? std::min<int64_t>(batch, 1) : batch;
  for (int64_t p = 0; p < matrices; ++p)
    for (int64_t i = 0; i < count; ++i)
      if (a[p * stride + i] != T(0))
        return false;
  return true;
}

/// op(B[p]) for every matrix of b (one where bStride is 0) packed into
/// `cache` for the panel products, where `valid` (the kernel's flag: 1 kept,
/// 0 to keep, -1 not to keep) says the cache holds them or is to: packed
/// now when it is 0. Null where the products are to pack their own: no
/// cache, a flag of -1, no panel product for these sizes, or no whole
/// panel.
template <typename T>
const T *panelCache(int64_t batch, int64_t m, int64_t n, int64_t k, const T *b,
                    int64_t bStride, bool transposeB, T *cache, T *valid) {
  if (!cache || !valid || *valid == T(-1) || !panelProductFits(m, n, k))
    return nullptr;
  if (*valid == T(1))
    return cache;
  int64_t matrices = bStride ? batch : 1;
  for (int64_t p = 0; p < matrices; ++p) {
    energy::kernels::ProductArgs<T> args{};
    args.transposeB = transposeB;
    args.n = n;
    args.k = k;
    args.b = b + p * bStride;
    args.ldb = transposeB ? k : n;
    if (!packPanelCache(args, cache + p * n * k))
      return nullptr;
  }
  *valid = T(1);
  return cache;
}

template <typename T>
void batchProducts(int64_t batch, int64_t m, int64_t n, int64_t k, const T *a,
                   int64_t aStride, const T *b, int64_t bStride, T *c,
                   int64_t flags, T *cache = nullptr, T *valid = nullptr) {
  bool transposeA = flags & ENERGY_PRODUCT_TRANSPOSE_A;
  bool transposeB = flags & ENERGY_PRODUCT_TRANSPOSE_B;
  bool sum = flags & ENERGY_PRODUCT_SUM_BATCH;
  bool accumulate = flags & ENERGY_PRODUCT_ACCUMULATE;
  // Products of an A or a B of zeros (a state that starts at zeros, in its
  // first step and in the parameter's gradient of its backward step) are
  // zeros, and not computed: as reference BLAS skips zero entries, a NaN or
  // an infinity of the other then does not reach C.
  if (allZero(batch, m * k, a, aStride) || allZero(batch, k * n, b, bStride)) {
    if (!accumulate)
      std::fill(c, c + (sum ? 1 : batch) * m * n, T(0));
    return;
  }
  const Blas &library = blas();
  // Products through the library: the panel product, OpenBLAS where it
  // does not fit, or both missing, the fallback loop piece by piece.
  bool inPieces = fitsBlas(m, n, k);
  if (hasBlas<T>(library))
    singleThreaded(library);
  // Products that are one GEMM of the stacked matrices: A[p] B for every p
  // (the rows of all A[p] times one B), and Σ_p A[p]ᵀ B[p] (a sum over the
  // rows of all of them).
  if (inPieces && batch > 1 && !transposeA && !sum && bStride == 0 &&
      aStride == m * k && fitsBlas(batch * m, n, k)) {
    m *= batch;
    batch = 1;
  } else if (inPieces && batch > 1 && transposeA && !transposeB && sum &&
             aStride == m * k && bStride == k * n &&
             fitsBlas(m, n, batch * k)) {
    k *= batch;
    batch = 1;
    cache = nullptr;
  }
  // Σ_p A[p] op(B[p]) (a sum over heads of each head's rows times its
  // matrix) is one GEMM of the A[p] side by side (m × batch·k, a copy) and
  // the op(B[p]) stacked (as they are, or side by side when transposed):
  // one product over the whole inner dim, not one short one per p.
  std::optional<Scratch<T>> stackedA, stackedB;
  if (inPieces && batch > 1 && !transposeA && sum && aStride == m * k &&
      bStride == k * n && fitsBlas(m, n, batch * k)) {
    stackedA.emplace(m * batch * k);
    if (transposeB)
      stackedB.emplace(n * batch * k);
    if (stackedA->data && (!transposeB || stackedB->data)) {
      cache = nullptr;
      sideBySide(batch, m, k, a, aStride, stackedA->data);
      a = stackedA->data;
      if (transposeB) {
        sideBySide(batch, n, k, b, bStride, stackedB->data);
        b = stackedB->data;
      }
      k *= batch;
      batch = 1;
    }
  }
  if (sum && !accumulate && (batch == 0 || !inPieces))
    std::fill(c, c + m * n, T(0));
  int64_t pieces = summedPiecesOf(m, n, k);
  if (std::optional<Scratch<T>> partials;
      inPieces && batch == 1 && transposeA && !transposeB && pieces > 1 &&
      partials.emplace(pieces * m * n).data) {
    SummedRows<T> products{&library, m, n, k, pieces, a, b, partials->data};
    energy_support_parallel_for(SummedRows<T>::chunk, &products, pieces);
    // Piece by piece: each element summed in the order of the pieces, in
    // element-wise passes rather than a chain of dependent adds.
    if (!accumulate)
      std::fill(c, c + m * n, T(0));
    for (int64_t piece = 0; piece < pieces; ++piece) {
      const T *partial = partials->data + piece * m * n;
      for (int64_t i = 0; i < m * n; ++i)
        c[i] += partial[i];
    }
    return;
  }
  if (inPieces && batch > 0) {
    const T *packed =
        panelCache(batch, m, n, k, b, bStride, transposeB, cache, valid);
    Pieces pieces = piecesOf(m, n, k * (sum ? batch : 1));
    int64_t items = (sum ? 1 : batch) * pieces.count;
    PiecedProducts<T> products{&library,
                               batch,
                               m,
                               n,
                               k,
                               pieces.count,
                               pieces.extent,
                               pieces.byColumns,
                               a,
                               b,
                               aStride,
                               bStride,
                               c,
                               transposeA,
                               transposeB,
                               sum,
                               accumulate,
                               packed};
    if (items == 1)
      products.run(0);
    else
      energy_support_parallel_for(PiecedProducts<T>::chunk, &products, items);
    return;
  }
  for (int64_t p = 0; p < batch; ++p)
    fallbackProduct(m, n, k, a + p * aStride, transposeA ? m : k, transposeA,
                    b + p * bStride, transposeB ? k : n, transposeB,
                    sum || accumulate, sum ? c : c + p * m * n, n);
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

void energy_support_matmul_batch_packed_f32(int64_t batch, int64_t m, int64_t n,
                                            int64_t k, const float *a,
                                            int64_t aStride, const float *b,
                                            int64_t bStride, float *c,
                                            int64_t flags, float *cache,
                                            float *valid) {
  batchProducts(batch, m, n, k, a, aStride, b, bStride, c, flags, cache, valid);
}

void energy_support_matmul_batch_packed_f64(int64_t batch, int64_t m, int64_t n,
                                            int64_t k, const double *a,
                                            int64_t aStride, const double *b,
                                            int64_t bStride, double *c,
                                            int64_t flags, double *cache,
                                            double *valid) {
  batchProducts(batch, m, n, k, a, aStride, b, bStride, c, flags, cache, valid);
}

const char *energy_support_matmul_backend(void) {
  static const std::string description =
      (energy::kernels::activeInstructionSet() >= ENERGY_ISA_AVX2 &&
               !std::getenv("ENERGY_NO_PANEL_PRODUCTS")
           ? std::string("panel products (") +
                 (energy::kernels::activeInstructionSet() >= ENERGY_ISA_AVX512
                      ? "avx512"
                      : "avx2") +
                 "), thin ones on " + blas().description
           : blas().description);
  return description.c_str();
}
}
