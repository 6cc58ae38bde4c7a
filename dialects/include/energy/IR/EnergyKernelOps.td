//===- EnergyKernelOps.td - Kernel-plan ops of the energy dialect -*- tablegen -*-===//
//
// The ops `energy-plan-kernels` writes: decisions about how energy IR runs
// (tables computed once ahead of a loop, softmax contractions fused into one
// kernel) made explicit, so that every backend lowers the same plan.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNEL_OPS_TD
#define ENERGY_KERNEL_OPS_TD

def Energy_TabulateOp : Energy_Op<"tabulate", [RecursiveMemoryEffects,
    RecursivelySpeculatable,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<LoopLikeOpInterface>,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "An array whose slices are a body evaluated at every index";
  let description = [{
    Work that depends on some indices of a loop only, computed once for
    every position of those indices before the loop and read back with
    `energy.extract` (the projections k_p = Wk x_p of an attention energy).
    The result's axes are the domain's dims followed by the body value's.
    Each slice is written by one position, so positions may run in
    parallel.

    ```mlir
    %k = energy.tabulate (%p : @N) {
      %x = energy.read @x[%p] : !energy.array<D>
      %v = energy.matmul %Wk, %x : !energy.array<D, D>, !energy.array<D>
      energy.yield %v : !energy.array<D>
    } : !energy.array<N, D>
    ```
  }];
  let arguments = (ins TypedArrayAttrBase<Energy_DimExprAttr, "sizes">:$sizes);
  let results = (outs Energy_AnyArray:$result);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = [{
    /// The value the body yields.
    ::mlir::Value getBodyValue();
    static ::llvm::StringRef getDefaultDialect() { return "energy"; }
  }];
}

def Energy_SoftmaxContractOp : Energy_Op<"softmax_contract", [
    RecursiveMemoryEffects, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<LoopLikeOpInterface>,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "A log-sum-exp over columns fused with the sums weighted by its softmax";
  let description = [{
    For every row position r (the `rows` domain, possibly empty) and column
    c (the `cols` domain) that the predicate admits, the score region gives
    s(r, c). With temperature T (1 without `temp`):

    - L_r = T log Σ_c exp(s(r, c) / T), the first result, unless `lse`
      gives it; a row with no admitted column has L_r = 0 and weights 0;
    - w(r, c) = exp((s(r, c) − L_r) / T), the softmax weights;
    - child side: for each value f_j yielded by `row_values`, the result
      Σ_c w(r, c) f_j(r, c), one per row;
    - parent side: for each value g_j yielded by `col_values`, the result
      Σ_{r_last} w(r, c) g_j(r, c), one per column and per position of the
      leading (batch) row indices.

    The row indices other than the last are batch indices: the parent side
    sums over the last one only. Results: L (when computed), the child-side
    values ([rows, value]), then the parent-side values ([batch rows, cols,
    value]). Every region takes the row indices and the column index.

    The form says how the score is computed: `generic` evaluates the score
    region at every admitted pair; `bilinear` promises that it is
    `dot(A[rows], B[batch rows, c])`, optionally times a scale computed
    outside, or a sum of such products (of other tables each: a backend
    puts their rows side by side as one product's), optionally plus `R[rows]` and `C[batch rows, c]` (scalar
    tables: biases, which a backend folds into the features) and
    `P[batch rows, a·r + b·c + o]` (a pair bias: one number per relative
    offset r − c, say, of the last row index r and the column; a, b and o
    linear in dims, every admitted pair within P, which the kernel checks),
    with A, B, R, C and P computed outside (the verifier checks it), and
    that every row value is a row `V[batch rows, c]` of a table and every
    column value a row `G[rows]` — the shape that runs as small matrix
    products (../notes/softmax-contract.md); `quadratic` promises one row
    index, no predicate, temperature or given normaliser, a score
    `bias[c] ± scale · quad(X[r] − M[c], P[c])` (a Gaussian mixture's
    E-step, the bias and scale optional), row values that are scalars
    computed outside, and column values that are each 1, `X[r]`,
    `X[r] − M[c]` or its outer product with itself (the M-step's moments).
    A backend may recompute scores (the parent side reuses L_r); nothing of
    size rows × cols is stored, but for tiles of small problems.

    `reuses_scores` (on a bilinear contraction whose `lse` is the first
    result of another bilinear contraction, earlier in the same block)
    promises that the two have the same domains, predicate, temperature and
    score, and that every pair term of this one (a dot product of table
    rows that weighs its values) is one of that one's: a backend may keep
    that one's scores and pair terms, when they are few, and read them here
    instead of computing them again.

    `pair_sums = k` (on a bilinear contraction with a pair bias
    `P[batch rows, a·r + b·c + o]`): the last k column values are scalars
    g_j summed at the pair bias's index rather than per column, the result
    `[batch rows, L]` (L the last axis of P) holding at u the sum of
    w(r, c) g_j(r, c) over the admitted pairs with a·r + b·c + o = u (0
    where none lands): the gradient of a bias per relative offset, summed
    where the scores read it. Only the `"cpu"` engine computes them.

    `engine` (set by energy-plan-engines for the artifact's target; code
    generation only reads it) names what computes the contraction:
    `"loops"`, loops generated for it (any form); `"cpu"`, the support
    library's CPU kernel (bilinear), which keeps its scores and pair terms
    for a later contraction that reuses them; `"cuda"`, the support
    library's GPU kernels (bilinear, or the mixture kernel of a quadratic
    one), which keep none; `"cuda-tensor-cores"`, the GPU's bilinear kernel
    with bf16 products on tensor cores; `"cudnn"`, cuDNN's fused flash
    attention: bilinear, with row values that are plain table rows (no
    factor, no pair term), no column values, no given normaliser, and no
    predicate or the causal one (column <= row) (the verifier checks every
    engine's forms); sizes cuDNN does not take run on the tensor-core
    kernel. Without `engine`, generated loops.

    ```mlir
    %L, %g, %h = energy.softmax_contract bilinear rows (%c : @N) cols (%p : @N)
      score {
        %q = energy.extract %Q[%c] : !energy.array<N, D> -> !energy.array<D>
        %k = energy.extract %K[%p] : !energy.array<N, D> -> !energy.array<D>
        %s = energy.dot %q, %k : !energy.array<D>
        energy.yield %s : !energy.array<>
      } row_values {
        %k = energy.extract %K[%p] : !energy.array<N, D> -> !energy.array<D>
        energy.yield %k : !energy.array<D>
      } col_values {
        %q = energy.extract %Q[%c] : !energy.array<N, D> -> !energy.array<D>
        energy.yield %q : !energy.array<D>
      } : !energy.array<N>, !energy.array<N, D>, !energy.array<N, D>
    ```
  }];
  let arguments = (ins Energy_ContractFormAttr:$form,
                       TypedArrayAttrBase<Energy_DimExprAttr, "sizes">:$rows,
                       Energy_DimExprAttr:$cols,
                       Optional<Energy_Scalar>:$temperature,
                       Optional<Energy_AnyArray>:$given_lse,
                       UnitAttr:$reuses_scores,
                       OptionalAttr<StrAttr>:$engine,
                       OptionalAttr<I64Attr>:$pair_sums);
  let results = (outs Variadic<Energy_AnyArray>:$results);
  let regions = (region AnyRegion:$predicate, SizedRegion<1>:$score,
                        SizedRegion<1>:$row_sums, SizedRegion<1>:$col_sums);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    bool hasPredicate() { return !getPredicate().empty(); }
    /// The number of row indices (batch indices, then the row).
    unsigned getNumRowIndices() { return getRows().size(); }
    /// L_r, or null when `lse` gives it.
    ::mlir::Value getLse();
    /// The values the value regions yield, and the results that sum them.
    ::mlir::ValueRange getRowValues();
    ::mlir::ValueRange getColValues();
    ::mlir::ResultRange getRowOutputs();
    /// Every column output, the pair sums (the last ones) included.
    ::mlir::ResultRange getColOutputs();
    /// The number of column values summed at the pair bias's index.
    unsigned getNumPairSums() { return getPairSums().value_or(0); }
    /// The value the score region yields.
    ::mlir::Value getScoreValue();
    /// The predicate as linear constraints on (last row index, column), or
    /// nothing when it is not a conjunction of such comparisons with
    /// constant coefficients (or reads a batch index).
    std::optional<::llvm::SmallVector<LinearConstraint>> getLinearConstraints();
    /// The operands of the bilinear form, or failure (with a reason) when
    /// the regions do not have it.
    ::mlir::FailureOr<BilinearContract> matchBilinear(std::string &reason);
    /// The operands of the quadratic form, or failure (with a reason).
    ::mlir::FailureOr<QuadraticContract> matchQuadratic(std::string &reason);
    /// The contraction whose first result is this one's given normaliser,
    /// earlier in the same block, or null.
    SoftmaxContractOp getScoresSource();
    /// Whether this contraction may read the scores and pair terms of
    /// getScoresSource() (`reuses_scores`): both bilinear, with the same
    /// domains, constraints, temperature and score operands, and each of
    /// this one's pair terms one of the other's; failure with a reason
    /// otherwise.
    ::mlir::LogicalResult checkReusableScores(std::string &reason);
    /// Whether cuDNN's fused attention computes this contraction (`engine =
    /// "cudnn"`), or with `rowSideOnly` its row side (its normaliser and
    /// row sums) alone: failure with a reason otherwise.
    ::mlir::LogicalResult checkFusedAttention(std::string &reason,
                                              bool rowSideOnly = false);
    /// The result types implied by the domains and the regions' values.
    ::llvm::SmallVector<::mlir::Type> inferResultTypes();
    static ::llvm::StringRef getDefaultDialect() { return "energy"; }
  }];
}

def Energy_BatchMatmulOp : Energy_Op<"batch_matmul", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Matrix products along a batch axis, one GEMM each";
  let description = [{
    The products `lhs[b] @ rhs[b]` for every position b of a leading batch
    axis: `lhs` is `[B, m, k]`, or `[m, k]` for the same matrix at every
    position, and likewise `rhs` `[B, k, n]` or `[k, n]`. `transposed`
    after an operand swaps its last two axes first. The result is
    `[B, m, n]`; with `summed`, the sum over b, `[m, n]`. With no batch axis
    at all the batch is one and the result `[m, n]`, summed or not: the
    rows of an unbatched tensor times a matrix, and sums over its positions,
    planned like a batch's. Per-head projections of multi-head terms (every
    head's X Wq[h]ᵀ) and the sums over heads of their adjoints, which the
    backends run as products of whole matrices rather than as one
    matrix-vector product per position.

    `lhs_rows` (default 1) is the number of row axes of `lhs` (not
    transposed): `[B, m₁, …, m_r, k]` or `[m₁, …, m_r, k]`, whose rows are
    the positions of m₁ … m_r in row-major order (the tokens of every
    sequence of a batch, times each head's matrix); the result is
    `[B, m₁, …, m_r, n]`, or `[m₁, …, m_r, n]` summed. With `lhs`
    transposed, those positions are the inner dim: `rhs` is
    `[B, m₁, …, m_r, n]` or `[m₁, …, m_r, n]` (not transposed) and the
    result `[B, k, n]`, each head's Σ over every token of the batch of
    u ⊗ v (a per-head parameter's gradient).

    `batch_axes` (default 1) is the number of batch axes: an operand with
    a batch has that many leading axes, the same dims in both operands, and
    the result has them too (none, summed over every position of them):
    the products of grouped heads `Wq[g, r]`, one GEMM per (g, r).

    The attributes `energy.packed_rhs = @cache.N` and
    `energy.packed_rhs_valid = @cache.N.valid` (set together by
    energy-plan-pack-invariant-operands, CPU) say that `rhs` is the same at
    every evaluation within one call of the runtime: a backend may keep its
    matrices packed for its GEMM tiles in the scratch tensor `@cache.N` (as
    many elements as `rhs`) under the flag `@cache.N.valid`, as for a value
    `energy.once` keeps, and pack them once a call. The result does not
    change.

    ```mlir
    %q = energy.batch_matmul %x, %Wq transposed
        : !energy.array<N, D>, !energy.array<H, Dh, D> -> !energy.array<H, N, Dh>
    %p = energy.batch_matmul %x, %Wq transposed {lhs_rows = 2 : i64}
        : !energy.array<B, N, D>, !energy.array<H, Dh, D> -> !energy.array<H, B, N, Dh>
    ```
  }];
  let arguments = (ins Energy_AnyArray:$lhs, Energy_AnyArray:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs,
                       UnitAttr:$sum_batch,
                       DefaultValuedAttr<I64Attr, "1">:$lhs_rows,
                       DefaultValuedAttr<I64Attr, "1">:$batch_axes);
  let results = (outs Energy_AnyArray:$result);
  let assemblyFormat = [{
    $lhs (`transposed` $transpose_lhs^)? `,` $rhs (`transposed` $transpose_rhs^)?
    (`summed` $sum_batch^)? attr-dict `:` type($lhs) `,` type($rhs) `->`
    type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The type of the product of `lhs` and `rhs` with these flags, or
    /// null with `reason` set when their shapes do not fit.
    static ArrayType inferType(ArrayType lhs, ArrayType rhs, bool transposeLhs,
                               bool transposeRhs, bool sumBatch,
                               std::string &reason, int64_t lhsRows = 1,
                               int64_t batchAxes = 1);
    static constexpr ::llvm::StringLiteral kPackedRhsAttr =
        "energy.packed_rhs";
    static constexpr ::llvm::StringLiteral kPackedRhsValidAttr =
        "energy.packed_rhs_valid";
    /// The scratch tensor that keeps rhs packed, or null.
    ::mlir::FlatSymbolRefAttr getPackedRhsCache() {
      return (*this)->getAttrOfType<::mlir::FlatSymbolRefAttr>(
          kPackedRhsAttr);
    }
    /// Its flag, or null.
    ::mlir::FlatSymbolRefAttr getPackedRhsFlag() {
      return (*this)->getAttrOfType<::mlir::FlatSymbolRefAttr>(
          kPackedRhsValidAttr);
    }
    void setPackedRhs(::mlir::FlatSymbolRefAttr cache,
                      ::mlir::FlatSymbolRefAttr valid) {
      (*this)->setAttr(kPackedRhsAttr, cache);
      (*this)->setAttr(kPackedRhsValidAttr, valid);
    }
    /// Whether `lhs` has a batch axis (ahead of its rows).
    bool hasLhsBatch() {
      return ::llvm::cast<ArrayType>(getLhs().getType()).getRank() ==
             getLhsRows() + 1 + getBatchAxes();
    }
    /// The number of row axes of `rhs` that the inner dim runs over: the
    /// lhs's row axes when it is transposed with several, else one.
    int64_t getRhsRows() {
      return getTransposeLhs() ? getLhsRows() : 1;
    }
    /// Whether `rhs` has a batch axis (ahead of its rows).
    bool hasRhsBatch() {
      return ::llvm::cast<ArrayType>(getRhs().getType()).getRank() ==
             getRhsRows() + 1 + getBatchAxes();
    }
  }];
}

def Energy_PrefixSumOp : Energy_Op<"prefix_sum", [Pure,
    SameOperandsAndResultType]> {
  let summary = "Running sums along the leading axis";
  let description = [{
    `result[i] = Σ_{j ≤ i} operand[j]` along the leading axis (each slice
    summed as a whole); `exclusive` leaves out j = i, `reverse` sums
    j ≥ i instead. A sum over a position bounded by another
    (`Σ_{j ≤ i} K[j]` at every i, a causal mask's normaliser) in one pass
    rather than once per bound.

    ```mlir
    %z = energy.prefix_sum %k : !energy.array<N, Y>
    %s = energy.prefix_sum %k reverse exclusive : !energy.array<N, Y>
    ```
  }];
  let arguments = (ins Energy_AnyArray:$operand, UnitAttr:$reverse,
                       UnitAttr:$exclusive);
  let results = (outs Energy_AnyArray:$result);
  let assemblyFormat = [{
    $operand (`reverse` $reverse^)? (`exclusive` $exclusive^)? attr-dict `:`
    type($operand)
  }];
  let hasVerifier = 1;
}

def Energy_OnceOp : Energy_Op<"once", [RecursiveMemoryEffects,
    RecursivelySpeculatable, OpAsmOpInterface,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A value that does not change during a run, kept between calls";
  let description = [{
    The value its body yields, which reads no state, no step and nothing a
    program stores (the keys W x of an attention over an input, a product of
    parameters and inputs in a step): it is the same at every step of a run
    and in every backward step. A backend may compute it at its first use in
    a call of the runtime and keep it in the tensor `cache` (a scratch
    tensor of its type), with the scalar tensor `valid` set to 1; later
    uses in the same call read the tensor. The runtime clears every `valid`
    flag when a call begins, so no value is kept across a change of the
    parameters or inputs. Evaluated as its body where nothing is kept (the
    interpreter).

    With `per_step`, the value is one of a dynamics step (the body reads
    states as they are at the start of the step): `cache` is a row per
    step, `[S, ...]`, and `valid` a flag per step, `[S]`; a kernel called
    with step number s < S keeps and finds it in row s. Within one call of
    the runtime every call with the same step number sees the same states
    (a backward step's kernels after the restored state of its forward
    step), so the backward step reads what its forward step computed.

    ```mlir
    %k = energy.once @cache.0 valid @cache.0.valid {
      %x = energy.read @x : !energy.array<N, D>
      %p = energy.batch_matmul %x, %Wk transposed
          : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
      energy.yield %p : !energy.array<N, D>
    } : !energy.array<N, D>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$cache, FlatSymbolRefAttr:$valid,
                       UnitAttr:$per_step);
  let results = (outs Energy_AnyArray:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    (`per_step` $per_step^)? $cache `valid` $valid $body attr-dict `:`
    type($result)
  }];
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The value the body yields.
    ::mlir::Value getBodyValue();
    static ::llvm::StringRef getDefaultDialect() { return "energy"; }
    /// The attribute of a cache tensor that names its flag, and that of the
    /// flag that names its cache (manifests carry both: the runtime keeps
    /// them out of the forward state and clears the flags).
    static constexpr ::llvm::StringLiteral kCacheFlagAttr = "cache_flag";
    static constexpr ::llvm::StringLiteral kFlagOfAttr = "flag_of";
  }];
}

#endif // ENERGY_KERNEL_OPS_TD
