//===- BatchedProducts.cpp - Per-head products as batches of GEMMs --------===//
//
// Multi-head terms apply one matrix per head b to every position p: a
// table of W[b] x[p] over (b, p) (the heads' projections), and loops that
// add Σ_b M[b] v[b, p] into a tensor's row p (their adjoints, summed over
// heads). Planned as they are, each position computes a matrix-vector
// product; written as `energy.batch_matmul`, each head is one product of
// whole matrices (a GEMM), X W[b]ᵀ for the table and Σ_b V[b] M[b]ᵀ for
// the loops. Likewise a sum of outer products Σ_{b,p} u[b, p] v[b, p]ᵀ
// (a parameter's adjoint summed over a batch and positions) is Σ_b U[b]ᵀ
// V[b], one summed batch_matmul of the tables of u and v, or Uᵀ V with a
// single index. A loop that adds M v[b, p] into every row of a tensor, v a
// sum of rows of arrays, adds their products with Mᵀ into the whole tensor
// (in place, with no array of the tensor's size more). A batch of products
// read only summed over the batch is the summed product (BatchSums.cpp), a
// matrix per batch element times each of its rows a batch of GEMMs, and the
// transpose of a product the product of the transposes in the other order.
//
//===----------------------------------------------------------------------===//

#include "BatchedProducts.h"
#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

using namespace mlir;
using namespace mlir::energy;

bool mlir::energy::summedBeforeMatrix(MatmulOp product, Operation *loop) {
  auto each = dyn_cast<ForeachOp>(loop);
  if (!each)
    return false;
  // The accumulate that adds the product through negations and products
  // by scalars, each its value's one use.
  Value value = product.getResult();
  AccumulateOp added;
  while (!added && value.hasOneUse()) {
    Operation *user = *value.getUsers().begin();
    auto scaled = dyn_cast<MulOp>(user);
    if (auto accumulate = dyn_cast<AccumulateOp>(user))
      added = accumulate;
    else if (isa<NegOp>(user) || (scaled && (isScalar(scaled.getLhs()) ||
                                             isScalar(scaled.getRhs()))))
      value = user->getResult(0);
    else
      return false;
  }
  if (!added)
    return false;
  llvm::SmallPtrSet<Value, 4> vectorIndices, matrixIndices;
  collectIndices(product.getRhs(), loop, vectorIndices);
  collectIndices(product.getLhs(), loop, matrixIndices);
  return llvm::any_of(each.getBody().front().getArguments(), [&](Value index) {
    return vectorIndices.contains(index) && !matrixIndices.contains(index) &&
           !llvm::is_contained(added.getIndices(), index);
  });
}

std::pair<Value, bool>
mlir::energy::matricesOver(Value matrix, ArrayRef<Value> heads,
                           ArrayRef<Attribute> sizes, ArrayRef<Block *> blocks,
                           Operation *anchor, bool transposed) {
  if (auto transpose = matrix.getDefiningOp<TransposeOp>()) {
    matrix = transpose.getOperand();
    transposed = !transposed;
  }
  return {arrayOver(matrix, heads, sizes, blocks, anchor), transposed};
}

std::pair<Value, bool> mlir::energy::matricesOver(Value matrix, Value head,
                                                  Attribute size,
                                                  ArrayRef<Block *> blocks,
                                                  Operation *anchor,
                                                  bool transposed) {
  return matricesOver(matrix, ArrayRef<Value>(head), ArrayRef<Attribute>(size),
                      blocks, anchor, transposed);
}

/// A matrix-vector product M v in `block` with M depending on `head` only
/// and v on `head` and `position`, both of them vectors/matrices of the
/// right ranks.
MatmulOp headProduct(Value value, Operation *scope, Value head,
                     Value position) {
  auto product = value.getDefiningOp<MatmulOp>();
  if (!product || cast<ArrayType>(product.getLhs().getType()).getRank() != 2 ||
      cast<ArrayType>(product.getRhs().getType()).getRank() != 1 ||
      !dependsOnlyOn(product.getLhs(), scope, {head}) ||
      !dependsOnlyOn(product.getRhs(), scope, {head, position}))
    return {};
  return product;
}

namespace {

/// A table of s · (M v), s a scalar and M from outside, as M (s v): the
/// rows' product then takes the scaled rows.
void distributeScalarOverProduct(TabulateOp table) {
  auto scaled = table.getBodyValue().getDefiningOp<MulOp>();
  if (!scaled)
    return;
  for (unsigned side = 0; side < 2; ++side) {
    Value scale = scaled->getOperand(side);
    auto product = scaled->getOperand(1 - side).getDefiningOp<MatmulOp>();
    if (!cast<ArrayType>(scale.getType()).isScalar() || !product ||
        !product->hasOneUse() || !isDefinedOutside(product.getLhs(), table) ||
        cast<ArrayType>(product.getRhs().getType()).getRank() != 1)
      continue;
    OpBuilder builder(scaled);
    Location loc = scaled.getLoc();
    Value rows = MulOp::create(builder, loc, scale, product.getRhs());
    Value result = MatmulOp::create(builder, loc, product.getLhs(), rows);
    scaled.getResult().replaceAllUsesWith(result);
    scaled.erase();
    product.erase();
    return;
  }
}

/// M (±s v[b, p]) at every position of `indices` for the rows V of v (one
/// per position) and M = `matrix` (the lhs of a matrix-vector product): V
/// times (±s M)ᵀ, one batch_matmul (without a batch axis for one index) at
/// `builder`; the scalar factors s and the sign scale the matrix, not the
/// (larger) product.
Value productOfRowArray(OpBuilder &builder, Location loc, Value rows,
                        Value matrix, const ScalarFactors &scales,
                        bool negated) {
  bool transposed = true;
  if (auto transpose = matrix.getDefiningOp<TransposeOp>()) {
    matrix = transpose.getOperand();
    transposed = false;
  }
  matrix = scales.apply(builder, loc, matrix);
  if (negated)
    matrix = NegOp::create(builder, loc, matrix);
  return buildRowProduct(builder, loc, rows, matrix, false, transposed, false);
}

/// M v[b, p] at every position of `indices` (`dims`), M from outside: the
/// rows v[b, p] times Mᵀ, one batch_matmul (without a batch axis for one
/// index), built ahead of `anchor` from the ops of `body`, v's scalar factors
/// applied to M.
Value productOfRows(MatmulOp product, ArrayRef<Value> indices,
                    ArrayRef<Attribute> dims, Block &body, Operation *anchor) {
  ScalarFactors scales;
  Value rows = arrayOver(scales.peel(product.getRhs(), anchor), indices, dims,
                         {&body}, anchor);
  OpBuilder builder(anchor);
  return productOfRowArray(builder, product.getLoc(), rows, product.getLhs(),
                           scales, /*negated=*/false);
}

/// Whether `product` is a matrix from outside `scope` times a vector.
bool isOuterMatrixProduct(MatmulOp product, Operation *scope) {
  return product && isDefinedOutside(product.getLhs(), scope) &&
         cast<ArrayType>(product.getLhs().getType()).getRank() == 2 &&
         cast<ArrayType>(product.getRhs().getType()).getRank() == 1;
}

/// tabulate (%b, %p) { M[b] v[p] } is, per head, X M[b]ᵀ with X the rows
/// v[p]: batch_matmul X, M transposed.
void batchTable(TabulateOp table) {
  ArrayAttr sizes = table.getSizes();
  if (sizes.size() > 2 || !hasPlainDims(sizes))
    return;
  Block &body = table.getBody().front();
  distributeScalarOverProduct(table);
  if (auto product = table.getBodyValue().getDefiningOp<MatmulOp>();
      isOuterMatrixProduct(product, table)) {
    SmallVector<Value> indices(body.getArguments());
    SmallVector<Attribute> dims(sizes.begin(), sizes.end());
    Value result = productOfRows(product, indices, dims, body, table);
    assert(result.getType() == table.getType() && "the rows' products");
    table.getResult().replaceAllUsesWith(result);
    table.erase();
    return;
  }
  if (sizes.size() != 2)
    return;
  Value head = body.getArgument(0), position = body.getArgument(1);
  MatmulOp product = headProduct(table.getBodyValue(), table, head, position);
  if (!product || !dependsOnlyOn(product.getRhs(), table, {position}))
    return;
  Value rows = arrayOver(product.getRhs(), position, sizes[1], {&body}, table);
  auto [matrices, transposed] =
      matricesOver(product.getLhs(), head, sizes[0], {&body}, table, true);
  std::string reason;
  ArrayType type = BatchMatmulOp::inferType(cast<ArrayType>(rows.getType()),
                                            cast<ArrayType>(matrices.getType()),
                                            false, transposed, false, reason);
  if (type != table.getType())
    return;
  OpBuilder builder(table);
  auto batch = BatchMatmulOp::create(builder, table.getLoc(), type, rows,
                                     matrices, false, transposed, false);
  table.getResult().replaceAllUsesWith(batch.getResult());
  table.erase();
}

/// A loop that adds M[b] v[b, p] into row p of a tensor for every head b:
/// b a second index of the loop, or the index of a sum in its body.
struct HeadSum {
  AccumulateOp accumulate;
  Value head, position;
  Attribute headSize, positionSize;
  /// The loop's body, and the sum's when there is one.
  SmallVector<Block *> blocks;
  MatmulOp product;
};

/// The HeadSum of `loop` with `added` the value its accumulate adds, or
/// (null `added`) the one it adds.
std::optional<HeadSum> matchHeadSum(ForeachOp loop, Value added = {}) {
  ArrayAttr sizes = loop.getSizes();
  if (loop.hasPredicate() || !hasPlainDims(sizes) || sizes.size() > 2)
    return std::nullopt;
  Block &body = loop.getBody().front();
  SmallVector<AccumulateOp> accumulates(body.getOps<AccumulateOp>());
  if (accumulates.size() != 1)
    return std::nullopt;
  HeadSum match;
  match.accumulate = accumulates.front();
  if (!added)
    added = match.accumulate.getValue();
  if (match.accumulate.getIndices().size() != 1 ||
      !match.accumulate.getMap().isIdentity() ||
      !isa<BlockArgument>(match.accumulate.getIndices()[0]) ||
      match.accumulate.getIndices()[0].getParentBlock() != &body)
    return std::nullopt;
  // Nothing else with effects: the loop only computes that value.
  WalkResult effects = body.walk([&](Operation *op) {
    return op != match.accumulate && !isMemoryEffectFree(op) &&
                   !isa<ReadOp, ReduceOp, YieldOp>(op)
               ? WalkResult::interrupt()
               : WalkResult::advance();
  });
  if (effects.wasInterrupted())
    return std::nullopt;
  match.position = match.accumulate.getIndices()[0];
  unsigned positionNumber = match.position == body.getArgument(0) ? 0 : 1;
  match.positionSize = sizes[positionNumber];
  match.blocks = {&body};
  Value summand;
  if (sizes.size() == 2) {
    match.head = body.getArgument(1 - positionNumber);
    match.headSize = sizes[1 - positionNumber];
    summand = added;
  } else if (auto sum = added.getDefiningOp<ReduceOp>();
             sum && sum.getKind() == ReduceKind::sum && !sum.hasPredicate() &&
             sum.getSizes().size() == 1 && hasPlainDims(sum.getSizes())) {
    Block &sumBody = sum.getBody().front();
    match.head = sumBody.getArgument(0);
    match.headSize = sum.getSizes()[0];
    summand = sum.getBodyValue();
    match.blocks.push_back(&sumBody);
  } else {
    return std::nullopt;
  }
  match.product = headProduct(summand, loop, match.head, match.position);
  if (!match.product)
    return std::nullopt;
  // A head sum's matrix varies with the head; one the same for every b
  // multiplies the sum over b once instead (as in summedBeforeMatrix).
  if (dependsOnlyOn(match.product.getLhs(), loop, {}))
    return std::nullopt;
  return match;
}

/// Writes `loop` as Σ_b V[b] M[b]ᵀ, V[b] the rows v[b, p], one summed
/// batch_matmul, then adds it to the tensor.
void batchAccumulation(ForeachOp loop, HeadSum match) {
  // Scalars that scale every v[b, p] scale the sum instead (the adjoints'
  // −1), rather than a table of scaled rows.
  ScalarFactors scales;
  Value rowValue = scales.peel(match.product.getRhs(), loop);
  Value rows =
      arrayOver(rowValue, {match.head, match.position},
                {match.headSize, match.positionSize}, match.blocks, loop);
  auto [matrices, transposed] =
      matricesOver(match.product.getLhs(), match.head, match.headSize,
                   match.blocks, loop, true);
  std::string reason;
  ArrayType type = BatchMatmulOp::inferType(cast<ArrayType>(rows.getType()),
                                            cast<ArrayType>(matrices.getType()),
                                            false, transposed, true, reason);
  assert(type && type.getRank() == 2 && "the matmul's shapes were verified");
  OpBuilder builder(loop);
  Location loc = loop.getLoc();
  Value total = BatchMatmulOp::create(builder, loc, type, rows, matrices, false,
                                      transposed, true);
  MLIRContext *context = loop.getContext();
  // When the rows are the whole tensor's, one element-wise addition of the
  // whole array (one GPU kernel with a thread per vector), otherwise a loop
  // that adds each row.
  auto model = loop->getParentOfType<ModelOp>();
  auto tensor = dyn_cast_or_null<TensorOp>(
      model.lookupSymbol(match.accumulate.getTensorAttr()));
  if (tensor && tensor.getArrayType() == type) {
    total = scales.apply(builder, loc, total);
    AccumulateOp::create(builder, match.accumulate.getLoc(), total,
                         match.accumulate.getTensorAttr(),
                         AffineMapAttr::get(AffineMap::get(0, 0, {}, context)),
                         ValueRange());
    loop.erase();
    return;
  }
  auto adding = ForeachOp::create(
      builder, loc, ArrayAttr::get(context, {match.positionSize}));
  Block &addingBody = adding.getBody().emplaceBlock();
  Value row =
      addingBody.addArgument(match.position.getType(), match.position.getLoc());
  OpBuilder inside = OpBuilder::atBlockEnd(&addingBody);
  auto rowType = ArrayType::get(context, type.getShape().drop_front());
  Value value = ExtractOp::create(
      inside, loc, rowType, total,
      AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(1, context)),
      ValueRange{row});
  value = scales.apply(inside, loc, value);
  AccumulateOp::create(inside, match.accumulate.getLoc(), value,
                       match.accumulate.getTensorAttr(),
                       match.accumulate.getMapAttr(), ValueRange{row});
  loop.erase();
}

/// A loop that adds M[b] v[b, p] + u into row p becomes two loops, one
/// adding each term, so that the product can be batched (the adjoints of a
/// score with a per-head bilinear part and another part). Returns the loop
/// of the product, or null when neither term is such a product.
ForeachOp splitAddedProduct(ForeachOp loop) {
  SmallVector<AccumulateOp> accumulates(
      loop.getBody().front().getOps<AccumulateOp>());
  if (accumulates.size() != 1)
    return {};
  AccumulateOp accumulate = accumulates.front();
  auto sum = accumulate.getValue().getDefiningOp<AddOp>();
  if (!sum || sum.getLhs().getType() != sum.getType() ||
      sum.getRhs().getType() != sum.getType())
    return {};
  std::optional<unsigned> productSide;
  for (unsigned side = 0; side < 2 && !productSide; ++side)
    if (matchHeadSum(loop, sum->getOperand(side)))
      productSide = side;
  if (!productSide)
    return {};
  OpBuilder builder(loop);
  IRMapping mapping;
  auto productLoop = cast<ForeachOp>(builder.clone(*loop, mapping));
  cast<AccumulateOp>(mapping.lookup(accumulate.getOperation()))
      .getValueMutable()
      .assign(mapping.lookup(sum->getOperand(*productSide)));
  accumulate.getValueMutable().assign(sum->getOperand(1 - *productSide));
  for (Operation *added :
       {sum.getOperation(), mapping.lookup(sum.getOperation())})
    if (added->use_empty())
      added->erase();
  return productLoop;
}

/// One term of a vector that is a sum of rows of arrays: ±s times the row
/// at the loop's indices of `rows`, an array from outside the loop.
struct RowTerm {
  Value rows;
  ScalarFactors scales;
  bool negated;
};

/// `value` as a sum of RowTerms of `loop` (indices `indices`), appended to
/// `terms`, or failure when it is not one.
LogicalResult collectRowTerms(Value value, ForeachOp loop,
                              ArrayRef<Value> indices, ArrayType rowsType,
                              ScalarFactors scales, bool negated,
                              SmallVectorImpl<RowTerm> &terms) {
  value = scales.peel(value, loop);
  Operation *def = value.getDefiningOp();
  auto sameType = [&](Value operand) {
    return operand.getType() == value.getType();
  };
  if (isa_and_nonnull<AddOp, SubOp>(def) && sameType(def->getOperand(0)) &&
      sameType(def->getOperand(1)))
    return success(
        succeeded(collectRowTerms(def->getOperand(0), loop, indices, rowsType,
                                  scales, negated, terms)) &&
        succeeded(collectRowTerms(def->getOperand(1), loop, indices, rowsType,
                                  scales, negated != isa<SubOp>(def), terms)));
  if (auto neg = dyn_cast_or_null<NegOp>(def))
    return collectRowTerms(neg.getOperand(), loop, indices, rowsType, scales,
                           !negated, terms);
  auto extract = dyn_cast_or_null<ExtractOp>(def);
  if (extract && extract.getMap().isIdentity() &&
      llvm::equal(extract.getIndices(), indices) &&
      isDefinedOutside(extract.getSource(), loop) &&
      extract.getSource().getType() == rowsType) {
    terms.push_back({extract.getSource(), scales, negated});
    return success();
  }
  OpBuilder builder(loop);
  if (Value whole = wholeTensorOf(value, indices, rowsType, builder)) {
    terms.push_back({whole, scales, negated});
    return success();
  }
  // A table ahead of the loop of the same rows (the parameters' adjoints
  // tabulate them too).
  for (Operation *op = loop->getPrevNode(); op; op = op->getPrevNode()) {
    auto table = dyn_cast<TabulateOp>(op);
    if (!table || table.getType() != rowsType ||
        table.getSizes() != loop.getSizes())
      continue;
    IRMapping arguments;
    arguments.map(table.getBody().front().getArguments(), indices);
    if (computeSame(table.getBodyValue(), value, arguments)) {
      terms.push_back({table, scales, negated});
      return success();
    }
  }
  return failure();
}

/// In a loop over every row (b, p) of a tensor X, `accumulate M v into
/// @X[b, p]` with M from outside the loop and v a sum of rows of arrays
/// (times scalars from outside) adds, for each term, its array's rows times
/// Mᵀ: one product a term ahead of the loop, accumulated into the whole
/// tensor, which the backends compute into X's storage (no array of X's
/// size more). Accumulates of other values stay in the loop, which goes
/// when nothing is left.
void batchRowProducts(ForeachOp loop) {
  ArrayAttr sizes = loop.getSizes();
  if (loop.hasPredicate() || !hasPlainDims(sizes) || sizes.size() > 2)
    return;
  Block &body = loop.getBody().front();
  auto model = loop->getParentOfType<ModelOp>();
  SmallVector<Value> indices(body.getArguments());
  MLIRContext *context = loop.getContext();
  for (AccumulateOp accumulate :
       llvm::make_early_inc_range(body.getOps<AccumulateOp>())) {
    auto product = accumulate.getValue().getDefiningOp<MatmulOp>();
    if (!isOuterMatrixProduct(product, loop) ||
        !accumulate.getMap().isIdentity() ||
        !llvm::equal(accumulate.getIndices(), indices))
      continue;
    auto tensor = dyn_cast_or_null<TensorOp>(
        model.lookupSymbol(accumulate.getTensorAttr()));
    auto withRowsOf = [&](Value row) {
      SmallVector<StringAttr> dims;
      for (Attribute size : sizes)
        dims.push_back(
            StringAttr::get(context, *cast<DimExprAttr>(size).getDimName()));
      llvm::append_range(dims, cast<ArrayType>(row.getType()).getShape());
      return ArrayType::get(context, dims);
    };
    SmallVector<RowTerm> terms;
    if (!tensor || tensor.getArrayType() != withRowsOf(product) ||
        failed(collectRowTerms(product.getRhs(), loop, indices,
                               withRowsOf(product.getRhs()), ScalarFactors(),
                               false, terms)))
      continue;
    OpBuilder builder(loop);
    Location loc = accumulate.getLoc();
    for (const RowTerm &term : terms) {
      Value total =
          productOfRowArray(builder, product.getLoc(), term.rows,
                            product.getLhs(), term.scales, term.negated);
      assert(total.getType() == tensor.getArrayType() && "the rows' products");
      AccumulateOp::create(
          builder, loc, total, accumulate.getTensorAttr(),
          AffineMapAttr::get(AffineMap::get(0, 0, {}, context)), ValueRange());
    }
    accumulate.erase();
  }
  WalkResult effects = body.walk([&](Operation *op) {
    return isMemoryEffectFree(op) || isa<ReadOp, ReduceOp, YieldOp>(op)
               ? WalkResult::advance()
               : WalkResult::interrupt();
  });
  if (!effects.wasInterrupted())
    loop.erase();
}

/// The domain and body of a statement that runs its body per position of
/// an index domain (a table, a loop, a reduction), and whether a predicate
/// skips positions.
struct LoopBody {
  Operation *op;
  ArrayAttr sizes;
  Block *body;
  bool predicated;
};

std::optional<LoopBody> loopBodyOf(Operation *op) {
  if (auto table = dyn_cast<TabulateOp>(op))
    return LoopBody{op, table.getSizes(), &table.getBody().front(), false};
  if (auto loop = dyn_cast<ForeachOp>(op))
    return LoopBody{op, loop.getSizes(), &loop.getBody().front(),
                    loop.hasPredicate()};
  if (auto reduce = dyn_cast<ReduceOp>(op);
      reduce && reduce.getKind() != ReduceKind::custom)
    return LoopBody{op, reduce.getSizes(), &reduce.getBody().front(),
                    reduce.hasPredicate()};
  return std::nullopt;
}

/// Computes the matrix of `product` ahead of `loop` when `body` computes it
/// from values outside the loop only, with reads and ops free of effects
/// (nothing between the loop's start and the read can change what it
/// reads: no body of a loop stores).
void hoistInvariantMatrix(MatmulOp product, Operation *loop, Block &body) {
  Value matrix = product.getLhs();
  if (isDefinedOutside(matrix, loop) || !dependsOnlyOn(matrix, loop, {}))
    return;
  llvm::SetVector<Operation *> slice;
  addToSlice(matrix, body, slice);
  if (llvm::any_of(slice, [](Operation *member) {
        return member->getNumRegions() || !onlyReads(member);
      }))
    return;
  OpBuilder builder(loop);
  IRMapping mapping;
  cloneSlice(body, slice, builder, mapping);
  product.getLhsMutable().assign(mapping.lookup(matrix));
}

/// Every matrix-vector product M v in the body of `loop`, M from outside it
/// and v depending on one or two of its indices, is one product of all the
/// rows: the rows v at every position of the indices v uses (a table, or
/// the array v reads rows of) times Mᵀ, ahead of the loop, whose body then
/// reads its row. A dense layer's forward and backward products in a loop
/// over a batch become two GEMMs. Positions a predicate skips would be
/// computed too: loops with one are left alone.
/// M[b] v[b, j] in a loop over (b, j), a matrix per position of the loop's
/// first index (a sequence's slots mu[b]) times a vector per position of
/// both (its tokens' rows): one batch of GEMMs over b, V[b] M[b]ᵀ, read at
/// (b, j). False, with the loop unchanged, for any other product.
bool batchMatrixPerIndex(MatmulOp product, LoopBody loop) {
  Block &body = *loop.body;
  if (body.getNumArguments() != 2 ||
      cast<ArrayType>(product.getLhs().getType()).getRank() != 2 ||
      cast<ArrayType>(product.getRhs().getType()).getRank() != 1)
    return false;
  Value batch = body.getArgument(0), position = body.getArgument(1);
  llvm::SmallPtrSet<Value, 4> matrixIndices, vectorIndices;
  collectIndices(product.getLhs(), loop.op, matrixIndices);
  collectIndices(product.getRhs(), loop.op, vectorIndices);
  if (matrixIndices.size() != 1 || !matrixIndices.contains(batch) ||
      vectorIndices.size() != 2 || !vectorIndices.contains(batch) ||
      !vectorIndices.contains(position))
    return false;
  llvm::SetVector<Operation *> slice;
  addToSlice(product.getLhs(), body, slice);
  addToSlice(product.getRhs(), body, slice);
  if (llvm::any_of(slice, [](Operation *member) { return !onlyReads(member); }))
    return false;
  Value matrix = product.getLhs();
  bool transposed = true;
  if (auto transpose = matrix.getDefiningOp<TransposeOp>()) {
    matrix = transpose.getOperand();
    transposed = false;
  }
  auto matrixType = cast<ArrayType>(matrix.getType());
  auto vectorType = cast<ArrayType>(product.getRhs().getType());
  MLIRContext *context = product.getContext();
  auto dimOf = [](Attribute size) {
    return *cast<DimExprAttr>(size).getDimName();
  };
  SmallVector<StringRef> rowsShape = {dimOf(loop.sizes[0]),
                                      dimOf(loop.sizes[1])};
  llvm::append_range(rowsShape,
                     llvm::map_range(vectorType.getShape(), [](StringAttr dim) {
                       return dim.getValue();
                     }));
  SmallVector<StringRef> matricesShape = {dimOf(loop.sizes[0])};
  llvm::append_range(matricesShape,
                     llvm::map_range(matrixType.getShape(), [](StringAttr dim) {
                       return dim.getValue();
                     }));
  std::string reason;
  ArrayType type = BatchMatmulOp::inferType(
      ArrayType::get(context, rowsShape),
      ArrayType::get(context, matricesShape), false, transposed, false, reason);
  if (!type)
    return false;
  Value rows = arrayOver(product.getRhs(), {batch, position},
                         {loop.sizes[0], loop.sizes[1]}, {&body}, loop.op);
  Value matrices =
      arrayOver(matrix, {batch}, {loop.sizes[0]}, {&body}, loop.op);
  OpBuilder builder(loop.op);
  Value total = BatchMatmulOp::create(builder, product.getLoc(), type, rows,
                                      matrices, false, transposed, false);
  OpBuilder inside(product);
  Value row = ExtractOp::create(
      inside, product.getLoc(), product.getType(), total,
      AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(2, context)),
      ValueRange{batch, position});
  product.replaceAllUsesWith(row);
  product.erase();
  return true;
}

void batchLoopMatvecs(LoopBody loop) {
  if (loop.predicated || !hasPlainDims(loop.sizes))
    return;
  Block &body = *loop.body;
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    auto product = dyn_cast<MatmulOp>(op);
    if (!product)
      continue;
    // A matrix the body computes from no index of the loop (a read in a
    // step program, which reads at its point and so is not hoisted by
    // itself) is computed ahead of it.
    hoistInvariantMatrix(product, loop.op, body);
    // A table of the products themselves is batchTable's (the product
    // replaces the table, with no copy of it).
    if (!isOuterMatrixProduct(product, loop.op)) {
      batchMatrixPerIndex(product, loop);
      continue;
    }
    if (isa<TabulateOp>(loop.op) &&
        cast<TabulateOp>(loop.op).getBodyValue() == product.getResult())
      continue;
    llvm::SmallPtrSet<Value, 4> used;
    collectIndices(product.getRhs(), loop.op, used);
    SmallVector<Value> indices;
    SmallVector<Attribute> dims;
    for (auto [argument, size] : llvm::zip(body.getArguments(), loop.sizes))
      if (used.contains(argument)) {
        indices.push_back(argument);
        dims.push_back(size);
      }
    if (indices.empty() || indices.size() > 2 || indices.size() != used.size())
      continue;
    if (summedBeforeMatrix(product, loop.op))
      continue;
    llvm::SetVector<Operation *> slice;
    addToSlice(product.getRhs(), body, slice);
    if (llvm::any_of(slice,
                     [](Operation *member) { return !onlyReads(member); }))
      continue;
    ScalarFactors scales;
    Value rows = arrayOver(scales.peel(product.getRhs(), loop.op), indices,
                           dims, {&body}, loop.op);
    OpBuilder builder(loop.op);
    Value total = productOfRowArray(builder, product.getLoc(), rows,
                                    product.getLhs(), scales, false);
    OpBuilder inside(product);
    Value row =
        ExtractOp::create(inside, product.getLoc(), product.getType(), total,
                          AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(
                              indices.size(), product.getContext())),
                          indices);
    product.replaceAllUsesWith(row);
    product.erase();
  }
}

} // namespace

/// Rewrites the transpose of a product only the transpose reads, (L R)ᵀ,
/// or of a scalar multiple of one, as the product Rᵀ Lᵀ (times the
/// scalar): the adjoint of a matrix read transposed is a product in the
/// other orientation, which a copy element by element would transpose.
static bool foldTransposedProduct(TransposeOp transpose) {
  Value operand = transpose.getOperand();
  MulOp scale = operand.getDefiningOp<MulOp>();
  Value factor;
  if (scale && scale->hasOneUse()) {
    bool lhsScalar = cast<ArrayType>(scale.getLhs().getType()).getRank() == 0;
    bool rhsScalar = cast<ArrayType>(scale.getRhs().getType()).getRank() == 0;
    if (lhsScalar != rhsScalar) {
      factor = lhsScalar ? scale.getLhs() : scale.getRhs();
      operand = lhsScalar ? scale.getRhs() : scale.getLhs();
    }
  }
  if (!factor)
    scale = nullptr;
  auto product = operand.getDefiningOp<BatchMatmulOp>();
  if (!product || !product->hasOneUse() || product.getLhsRows() != 1 ||
      product.getBatchAxes() != 1)
    return false;
  std::string reason;
  ArrayType type = BatchMatmulOp::inferType(
      cast<ArrayType>(product.getRhs().getType()),
      cast<ArrayType>(product.getLhs().getType()), !product.getTransposeRhs(),
      !product.getTransposeLhs(), product.getSumBatch(), reason);
  if (!type || type != transpose.getType())
    return false;
  OpBuilder builder(transpose);
  Value swapped = BatchMatmulOp::create(
      builder, product.getLoc(), type, product.getRhs(), product.getLhs(),
      !product.getTransposeRhs(), !product.getTransposeLhs(),
      product.getSumBatch(), /*lhs_rows=*/1);
  if (scale)
    swapped = MulOp::create(builder, scale.getLoc(), swapped, factor);
  transpose.replaceAllUsesWith(swapped);
  transpose.erase();
  if (scale)
    scale->erase();
  product.erase();
  return true;
}

void mlir::energy::formBatchedProducts(ModelOp model) {
  SmallVector<TabulateOp> tables;
  SmallVector<ForeachOp> loops;
  SmallVector<ReduceOp> sums;
  model.walk([&](Operation *op) {
    if (!isStatement(op))
      return;
    if (auto table = dyn_cast<TabulateOp>(op))
      tables.push_back(table);
    else if (auto loop = dyn_cast<ForeachOp>(op))
      loops.push_back(loop);
    else if (auto sum = dyn_cast<ReduceOp>(op))
      sums.push_back(sum);
  });
  for (ReduceOp sum : sums)
    if (!batchOuterSum(sum))
      batchNestedOuterSum(sum);
  // The tables of the outer products' sides too.
  tables.clear();
  model.walk([&](TabulateOp table) {
    if (isStatement(table))
      tables.push_back(table);
  });
  for (TabulateOp table : tables)
    if (!batchHeadProducts(table))
      batchTable(table);
  for (ForeachOp loop : loops) {
    if (batchPerIndexOuterSum(loop))
      continue;
    if (std::optional<HeadSum> match = matchHeadSum(loop)) {
      batchAccumulation(loop, *match);
      continue;
    }
    if (ForeachOp productLoop = splitAddedProduct(loop)) {
      batchAccumulation(productLoop, *matchHeadSum(productLoop));
      continue;
    }
    batchRowProducts(loop);
  }
  // Sums over heads of products with the rows of several indices.
  SmallVector<ReduceOp> headSums;
  model.walk([&](ReduceOp sum) { headSums.push_back(sum); });
  for (ReduceOp sum : headSums)
    (void)(batchHeadSum(sum) || batchNestedHeadSum(sum) ||
           batchHeadOuterSum(sum));
  // The heads' products in the loops, and in the tables of rows those
  // sums read.
  SmallVector<Operation *> headLoops;
  model.walk([&](Operation *op) {
    if (isStatement(op) && isa<TabulateOp, ReduceOp, ForeachOp>(op))
      headLoops.push_back(op);
  });
  for (Operation *loop : headLoops)
    batchHeadProducts(loop);
  // The scores of the tables of pairs those products read.
  SmallVector<TabulateOp> pairTables;
  model.walk([&](TabulateOp table) {
    if (isStatement(table))
      pairTables.push_back(table);
  });
  for (TabulateOp table : pairTables)
    batchPairScores(table);
  // The matrix-vector products left in loops, tables and reductions.
  SmallVector<LoopBody> bodies;
  model.walk([&](Operation *op) {
    if (isStatement(op))
      if (std::optional<LoopBody> loop = loopBodyOf(op))
        bodies.push_back(*loop);
  });
  for (LoopBody loop : bodies)
    batchLoopMatvecs(loop);
  SmallVector<BatchMatmulOp> products;
  model.walk([&](BatchMatmulOp product) { products.push_back(product); });
  for (BatchMatmulOp product : products)
    if (!sumOverBatch(product))
      sumRowsFirst(product);
  SmallVector<TransposeOp> transposes;
  model.walk([&](TransposeOp transpose) { transposes.push_back(transpose); });
  for (TransposeOp transpose : transposes)
    foldTransposedProduct(transpose);
}
