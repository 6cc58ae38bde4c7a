//===- PlanKernels.h - The steps of energy-plan-kernels ---------*- C++ -*-===//
//
// Kernel planning turns decisions about how energy IR runs into IR: softmax
// contractions fused into one op, work that depends on one side of a
// contraction computed into tables ahead of it, and loops marked parallel.
// Each step is a function over one model, run as a pass of its own
// (PlanSteps.cpp) in the order of buildPlanStepPipeline.
// Private to compiler/lib/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_TRANSFORMS_PLANKERNELS_H
#define ENERGY_LIB_TRANSFORMS_PLANKERNELS_H

#include "energy/IR/EnergyOps.h"

namespace mlir::energy {

/// Replaces each sum of a let's elements embedded at the sum's own indices,
/// which differentiation leaves for a read of the let's slice, by the table
/// of the elements (SliceTables.cpp).
void tabulateSlices(ModelOp model);

/// Writes each sum over an index k of a vector's elements v[k] times scalars
/// and rows that do not depend on v, Σ_k v[k] a(k) r(k), as the linear map
/// Rᵀ (v ⊙ A) of v, where the map is the same at every position of a sum
/// around it that v varies with (IndexMaps.cpp).
void writeIndexMaps(ModelOp model);

/// Makes each output over a domain one without, whose body is the table of
/// the old body over the domain (OutputTables.cpp).
void tabulateOutputs(ModelOp model);

/// Replaces each plugin aggregation (a `custom` reduction, which reads every
/// value of its body at once) by a table of its body and `energy.aggregate`.
void tabulateAggregations(ModelOp model);

/// Σ_p L(u_p) = L(Σ_p u_p): takes every linear map whose other operands do
/// not depend on a sum's indices out of the sum (Linearity.h), so that the
/// sum adds the values the maps apply to; a sum of maps of up to
/// `maxTerms` varying values becomes one sum each. With `scaled`, a sum of
/// varying scalars times maps of a value sums their products, the maps
/// applied after (Linearity.h, ScaledDecomposition); with `widening`, only
/// where the maps widen the value (an outer product with it).
void factorLinearMaps(ModelOp model, unsigned maxTerms = 1, bool scaled = false,
                      bool widening = false);

/// transposeLinearMaps (Linearity.h) in every term of `model`.
void transposeLinearMaps(ModelOp model);

/// Rewrites each term a_i ⊗ Σ_j w(i, j) v_j that a loop adds into slots
/// ignoring i, where a is estimated narrower than v, as a loop over j that
/// adds (Σ_i w(i, j) a_i) ⊗ v_j (ExchangeSums.cpp): in declarations whose
/// contractions have a column pass, or in all with `withoutColumnPass`.
void exchangeSums(ModelOp model, bool withoutColumnPass = false);

/// Rewrites each loop over (J, K) that accumulates at slots only J chooses
/// as a loop over J that accumulates sums over K.
void gatherLoopSums(ModelOp model);

/// Writes dot(T[k], v) in a body over k as an element of T v (or of the
/// rows v times Tᵀ), and Σ_k c_k T[k] as Tᵀ c, T a whole array read at k:
/// matrix products the loops around can batch.
void formIndexProducts(ModelOp model);

/// Replaces every `reduce lse` and the sums over the same domain that are
/// linear in its softmax weight (the child side of an lse term) by an
/// `energy.softmax_contract`, lifted out of the loop over the rows that
/// encloses them when it can be; then sums over rows weighted by the
/// softmax of an lse computed elsewhere (the parent side, reading a let
/// that recomputes the lse) become column sums of a contraction; then
/// contractions of one block with the same domains and score merge, and
/// contractions inside loops are lifted over them.
void formSoftmaxContracts(ModelOp model);

/// Lifts each contraction computed inside a loop, per position of the
/// loop's indices, ahead of the loop: one contraction whose rows are the
/// loop's indices it uses and then its own (LiftContracts.cpp).
void liftContractsOutOfLoops(ModelOp model);

/// Merges the contractions of `block` with the same domains, predicate,
/// temperature and score into one with the sums of both, moving what the
/// later one needs above the earlier when it can. With `rowsOfBilinear`,
/// of two bilinear ones where the later's column sums need what is
/// computed from the earlier's results, the later's row sums join the
/// earlier and its column sums take the earlier's normaliser as given.
/// With `acrossRowOrders`, a contraction without column sums whose
/// normaliser and row sums an earlier one computes over the same rows in
/// another order (tables compared across layouts) reads the earlier one's.
void mergeSoftmaxContracts(Block &block, bool rowsOfBilinear = false,
                           bool acrossRowOrders = false);

/// Whether `a` and `b` weigh the same pairs alike before normalising: the
/// same domains, predicate, temperature and score (MergeContracts.cpp).
bool sameScores(SoftmaxContractOp a, SoftmaxContractOp b);

/// mergeSoftmaxContracts in every block of `model`, the deepest first.
void mergeAllSoftmaxContracts(ModelOp model, bool rowsOfBilinear = false,
                              bool acrossRowOrders = false);

/// Computes, ahead of each softmax contraction, the values of its regions
/// that depend on the row indices only or on the column (and batch) indices
/// only, into `energy.tabulate` tables (or whole-tensor reads, or matrix
/// products when the table is a matrix applied to every row of a tensor),
/// and marks contractions whose score is then a dot product of two tables
/// `bilinear`, and those of a mixture's quadratic form with moments as
/// column values `quadratic`.
void hoistContractTables(ModelOp model);

/// Calls `rewrite` on each contraction of `model` that is generic (neither
/// bilinear nor quadratic) when the walk starts, in order.
void forEachGenericContract(ModelOp model,
                            function_ref<void(SoftmaxContractOp)> rewrite);

/// hoistContractTables for one contraction.
void hoistTablesOf(SoftmaxContractOp contract);

/// `quotient` (x / s in `contract`'s score, s a scalar computed outside,
/// used once) replaced by x · (1 / s), how the bilinear form states a
/// scale, the 1 / s computed ahead of `contract` (the ops it made added to
/// `made`); the product, with `quotient` left for the caller to erase, or
/// null, changing nothing.
MulOp asReciprocalProduct(SoftmaxContractOp contract, DivOp quotient,
                          SmallVectorImpl<Operation *> *made = nullptr);

/// The terms of `contract`'s score: the operands of the sums it is, and
/// of their operands' sums, or the score alone.
SmallVector<Value> scoreTerms(SoftmaxContractOp contract);

/// Reads rows of tables over fewer batch indices than `contract`'s (a
/// token's value, the same for every head) in its regions as rows of
/// tables over all of them, when `contract` is then bilinear; otherwise
/// leaves it as it was and returns false.
bool broadcastToBilinear(SoftmaxContractOp contract);

/// Marks bilinear the contractions whose score adds an element of a tensor
/// at an index linear in the pair (a bias per relative offset), reading it
/// from a table over the batch indices and that index instead
/// (PairBiasTables.cpp), where every pair provably indexes within it and
/// the contraction is then bilinear; leaves the others as they are.
void tablePairBiases(ModelOp model);

/// tablePairBiases for `contract` (not yet bilinear or quadratic): true
/// when it is then bilinear; false, unchanged, otherwise.
bool tablePairBias(SoftmaxContractOp contract);

/// Replaces each generic contraction with row outputs only whose rows,
/// another one last, give a bilinear contraction (tables hoisted, the pair
/// bias tabulated) by that one, its outputs read back in the old order
/// (RowOrder.cpp).
void orderContractRows(ModelOp model);

/// Makes a loop that adds, at each pair of a softmax's scores, Σ exp(S − L)
/// · w over other indices into a tensor at an index linear in the pair (a
/// relative bias's gradient) a contraction given L whose column values are
/// summed at its pair bias's index, then summed over those indices, where
/// the contraction is bilinear and the CPU kernel runs it (PairSums.cpp).
void sumPairsInKernels(ModelOp model);

/// Marks `contract` bilinear or quadratic when its regions have that form
/// (reading, for the bilinear one, tables over all its batch indices where
/// a region read tables over fewer); leaves it as it is otherwise.
void markContractForm(SoftmaxContractOp contract);

/// Writes the score of `contract` as c · dot(a, b) + r + k (a and r of the
/// row indices only, b and k of the batch indices and the column only, c
/// computed outside; ScoreTerms.cpp) when it is a sum of such terms; false,
/// having changed nothing, otherwise.
bool separateScore(SoftmaxContractOp contract);

/// A copy of `op` before it, its regions moved into it, with the results
/// that the values its regions now yield give (inferResultTypes); `op`
/// stays, for the caller to replace and erase.
SoftmaxContractOp withYieldedValues(SoftmaxContractOp op);

/// Sums, for each value of `op` that is a map linear in the one operand
/// that varies with the pair (its others the output position's), that
/// operand, and applies the map to the output after the contraction;
/// marks the form again. Returns the new contraction, or `op` when it has
/// no such value (FactorContractOutputs.cpp).
SoftmaxContractOp factorPositionMaps(SoftmaxContractOp op);

/// Makes generic contractions bilinear with biases where separateScore
/// writes their scores so and their values are then bilinear (a copy is
/// rewritten, and replaces the contraction only then).
void separateScoresToBilinear(ModelOp model);

/// Writes the per-head products of multi-head terms as
/// `energy.batch_matmul`: tables of W[b] x[p] over (head b, position p),
/// and loops that add Σ_b M[b] v[b, p] into row p of a tensor.
void formBatchedProducts(ModelOp model);

/// Writes a program's products of two whole matrices (`matmul` of rank-2
/// arrays, outside every loop) as batch_matmul without a batch axis, a
/// transposed operand marked transposed instead of copied, after moving
/// transposes into the sums and products they transpose and combining
/// sums of products that share a factor (WholeProducts.cpp).
void formWholeProducts(ModelOp model);

/// Replaces `product` by the transpose of an earlier product of its block
/// whose operands are its own swapped, each transposed the other way, and
/// summed alike: B Aᵀ after A Bᵀ, Σ_b C[b]ᵀ A[b] after Σ_b A[b]ᵀ C[b]
/// ((L R)ᵀ = Rᵀ Lᵀ at every batch position, and for their sum). Not in
/// programs. Returns whether it replaced it (ShareProducts.cpp).
bool transposeOfEarlierProduct(BatchMatmulOp product);

/// Makes tables read an earlier table's row where they compute it, and a
/// product of matrices that is the transpose of an earlier one read that
/// one at swapped indices (ShareProducts.cpp).
void shareProducts(ModelOp model);

/// Adds each term of a sum that an `energy.accumulate` adds into a whole
/// tensor on its own, where some term is a product of whole matrices that
/// only the sum reads, moved right ahead of its accumulate: the kernels add
/// such a product into the tensor as they compute it
/// (AccumulateProducts.cpp).
void accumulateProductsInPlace(ModelOp model);

/// Makes a table of scalars over (i, j) that reads arrays at [j, i] and that
/// only matrix products read the table over (j, i), the products taking it
/// transposed (TableOrder.cpp).
void orderTablesAsTheirReads(ModelOp model);

/// Makes loops that add the same linear map, per position, of rows of
/// different arrays into one tensor one loop that adds the map of the rows'
/// sum (JoinLinearLoops.cpp).
void joinLinearLoops(ModelOp model);

/// Makes each value of a gradient, step or backward program that reads
/// only params, inputs and consts no program stores into (run-invariant),
/// and that the program's other work reads, an `energy.once` kept in a
/// scratch tensor and its flag; then each value that a backward step
/// computes as its forward step did, from the states at the start of the
/// step, an `energy.once` per step that both share (RunCaches.cpp).
void keepValuesBetweenCalls(ModelOp model);

/// Makes each gradient of a program that only `store (read @A + gradient)
/// into @A` reads, with nothing in between naming @A, added into @A by the
/// grad op itself (`into`), the read, the sum and the store gone
/// (AccumulateAdjoints.cpp).
void accumulateAdjointsInPlace(ModelOp model);
/// A backward step's product of a step value and a run-invariant value added
/// into an adjoint: the step values sum into a tensor of their own, which
/// the backward program's finish multiplies into the adjoint once
/// (DeferInvariantProducts.cpp).
void deferInvariantProducts(ModelOp model);
/// Products whose rhs no call of the runtime changes keep its packed
/// matrices in a scratch tensor, packed once a call
/// (PackInvariantOperands.cpp).
void packInvariantOperands(ModelOp model);

/// Drops the outputs of softmax contractions that are a matrix applied to
/// another output of the same side (the sums of f(u) and f(u M) over the
/// same weights), which then read the product of that output and M.
void factorContractOutputs(ModelOp model);

/// Reassociates the uses of a product of rows and a matrix, P = A op(M),
/// when all of them multiply it by matrices again (P M₂, Σ_b P[b]ᵀ C[b],
/// Σ_b C[b]ᵀ P[b]), so that the matrices meet first and P is not computed;
/// takes Σ_b C[b]ᵀ A[b] as the transpose of an earlier Σ_b A[b]ᵀ C[b]; and
/// a table of rows of A scaled per row times op(M) as the scaled rows of an
/// earlier A op(M).
void reassociateProducts(ModelOp model);

/// Rewrites what a gradient adds into each tensor so that products sharing
/// a factor (up to scalars) are one product of that factor and the sum of
/// their other factors: Σ c_i A_i M = (Σ c_i A_i) M, and likewise for
/// products of matrices, sums of outer products over a batch, transposes.
/// With `sums`, also sums of one linear map of rows of different arrays
/// (one sum of the map of the arrays' sum), and the products in sums of
/// whole arrays that only the sums read.
void combineProducts(ModelOp model, bool sums = false);

/// Computes each expression of elementwise arithmetic on whole arrays (of
/// rank two or more) whose intermediate values feed only it as one table of
/// its rows: one pass over memory, shared out among threads.
void fuseElementwise(ModelOp model);

/// Computes a table inside the loops that read it element by element at
/// their own positions (once, or, a few elementwise ops, in each), where
/// nothing between writes what it reads (InlineTables.cpp).
void inlineTables(ModelOp model);

/// Computes, ahead of a reduction or loop nested in another, the values of
/// its body that depend on its own indices only (and on values from outside
/// the enclosing loop), into `energy.tabulate` tables.
void hoistLoopTables(ModelOp model);
/// In a loop over several indices that no loop encloses, computes the
/// values that depend on some of them only (and do more than element-wise
/// work) once per position of those, in tables ahead of it.
void hoistRowTables(ModelOp model);

/// Replaces each sum over an index bounded by an outer index (Σ_{j ≤ i}),
/// whose summand does not depend on the outer one, by a read of a table of
/// running sums (`energy.prefix_sum`) computed ahead of the loops.
void formPrefixSums(ModelOp model);

/// Marks the loops that may run on several threads: `foreach` loops whose
/// positions along the first index write disjoint slots (interchanging the
/// indices of a loop to bring such an index first), and sums outside every
/// loop.
void markParallelLoops(ModelOp model);

/// Whether `name` is that of a let energy-gather-gradients made for the
/// parent side of lse terms: `@T.gather`, or `@T.gather_N` when that name
/// was taken.
bool isGatherLet(StringRef name);

/// Drops the lets energy-gather-gradients made for the parent side of lse
/// terms (`@T.gather`) that nothing reads once that side is a contraction.
void eraseUnreadGatherLets(ModelOp model);

/// Whether `op` runs once per evaluation of its kernel: it sits directly in
/// a term, gradient, step program or stopping rule, not in a loop.
bool isStatement(Operation *op);

} // namespace mlir::energy

#endif // ENERGY_LIB_TRANSFORMS_PLANKERNELS_H
