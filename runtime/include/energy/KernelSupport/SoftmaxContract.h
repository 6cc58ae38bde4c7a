/*===- SoftmaxContract.h - The blocked softmax-contraction kernel ---------===*\
|*                                                                            *|
|* The hot kernel of log-sum-exp energies (attention-like terms and their    *|
|* gradients): a softmax over the columns of a score matrix, contracted with *|
|* value tables on the row side, the column side, or both, without storing   *|
|* anything of size rows × cols but the scores of small problems (at most    *|
|* 16 MiB, kept for the column side). Plain C, so that generated code and    *|
|* tools call it by name; how it works is told in                            *|
|* runtime/lib/KernelSupport/SoftmaxContractKernel.h.                        *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef ENERGY_KERNELSUPPORT_SOFTMAXCONTRACT_H
#define ENERGY_KERNELSUPPORT_SOFTMAXCONTRACT_H

#include <stddef.h>
#include <stdint.h>

#define ENERGY_SUPPORT_SOFTMAX_CONTRACT_F32                                    \
  "energy_support_softmax_contract_f32"
#define ENERGY_SUPPORT_SOFTMAX_CONTRACT_F64                                    \
  "energy_support_softmax_contract_f64"

/* Kinds of constraint on a (row, col) pair. */
#define ENERGY_CONSTRAINT_GE 0 /* a·row + b·col + offset >= 0 */
#define ENERGY_CONSTRAINT_NE 1 /* a·row + b·col + offset != 0 */

/* What a call does with kept tiles (kept_tiles_mode), and the most bytes of
 * kept tiles that energy_support_softmax_contract_tiles allocates (beyond
 * that, writing and reading them costs more than computing them again). */
#define ENERGY_CONTRACT_TILES_NONE 0
#define ENERGY_CONTRACT_TILES_KEEP 1
#define ENERGY_CONTRACT_TILES_REUSE 2
#define ENERGY_CONTRACT_MAX_TILE_BYTES ((int64_t)16 << 20)
/* Kept tiles of at most this many bytes stay in a core's cache: they are
 * read back whatever their depth; larger ones only when their products are
 * deep (SoftmaxContractKernel.h, tilesWorthKeeping). */
#define ENERGY_CONTRACT_CACHED_TILE_BYTES ((int64_t)1 << 20)

/* What the kernel returns. */
#define ENERGY_CONTRACT_OK 0
#define ENERGY_CONTRACT_INVALID_ARGUMENT 1
#define ENERGY_CONTRACT_OUT_OF_MEMORY 2
/* The GPU failed (the CUDA versions only; energy_support_cuda_last_error
 * says how). */
#define ENERGY_CONTRACT_DEVICE_ERROR 3

#ifdef __cplusplus
extern "C" {
#endif

/* A linear condition on a pair; four 8-byte slots: a, b, offset, kind. */
typedef struct energy_contract_constraint {
  int64_t row_coefficient; /* a */
  int64_t col_coefficient; /* b */
  int64_t offset;
  int64_t kind; /* ENERGY_CONSTRAINT_GE or ENERGY_CONSTRAINT_NE */
} energy_contract_constraint;

/* The arguments, 36 slots of 8 bytes each (int64_t, double or a pointer), in
 * this order, so that a code generator can fill them as an array of 8-byte
 * slots:
 *   0 rows  1 cols  2 depth  3 row_features  4 col_features  5 scale
 *   6 temperature  7 num_constraints  8 constraints  9 lse  10 given_lse
 *   11 num_row_outputs  12 col_values  13 row_output_widths  14 row_outputs
 *   15 num_col_outputs  16 row_values  17 col_output_widths  18 col_outputs
 *   19 batch  20 num_pair_terms  21 pair_depths  22 pair_row_features
 *   23 pair_col_features  24 row_output_weights  25 col_output_weights
 *   26 kept_tiles  27 kept_tiles_mode  28 pair_bias  29 pair_bias_length
 *   30 pair_bias_row_coefficient  31 pair_bias_col_coefficient
 *   32 pair_bias_offset  33 num_pair_products  34 pair_products
 *   35 num_pair_sums
 * Arrays of the element type (float for _f32, double for _f64) are
 * row-major and contiguous; "void" pointers point at that type.
 *
 * Semantics, with Nr = rows, Nc = cols, D = depth, T = temperature,
 * m = num_pair_terms:
 *   s(r, c) = scale · <row_features[r, :], col_features[c, :]> + β(r, c)
 *   β(r, c) = pair_bias[a·r + b·c + o] with a, b, o the pair bias's row and
 *          col coefficients and offset (a learned bias per relative offset
 *          r − c, or per pair with a = Nc, b = 1), or 0 when pair_bias is
 *          null; every admitted (r, c) must give an index in
 *          [0, pair_bias_length) (pairs the constraints exclude are not
 *          read)
 *   (r, c) is admitted when every constraint holds; only admitted pairs count.
 *   L[r] = T · log Σ_{admitted c} exp(s(r, c) / T), or 0 for a row with no
 *          admitted column; or given_lse[r] when given_lse is not null.
 *   w(r, c) = exp((s(r, c) − L[r]) / T) for admitted pairs, else 0.
 *   t_i(r, c) = <pair_row_features[i][r, :], pair_col_features[i][c, :]>
 *          for each pair term i < m (no scale, no temperature)
 *   t_{m+p}(r, c) = t_a(r, c) · t_b(r, c) for each pair product p < q,
 *          with a = pair_products[2p] and b = pair_products[2p + 1] (both
 *          in [0, m)): a factor of degree 2 in the pair terms
 *   f_j(r, c) = κ + Σ_i α_i · t_i(r, c) over i < m + q, with
 *          (κ, α_0, .., α_{m+q−1}) the coefficients of output j: row output
 *          j's are row_output_weights[j·(1 + m + q) .. (j + 1)·(1 + m + q)),
 *          col output j's col_output_weights' likewise; a null array gives
 *          its side's outputs κ = 1, α = 0
 *   row_outputs[j][r, :] = Σ_c w(r, c) · f_j(r, c) · col_values[j][c, :]
 *          (Nr × width)
 *   col_outputs[j][c, :] = Σ_r w(r, c) · f_j(r, c) · row_values[j][r, :]
 *          (Nc × width), but for the last num_pair_sums col outputs (pair
 *          sums, of width 1, which need a pair bias):
 *   col_outputs[j][u] = Σ_{admitted (r, c): a·r + b·c + o = u} w(r, c) ·
 *          f_j(r, c) · row_values[j][r] (pair_bias_length elements, 0 where
 *          no admitted pair lands): the sums at the pair bias's indices (its
 *          gradient, the score's derivative being 1 there)
 *   lse[r] = L[r] (a copy of given_lse when that is set).
 * With batch = B >= 1, every array of elements holds B such problems back to
 * back (a row-side array B · Nr rows, a column-side one B · Nc rows, pair
 * features, the pair bias and pair sums (pair_bias_length elements a
 * problem) included): problem b reads and writes slice b of each, with the same
 * sizes, widths, depths, scale, temperature, constraints and coefficients (a
 * batch of attention heads). Every output is overwritten, not accumulated into.
 * Outputs must not overlap inputs or each other. The results are the same, bit
 * for bit, whatever the number of threads of the pool.
 *
 * Kept tiles: two calls over the same pairs (the same sizes, features,
 * scale, temperature, constraints and pair terms) can share the scores and
 * pair terms instead of computing them twice, when kept_tiles points at
 * batch · (1 + m) · Nr · Nc elements (energy_support_softmax_contract_tiles
 * allocates them) that outlive both calls. With kept_tiles_mode
 * ENERGY_CONTRACT_TILES_KEEP, the row side (which then runs even with
 * nothing to sum) writes them there; with ENERGY_CONTRACT_TILES_REUSE, the
 * column side reads them there, as an earlier call with KEEP wrote them.
 * The results are the same bits as without. A null kept_tiles or
 * ENERGY_CONTRACT_TILES_NONE computes everything; so does the kernel of a
 * GPU, and so do both calls where the tiles would cost more to keep than to
 * compute again (more than ENERGY_CONTRACT_CACHED_TILE_BYTES of shallow
 * products: a rule of the sizes and depths, which both calls share). (A
 * call with both sides keeps its tiles by itself when they are small.) */
typedef struct energy_softmax_contract_args {
  int64_t rows, cols, depth;
  const void *row_features; /* Nr × D */
  const void *col_features; /* Nc × D */
  double scale;             /* finite */
  double temperature;       /* finite, > 0 */
  int64_t num_constraints;
  const energy_contract_constraint *constraints; /* all must hold */
  void *lse;                                     /* out, Nr, or null */
  const void *given_lse; /* in, Nr, or null: the normaliser to use */
  int64_t num_row_outputs;
  const void *const *col_values;    /* table j: Nc × row_output_widths[j] */
  const int64_t *row_output_widths; /* >= 0 */
  void *const *row_outputs;         /* output j: Nr × row_output_widths[j] */
  int64_t num_col_outputs;
  const void *const *row_values;    /* table j: Nr × col_output_widths[j] */
  const int64_t *col_output_widths; /* >= 0 */
  void *const *col_outputs;         /* output j: Nc × col_output_widths[j] */
  int64_t batch;                    /* problems, >= 1 */
  int64_t num_pair_terms;           /* m >= 0 */
  const int64_t *pair_depths;       /* term i: >= 0 */
  const void *const *pair_row_features; /* term i: Nr × pair_depths[i] */
  const void *const *pair_col_features; /* term i: Nc × pair_depths[i] */
  /* num_row_outputs × (1 + m + q), finite, or null */
  const double *row_output_weights;
  /* num_col_outputs × (1 + m + q), finite, or null */
  const double *col_output_weights;
  void *kept_tiles;        /* batch × (1 + m) × Nr × Nc, or null */
  int64_t kept_tiles_mode; /* ENERGY_CONTRACT_TILES_NONE, _KEEP or _REUSE */
  const void *pair_bias;   /* batch × pair_bias_length, or null */
  int64_t pair_bias_length;
  int64_t pair_bias_row_coefficient; /* a */
  int64_t pair_bias_col_coefficient; /* b */
  int64_t pair_bias_offset;          /* o */
  int64_t num_pair_products;         /* q >= 0 */
  const int64_t *pair_products;      /* 2q pair term indices, each in [0, m) */
  int64_t num_pair_sums; /* the last col outputs that are pair sums, >= 0 */
} energy_softmax_contract_args;

#ifdef __cplusplus
#define ENERGY_CONTRACT_STATIC_ASSERT static_assert
#else
#define ENERGY_CONTRACT_STATIC_ASSERT _Static_assert
#endif
ENERGY_CONTRACT_STATIC_ASSERT(sizeof(energy_softmax_contract_args) == 36 * 8,
                              "every field is one 8-byte slot");
ENERGY_CONTRACT_STATIC_ASSERT(
    offsetof(energy_softmax_contract_args, scale) == 5 * 8 &&
        offsetof(energy_softmax_contract_args, lse) == 9 * 8 &&
        offsetof(energy_softmax_contract_args, num_col_outputs) == 15 * 8 &&
        offsetof(energy_softmax_contract_args, col_outputs) == 18 * 8 &&
        offsetof(energy_softmax_contract_args, batch) == 19 * 8 &&
        offsetof(energy_softmax_contract_args, num_pair_terms) == 20 * 8 &&
        offsetof(energy_softmax_contract_args, pair_depths) == 21 * 8 &&
        offsetof(energy_softmax_contract_args, pair_row_features) == 22 * 8 &&
        offsetof(energy_softmax_contract_args, pair_col_features) == 23 * 8 &&
        offsetof(energy_softmax_contract_args, row_output_weights) == 24 * 8 &&
        offsetof(energy_softmax_contract_args, col_output_weights) == 25 * 8 &&
        offsetof(energy_softmax_contract_args, kept_tiles) == 26 * 8 &&
        offsetof(energy_softmax_contract_args, kept_tiles_mode) == 27 * 8 &&
        offsetof(energy_softmax_contract_args, pair_bias) == 28 * 8 &&
        offsetof(energy_softmax_contract_args, pair_bias_offset) == 32 * 8 &&
        offsetof(energy_softmax_contract_args, pair_products) == 34 * 8 &&
        offsetof(energy_softmax_contract_args, num_pair_sums) == 35 * 8,
    "the slots are in the documented order");
ENERGY_CONTRACT_STATIC_ASSERT(sizeof(energy_contract_constraint) == 4 * 8,
                              "every field is one 8-byte slot");
#undef ENERGY_CONTRACT_STATIC_ASSERT

/* Computes the outputs the arguments ask for. Returns ENERGY_CONTRACT_OK, or
 * ENERGY_CONTRACT_INVALID_ARGUMENT (a batch < 1, negative sizes, widths,
 * counts or pair depths, sizes whose product overflows, a null pointer
 * that is needed, a temperature that is not finite and positive, a scale
 * or a coefficient that is not finite, an unknown constraint kind, a pair
 * bias of no elements or one that an admitted pair reads outside, a pair
 * product of a term that does not exist, pair sums without a pair bias or
 * wider than 1), having
 * written nothing, or ENERGY_CONTRACT_OUT_OF_MEMORY, with the outputs
 * unspecified. Never aborts.
 * A pointer is needed when what it points at is not empty: row_features when
 * Nr·D > 0, a value table or output when its rows × width > 0, pair
 * features when their rows × pair depth > 0; the arrays of tables, widths
 * and outputs when their count is > 0, pair_depths, pair_row_features
 * and pair_col_features when m > 0, and pair_products when q > 0. */
int32_t
energy_support_softmax_contract_f32(const energy_softmax_contract_args *args);
int32_t
energy_support_softmax_contract_f64(const energy_softmax_contract_args *args);

/* Room for the kept tiles of `batch` problems of `rows` × `cols` pairs with
 * `pair_terms` pair terms, of `element_bytes` (4 or 8) each, to be freed with
 * energy_support_scratch_free(); null when they would take more than
 * ENERGY_CONTRACT_MAX_TILE_BYTES (16 MiB), when a count is negative or
 * overflows, or when memory runs out: the calls then compute everything. */
#define ENERGY_SUPPORT_SOFTMAX_CONTRACT_TILES                                  \
  "energy_support_softmax_contract_tiles"
void *energy_support_softmax_contract_tiles(int64_t batch, int64_t rows,
                                            int64_t cols, int64_t pair_terms,
                                            int64_t element_bytes);

/* The same for CUDA artifacts (CudaContract.cpp): on the GPU when the sizes
 * fit its kernels (depth and the widths' sum at most 128 for f32, 64 for
 * f64; at most 4 tables a side and 4 constraints) and there are no pair
 * terms, no pair bias and no coefficients other than κ = 1, else on the
 * host. On the
 * GPU its kernels queue after the work before them and the call returns
 * without waiting (as energy_support_cuda_launch; energy_support_cuda_fence
 * waits); on the host it waits first. Every pointer must be memory the GPU
 * reaches. May also return ENERGY_CONTRACT_DEVICE_ERROR. */
#define ENERGY_SUPPORT_CUDA_SOFTMAX_CONTRACT_F32                               \
  "energy_support_cuda_softmax_contract_f32"
#define ENERGY_SUPPORT_CUDA_SOFTMAX_CONTRACT_F64                               \
  "energy_support_cuda_softmax_contract_f64"
int32_t energy_support_cuda_softmax_contract_f32(
    const energy_softmax_contract_args *args);
int32_t energy_support_cuda_softmax_contract_f64(
    const energy_softmax_contract_args *args);

/* The f32 contraction with bf16 operands on tensor cores (fp32 scores,
 * softmax and sums; the weights rounded to bf16 before they meet the
 * values): what energyc --dtype bf16 artifacts call. The same sizes as
 * _f32 go to the GPU; the host computes the others in f32. */
#define ENERGY_SUPPORT_CUDA_SOFTMAX_CONTRACT_BF16                              \
  "energy_support_cuda_softmax_contract_bf16"
int32_t energy_support_cuda_softmax_contract_bf16(
    const energy_softmax_contract_args *args);

/* Which tensor-core kernels energy_support_cuda_softmax_contract_bf16 runs
 * from now on: "mma" (mma.sync, sm_80 and up), "wgmma" (Hopper's warpgroup
 * instructions, sm_90 GPUs only), "wgmma-pipelined" (the same, a tile's
 * sums overlapping the next tile's scores and weights) or "auto" (mma's).
 * Before the first choice, the kernels the environment variable
 * ENERGY_CUDA_TENSOR_CORES names (or auto's). Returns 0, or
 * ENERGY_KERNEL_DEVICE_ERROR with the choice unchanged: an unknown name, or
 * kernels this build or GPU cannot run (energy_support_cuda_last_error says
 * which). */
int32_t energy_support_cuda_tensor_core_kernels(const char *name);

/* The bf16 contraction on cuDNN's fused flash attention (FusedAttention.cpp),
 * for the contractions the plan gives to cuDNN: the row side alone (no pair
 * terms or pair bias, no column outputs, no given normaliser, κ = 1), unmasked
 * or with the causal constraint col <= row, depth and the widths' sum at most
 * 128; Q, K and the value tables are rounded to bf16, the scores, softmax and
 * sums are f32, the outputs rounded to bf16. Anything else, or where
 * libcudnn.so.9 cannot be opened (ENERGY_CUDNN may name it) or takes no
 * such graph, goes to energy_support_cuda_softmax_contract_bf16, and
 * the log handler (energy_support_set_log_handler) says why, once per
 * reason. */
#define ENERGY_SUPPORT_CUDA_FUSED_ATTENTION_BF16                               \
  "energy_support_cuda_fused_attention_bf16"
int32_t energy_support_cuda_fused_attention_bf16(
    const energy_softmax_contract_args *args);

/* Why cuDNN's fused attention would not compute `args` (a sentence), or
 * null when it would; builds (and keeps) cuDNN's graph for their sizes. */
const char *energy_support_cuda_fused_attention_misfit(
    const energy_softmax_contract_args *args);

#ifdef __cplusplus
}
#endif

#endif /* ENERGY_KERNELSUPPORT_SOFTMAXCONTRACT_H */
