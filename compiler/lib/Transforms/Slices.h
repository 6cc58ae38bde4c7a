//===- Slices.h - Copying the ops a value needs between bodies --*- C++ -*-===//
//
// Gradient gathering and kernel planning move computations between the
// bodies of loops: these helpers collect the ops of one block that a value
// needs (its slice), clone them elsewhere, and compare computations.
// Private to compiler/lib/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_TRANSFORMS_SLICES_H
#define ENERGY_LIB_TRANSFORMS_SLICES_H

#include "energy/IR/EnergyOps.h"
#include "energy/Transforms/Dependence.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::energy {

/// Adds to `slice` the op of `block` that defines `value`, after the ops of
/// `block` it needs (directly, or through ops nested in it).
void addToSlice(Value value, Block &block, llvm::SetVector<Operation *> &slice);
/// Adds to `slice` the ops of `block` that `op`, or an op nested in it, uses.
void addOperandsToSlice(Operation *op, Block &block,
                        llvm::SetVector<Operation *> &slice);
/// Clones the ops of `block` that are in `slice`, in the block's order.
void cloneSlice(Block &block, const llvm::SetVector<Operation *> &slice,
                OpBuilder &builder, IRMapping &mapping);
/// Adds to `block` one index argument per argument of `like`, mapped.
void addIndexArguments(Block &block, Block &like, IRMapping &mapping);

/// Whether `indices` are the arguments of `block` (a loop's positions), in
/// order, and `map` reads them as they are.
bool atBlockIndices(AffineMap map, ValueRange indices, Block &block);

/// `read @T` of the whole tensor T, of type `type`, at the builder's point.
Value readWholeTensor(OpBuilder &builder, Location loc, ArrayType type,
                      FlatSymbolRefAttr tensor);
/// The whole tensor that `value` reads a slice of, read ahead at the
/// builder's point, when `value` is `read @T[indices]` at exactly `indices`
/// (identity map) and T's type is `type`; null otherwise.
Value wholeTensorOf(Value value, ArrayRef<Value> indices, ArrayType type,
                    OpBuilder &builder);

/// The sizes of a loop over the axes `dims`, one plain dim each.
ArrayAttr sizesOfDims(MLIRContext *context, ArrayRef<StringAttr> dims);

/// Appends to `body` an index argument per axis of `dims`, each named after
/// its dim; returns them.
SmallVector<Value> addDimIndices(Block &body, ArrayRef<StringAttr> dims);

/// A table of rows of one array type, created at a builder's point: its
/// indices run over every axis of the type but the last (each named after
/// its dim), its body reads rows of arrays of that type at them.
class RowTable {
public:
  RowTable(OpBuilder &builder, Location loc, ArrayType type);
  TabulateOp getTable() const { return table; }
  ValueRange getIndices() const { return indices; }
  /// A builder at the end of the body.
  OpBuilder &getBodyBuilder() { return inside; }
  /// The row at the table's indices of `array`, of the table's type.
  Value rowOf(Value array, Location loc);
  /// Ends the body: `row` is the table's row at each position.
  TabulateOp finish(Value row, Location loc);

private:
  TabulateOp table;
  SmallVector<Value> indices;
  OpBuilder inside;
  ArrayType rowType;
  AffineMapAttr map;
};

/// A term of a sum: `value` added, or subtracted where `negated`.
struct SignedTerm {
  Value value;
  bool negated;
};

/// The terms of `value` through additions and subtractions (of two values
/// of one type) and negations that nothing else reads (`value` itself may
/// have no reader yet), with their signs composed with `negated`.
void collectSignedTerms(Value value, bool negated,
                        SmallVectorImpl<SignedTerm> &terms);

/// The sum of `terms` built at `builder`'s point; null for no terms.
Value buildSignedSum(OpBuilder &builder, Location loc,
                     ArrayRef<SignedTerm> terms);

/// The table over the one index of `body` (a sum's or a loop's, over
/// `sizes`) of the product of `factors`, values of the body, built at
/// `builder`'s point from the ops of the body they need.
Value tableOverIndex(OpBuilder &builder, Location loc, Block &body,
                     ArrayAttr sizes, ArrayRef<Value> factors);

/// Whether `value` is a scalar array (rank 0).
bool isScalar(Value value);

/// The row that `value` is made of through negations and products and
/// quotients by scalars (that do not depend on the row, when `linear`: then
/// `value` is a linear function of it): the `energy.extract` of a computed
/// array or the `energy.read` of a tensor that gives it, not a scalar;
/// null when `value` is not of that form.
Operation *scaledLeaf(Value value, bool linear);

/// scaledLeaf when it is the row of a computed array (an extract).
ExtractOp scaledRow(Value value, bool linear);

/// Whether `value` is a matrix (rank 2).
bool isMatrix(Value value);

/// Whether `product` is a summed product of two batches of rows,
/// Σ_b lhs[b]ᵀ rhs[b], or of two arrays of rows without a batch axis,
/// lhsᵀ rhs (false for a null product).
bool isSummedRowProduct(BatchMatmulOp product);

/// Whether `product` applies one matrix to every row of a batch of rows:
/// A op(M) with A [B, N, K] or, without a batch axis, [N, K] (not
/// transposed, not summed) and M a matrix.
bool isRowsTimesMatrix(BatchMatmulOp product);

/// lhs op(rhs) (`transposeLhs`: lhsᵀ op(rhs); `summed`: summed over the
/// batch), built at `builder`'s point as a batch_matmul, or, for two
/// matrices inside a loop (where the backends have no support call for a
/// batch_matmul), as a matmul of the transposed operands.
Value buildRowProduct(OpBuilder &builder, Location loc, Value lhs, Value rhs,
                      bool transposeLhs, bool transposeRhs, bool summed);

/// The declaration directly inside the model (a term, gradient, let or
/// program) that holds `op`.
Operation *declarationOf(Operation *op);

/// Whether `op` is in a step or backward program, where a store may come
/// between two reads of a tensor (elsewhere every read of a tensor sees the
/// same value, so that ops computing the same from the same reads agree).
bool isInProgram(Operation *op);

/// Whether `value` is available before `point`: defined in a block that
/// encloses `point`, before it.
bool availableBefore(Value value, Operation *point);

/// Whether `op`, and every op nested in it, reads only at plain indices
/// (each an index, no offset), so that it may run at every position of its
/// dims (a table fills every position of its domain, where a predicate
/// would have skipped some).
bool readsPlainly(Operation *op);

/// The ops of each of `blocks` (nested bodies, outermost first) that
/// `value` needs, each body's in its order: what arrayOver computes.
SmallVector<llvm::SetVector<Operation *>>
slicesAcross(Value value, ArrayRef<Block *> blocks);

/// The array of `value` at every position of `indices` (sizes `sizes`, plain
/// dims), computed before `anchor`: the array `value` reads a slice of when
/// it is a read or extract at exactly those indices, otherwise a table of
/// it. `blocks` are the bodies, outermost first, whose ops `value` may need.
Value arrayOver(Value value, ArrayRef<Value> indices, ArrayRef<Attribute> sizes,
                ArrayRef<Block *> blocks, Operation *anchor);

/// Whether `op` is a table whose body only reads (onlyReads): a row's vector
/// that a contraction's regions may compute again per pair.
bool isReadingTable(Operation *op);

/// Whether `op`, and every op nested in it, only reads: effect-free ops and
/// reads (which in a step program report reading the tensor), so that it
/// may run anywhere before the next store.
bool onlyReads(Operation *op);

/// Σ over the axes `axes` of `array` at positions `leading` of its first
/// axes: the rows (its last axis) summed, built at `builder`.
Value sumOfRows(OpBuilder &builder, Location loc, Value array,
                ValueRange leading, ArrayRef<StringAttr> axes);

/// Whether every size of an index domain is a plain dim.
bool hasPlainDims(ArrayAttr sizes);

/// Erases the ops of `block` whose results nothing uses and that have no
/// effects, last first.
void eraseDeadOps(Block &block);

/// Erases the ops between `since` (the block's start when null) and `op`,
/// last first: what a step built ahead of `op` and gives up.
void eraseBuiltBefore(Operation *op, Operation *since);

/// Whether `sum` is a plain sum (of plain dims, no predicate, temperature
/// or plugin aggregation).
bool isPlainSum(ReduceOp sum);

/// The inner sum of Σ_I Σ_J f(I, J): `outer` a plain sum whose body yields
/// a plain sum over other indices that nothing else reads, besides ops
/// without memory effects; null for another form.
ReduceOp nestedSumOf(ReduceOp outer);

/// Σ_I Σ_J f(I, J) (nestedSumOf) as one new sum over (I, J) built ahead of
/// it; null, building nothing, for another form.
ReduceOp flattenNestedSum(ReduceOp outer);

/// A table of scalars over two indices (i, j): one tabulate over (i, j), or
/// a tabulate over i whose value is a tabulate over j in its body. `body`
/// is the block that computes the scalar `element`.
struct ScalarTable {
  TabulateOp table;
  Value outerIndex, innerIndex;
  Attribute outerSize, innerSize;
  Value element;
  Block *body;
};

/// `table` as a table of scalars over two indices, if it is one.
std::optional<ScalarTable> scalarTableOf(TabulateOp table);

/// The rank of the array `value`.
int64_t rankOf(Value value);

/// Whether `a` computes what `b` computes (SameComputation.cpp): the same ops
/// (no regions) on corresponding operands, the values `arguments` maps (block
/// arguments, or any value to substitute) corresponding through it, the
/// operands of commutative ops in either order; an element of an array and what
/// computes it (a table's body, a read of the tensor, a head's matrix times a
/// row). With `acrossLayouts`, also elements of two arrays in other layouts
/// that hold the same values: read through tables that only rearrange what they
/// read, and rows of two per-head products of the same matrices with the
/// same rows whatever the order of the rows' axes.
bool computeSame(Value a, Value b, const IRMapping &arguments,
                 bool acrossLayouts = false);

/// Whether `value` (a value of a region of `scope`) is `other` times the
/// scalars `factors` (each from outside `scope`), through negations and
/// products by such scalars, of the value or of the array a row of it is
/// read from, and through the tables it reads a row of (the row computed
/// again at the read's indices). What that computes again is built at
/// `builder` and appended to `built`, for the caller to erase.
bool isScaledCopy(Value value, Value other, Operation *scope,
                  SmallVectorImpl<Value> &factors, OpBuilder &builder,
                  SmallVectorImpl<Operation *> &built, unsigned depth = 0);

/// The dims that count positions: the leading axes (all but the last) of
/// the inputs and states `model` declares, not of params nor of the
/// adjoints the compiler adds (tokens, batch elements, points).
llvm::StringSet<> positionDims(ModelOp model);

} // namespace mlir::energy

#endif // ENERGY_LIB_TRANSFORMS_SLICES_H
