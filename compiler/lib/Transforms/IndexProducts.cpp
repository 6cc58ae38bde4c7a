//===- IndexProducts.cpp - Products over index domains as matrix products -===//
//
// Two contractions over an index domain that are matrix products in
// disguise:
//   - dot(T[k], v) in a body over k (and perhaps other indices I that v
//     depends on), T a whole array read at k: the element k of T v, so the
//     body reads the products T v for every position of I, computed ahead
//     of it (T v, or the rows v times Tᵀ);
//   - Σ_k c_k T[k], T read at the sum's one index: Tᵀ c, with c tabulated
//     over k; Σ_(b, k) c_bkm T[b, k] in a loop over m: Σ_b C[b]ᵀ T[b], with
//     c tabulated over (b, k, m).
// A dense associative memory's or a Hopfield module's scores against its
// memories, and its gradient's sum over them, become GEMMs once the loops
// around are planned (BatchedProducts.cpp). Pairs of rows of two arrays
// of positions (attention scores) are left to softmax contractions, which
// do not store them: only a param's rows are taken (a layer's weights or
// memories), and only outside contractions.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The body and domain of a reduction, loop or table.
struct Domain {
  Operation *op;
  ArrayAttr sizes;
  Block *body;
  bool predicated;
};

std::optional<Domain> domainOf(Operation *op) {
  if (auto reduce = dyn_cast<ReduceOp>(op);
      reduce && reduce.getKind() != ReduceKind::custom)
    return Domain{op, reduce.getSizes(), &reduce.getBody().front(),
                  reduce.hasPredicate()};
  if (auto loop = dyn_cast<ForeachOp>(op))
    return Domain{op, loop.getSizes(), &loop.getBody().front(),
                  loop.hasPredicate()};
  if (auto table = dyn_cast<TabulateOp>(op))
    return Domain{op, table.getSizes(), &table.getBody().front(), false};
  return std::nullopt;
}

/// `value` as a row of a whole array read at one index `index` of `body`
/// (identity map): the read; null otherwise.
ReadOp rowAt(Value value, Block &body, Value &index) {
  auto read = value.getDefiningOp<ReadOp>();
  if (!read || read->getBlock() != &body || read.getIndices().size() != 1 ||
      !read.getMap().isIdentity() ||
      cast<ArrayType>(read.getType()).getRank() != 1)
    return {};
  index = read.getIndices()[0];
  if (!llvm::is_contained(body.getArguments(), index))
    return {};
  return read;
}

/// The whole array `read` reads a row of, read at the builder's point.
Value wholeArrayOf(ReadOp read, OpBuilder &builder) {
  auto model = read->getParentOfType<ModelOp>();
  auto tensor =
      dyn_cast_or_null<TensorOp>(model.lookupSymbol(read.getSource()));
  if (!tensor)
    return {};
  return readWholeTensor(builder, read.getLoc(), tensor.getArrayType(),
                         read.getSourceAttr());
}

/// The indices of `body` that `value` depends on (in the body's order), or
/// failure when it depends on values of enclosing bodies' indices.
FailureOr<SmallVector<Value>> indicesOf(Value value, Operation *scope,
                                        Block &body) {
  if (isDefinedOutside(value, scope))
    return SmallVector<Value>();
  llvm::SetVector<Operation *> slice;
  addToSlice(value, body, slice);
  llvm::SmallPtrSet<Value, 4> used;
  for (Operation *op : slice) {
    bool outsideOnly = true;
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        if (llvm::is_contained(body.getArguments(), operand))
          used.insert(operand);
        else if (!isDefinedOutside(operand, scope) &&
                 operand.getParentBlock() != &body &&
                 !op->isAncestor(operand.getParentRegion()->getParentOp()))
          outsideOnly = false;
      }
    });
    if (!outsideOnly)
      return failure();
  }
  if (llvm::is_contained(body.getArguments(), value))
    used.insert(value);
  SmallVector<Value> ordered;
  for (Value argument : body.getArguments())
    if (used.contains(argument))
      ordered.push_back(argument);
  return ordered;
}

/// Whether the slice of `value` in `body` reads only at plain indices and
/// has no effects, so that it may run at every position of a domain.
bool computableEverywhere(Value value, Block &body) {
  llvm::SetVector<Operation *> slice;
  addToSlice(value, body, slice);
  for (Operation *op : slice) {
    if (!onlyReads(op))
      return false;
    bool plain = true;
    op->walk([&](Operation *nested) {
      AffineMap map;
      if (auto read = dyn_cast<ReadOp>(nested))
        map = read.getMap();
      else if (auto extract = dyn_cast<ExtractOp>(nested))
        map = extract.getMap();
      if (map && !llvm::all_of(map.getResults(), [](AffineExpr expr) {
            return isa<AffineDimExpr>(expr);
          }))
        plain = false;
    });
    if (!plain)
      return false;
  }
  return true;
}

bool indexesParam(Value index, Operation *op);
bool pairsDifferentThings(Value index, ArrayRef<Value> others, Operation *op);

/// The domains around `op` up to the statement that holds them, outermost
/// first (`statement` set to the outermost); empty when something else
/// encloses `op` before a statement (a contraction's region, a let).
SmallVector<Domain> nestOf(Operation *op, Operation *&statement) {
  SmallVector<Domain> nest;
  for (Operation *parent = op->getParentOp(); parent;
       parent = parent->getParentOp()) {
    std::optional<Domain> domain = domainOf(parent);
    if (!domain)
      return {};
    nest.insert(nest.begin(), *domain);
    if (isStatement(parent)) {
      statement = parent;
      return nest;
    }
  }
  return {};
}

/// Whether what `value` needs in `blocks` (the bodies of a nest) reads only
/// at plain indices and has no effects, so that it may run at every
/// position of the nest's domains.
bool computableEverywhere(Value value, ArrayRef<Block *> blocks) {
  for (Block *block : blocks)
    if (value.getParentBlock() == block ||
        block->findAncestorOpInBlock(*value.getParentBlock()->getParentOp()))
      if (!computableEverywhere(value, *block))
        return false;
  return true;
}

/// A dot product of a param's row at one index k of a nest of domains and
/// a vector that depends on other indices I of the nest (one or two) is an
/// entry of the table of all such products, the rows over I times the
/// param's rows transposed: one matrix product ahead of the nest. A
/// Hopfield module's scores against its memories, and the same scores its
/// gradient recomputes per token or per memory, read that table.
bool dotAsPairTable(DotOp dot) {
  Operation *statement = nullptr;
  SmallVector<Domain> nest = nestOf(dot, statement);
  if (nest.empty() || llvm::any_of(nest, [](const Domain &d) {
        return !hasPlainDims(d.sizes);
      }))
    return false;
  SmallVector<Block *> blocks;
  for (const Domain &domain : nest)
    blocks.push_back(domain.body);
  // Every index of the nest, outermost first, with its size.
  SmallVector<std::pair<Value, Attribute>> indices;
  for (const Domain &domain : nest)
    for (auto [argument, size] :
         llvm::zip(domain.body->getArguments(), domain.sizes))
      indices.push_back({argument, size});
  // The side read at the innermost index is taken as the rows the table's
  // last axis runs over (its entries then lie along the inner loop).
  auto depth = [&](Value operand) {
    llvm::SmallPtrSet<Value, 4> used;
    collectIndices(operand, statement, used);
    int deepest = -1;
    for (auto [position, entry] : llvm::enumerate(indices))
      if (used.contains(entry.first))
        deepest = position;
    return deepest;
  };
  unsigned firstSide =
      depth(dot->getOperand(0)) >= depth(dot->getOperand(1)) ? 0 : 1;
  for (unsigned attempt = 0; attempt < 2; ++attempt) {
    unsigned side = attempt == 0 ? firstSide : 1 - firstSide;
    Value weights = dot->getOperand(side), vector = dot->getOperand(1 - side);
    llvm::SmallPtrSet<Value, 4> weightIndices, vectorIndices;
    collectIndices(weights, statement, weightIndices);
    collectIndices(vector, statement, vectorIndices);
    if (weightIndices.size() != 1 || vectorIndices.empty() ||
        vectorIndices.size() > 2)
      continue;
    Value k = *weightIndices.begin();
    if (vectorIndices.contains(k) ||
        !pairsDifferentThings(
            k, SmallVector<Value>(vectorIndices.begin(), vectorIndices.end()),
            dot))
      continue;
    SmallVector<Value> rowIndices;
    SmallVector<Attribute> rowSizes;
    Attribute kSize;
    for (auto [index, size] : indices) {
      if (vectorIndices.contains(index)) {
        rowIndices.push_back(index);
        rowSizes.push_back(size);
      }
      if (index == k)
        kSize = size;
    }
    if (!kSize || rowIndices.size() != vectorIndices.size() ||
        !computableEverywhere(weights, blocks) ||
        !computableEverywhere(vector, blocks))
      continue;
    Value weightRows = arrayOver(weights, {k}, {kSize}, blocks, statement);
    if (cast<ArrayType>(weightRows.getType()).getRank() != 2)
      continue;
    Value rows = arrayOver(vector, rowIndices, rowSizes, blocks, statement);
    OpBuilder builder(statement);
    Value table = buildRowProduct(builder, dot.getLoc(), rows, weightRows,
                                  false, /*transposeRhs=*/true, false);
    SmallVector<Value> at(rowIndices);
    at.push_back(k);
    OpBuilder inside(dot);
    Value entry =
        ExtractOp::create(inside, dot.getLoc(), dot.getType(), table,
                          AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(
                              at.size(), dot.getContext())),
                          at);
    dot.getResult().replaceAllUsesWith(entry);
    dot.erase();
    return true;
  }
  return false;
}

/// Whether a param is read at `index` (a block argument) somewhere in the
/// statement around `op`: the index runs over a layer's weights or
/// memories, whose pairs with any other index a table may hold.
/// The dim an index (a block argument of a domain) ranges over, or null.
StringAttr dimOf(Value index) {
  auto argument = dyn_cast<BlockArgument>(index);
  if (!argument)
    return {};
  Operation *owner = argument.getOwner()->getParentOp();
  ArrayAttr sizes;
  if (auto reduce = dyn_cast<ReduceOp>(owner))
    sizes = reduce.getSizes();
  else if (auto loop = dyn_cast<ForeachOp>(owner))
    sizes = loop.getSizes();
  else if (auto table = dyn_cast<TabulateOp>(owner))
    sizes = table.getSizes();
  if (!sizes || argument.getArgNumber() >= sizes.size())
    return {};
  std::optional<StringRef> name =
      cast<DimExprAttr>(sizes[argument.getArgNumber()]).getDimName();
  return name ? StringAttr::get(index.getContext(), *name) : StringAttr();
}

/// Whether a table over `index` and `others` pairs different things: a
/// param's rows (weights, memories) with anything, or a dim with other
/// dims (points and clusters, tokens and memories), not positions with
/// positions of the same dim (attention's pairs, which contractions
/// stream without storing).
bool pairsDifferentThings(Value index, ArrayRef<Value> others, Operation *op) {
  if (indexesParam(index, op))
    return true;
  StringAttr dim = dimOf(index);
  return dim && llvm::all_of(others, [&](Value other) {
           StringAttr otherDim = dimOf(other);
           return otherDim && otherDim != dim;
         });
}

bool indexesParam(Value index, Operation *op) {
  Operation *statement = op;
  while (statement->getParentOp() &&
         !isa<ModelOp>(statement->getParentOp()->getParentOp()))
    statement = statement->getParentOp();
  auto model = op->getParentOfType<ModelOp>();
  bool found = false;
  statement->walk([&](ReadOp read) {
    if (!llvm::is_contained(read.getIndices(), index))
      return;
    auto tensor =
        dyn_cast_or_null<TensorOp>(model.lookupSymbol(read.getSource()));
    found |= tensor && tensor.getRole() == Role::param;
  });
  return found;
}

/// A table over the sum's index of `value` (a value of the sum's body),
/// built at `builder`'s point.
Value tableOver(OpBuilder &builder, ReduceOp sum, Value value) {
  Value table = tableOverIndex(builder, sum.getLoc(), sum.getBody().front(),
                               sum.getSizes(), value);
  moveLoopInvariantCode(cast<LoopLikeOpInterface>(table.getDefiningOp()));
  return table;
}

/// Σ_k c_k r_k (a sum over the one index k, c a scalar, r a vector that
/// depends on k alone) → Rᵀ C, R and C the tables of r and c over k (R the
/// whole array when r is a read of its row at k), built where the sum was;
/// the loops around then batch the product. Only where k, or an index c
/// depends on, runs over a param's rows: then the table of c holds pairs
/// of data and weights (a dense layer's), not pairs of data.
bool weightedRowsAsProduct(ReduceOp sum) {
  if (sum.getKind() != ReduceKind::sum || sum.hasPredicate() ||
      sum.getTemperature() || sum.getSizes().size() != 1 ||
      !hasPlainDims(sum.getSizes()))
    return false;
  Block &body = sum.getBody().front();
  Value k = body.getArgument(0);
  auto mul = sum.getBodyValue().getDefiningOp<MulOp>();
  if (!mul)
    return false;
  for (unsigned side = 0; side < 2; ++side) {
    Value row = mul->getOperand(side), weight = mul->getOperand(1 - side);
    if (!isScalar(weight) || cast<ArrayType>(row.getType()).getRank() != 1)
      continue;
    FailureOr<SmallVector<Value>> rowIndices = indicesOf(row, sum, body);
    if (failed(rowIndices) || *rowIndices != SmallVector<Value>{k} ||
        !computableEverywhere(row, body) || !computableEverywhere(weight, body))
      continue;
    // The indices of the loops around that c depends on.
    llvm::SmallPtrSet<Value, 4> outer;
    llvm::SetVector<Operation *> slice;
    addToSlice(weight, body, slice);
    for (Operation *op : slice)
      op->walk([&](Operation *nested) {
        for (Value operand : nested->getOperands())
          if (isa<BlockArgument>(operand) && operand != k &&
              isa<IndexType>(operand.getType()))
            outer.insert(operand);
      });
    SmallVector<Value> outerIndices(outer.begin(), outer.end());
    bool weights = pairsDifferentThings(k, outerIndices, sum) ||
                   llvm::any_of(outer, [&](Value index) {
                     return indexesParam(index, sum);
                   });
    if (!weights)
      continue;
    OpBuilder builder(sum);
    Value matrix;
    Value index;
    if (ReadOp read = rowAt(row, body, index))
      matrix = wholeArrayOf(read, builder);
    if (!matrix)
      matrix = tableOver(builder, sum, row);
    Value coefficients = tableOver(builder, sum, weight);
    Location loc = sum.getLoc();
    Value transposed = TransposeOp::create(builder, loc, matrix);
    Value product = MatmulOp::create(builder, loc, transposed, coefficients);
    if (product.getType() != sum.getType()) {
      for (Value made : {product, transposed, coefficients, matrix})
        if (Operation *def = made.getDefiningOp(); def && def->use_empty())
          def->erase();
      return false;
    }
    sum.getResult().replaceAllUsesWith(product);
    sum.erase();
    return true;
  }
  return false;
}

/// Σ_(b, k) c_bkm r_bk in a loop over m (c a scalar, r a vector that
/// depends on the sum's two indices alone) → row m of Σ_b C[b]ᵀ R[b], C
/// and R the tables of c over (b, k, m) and of r over (b, k), built ahead
/// of the loop: one GEMM over the positions (b, k) instead of a sum of
/// rows per m. A Hopfield term's memories' gradient, Σ over the batch and
/// the tokens per memory. Only where m, or k, runs over a param's rows (as
/// weightedRowsAsProduct).
bool weightedBatchRowsAsProduct(ReduceOp sum) {
  auto loop = dyn_cast<ForeachOp>(sum->getParentOp());
  if (sum.getKind() != ReduceKind::sum || sum.hasPredicate() ||
      sum.getTemperature() || sum.getSizes().size() != 2 ||
      !hasPlainDims(sum.getSizes()) || !loop || loop.hasPredicate() ||
      loop.getSizes().size() != 1 || !hasPlainDims(loop.getSizes()))
    return false;
  Block &body = sum.getBody().front();
  Block &loopBody = loop.getBody().front();
  Value b = body.getArgument(0), k = body.getArgument(1);
  Value m = loopBody.getArgument(0);
  SmallVector<Block *> blocks = {&loopBody, &body};
  // The summand as scalars times one vector (through products).
  SmallVector<Value> scalars;
  Value row = sum.getBodyValue();
  while (auto mul = row.getDefiningOp<MulOp>()) {
    if (mul->getBlock() != &body)
      break;
    if (isScalar(mul.getLhs()) && !isScalar(mul.getRhs())) {
      scalars.push_back(mul.getLhs());
      row = mul.getRhs();
    } else if (isScalar(mul.getRhs()) && !isScalar(mul.getLhs())) {
      scalars.push_back(mul.getRhs());
      row = mul.getLhs();
    } else {
      break;
    }
  }
  if (scalars.empty() || cast<ArrayType>(row.getType()).getRank() != 1)
    return false;
  llvm::SmallPtrSet<Value, 4> rowIndices, weightIndices;
  collectIndices(row, loop, rowIndices);
  for (Value scalar : scalars)
    collectIndices(scalar, loop, weightIndices);
  if (rowIndices.size() != 2 || !rowIndices.contains(b) ||
      !rowIndices.contains(k) || !weightIndices.contains(m) ||
      llvm::any_of(weightIndices,
                   [&](Value index) {
                     return index != b && index != k && index != m;
                   }) ||
      !computableEverywhere(row, blocks) ||
      llvm::any_of(scalars,
                   [&](Value scalar) {
                     return !computableEverywhere(scalar, blocks);
                   }) ||
      !(indexesParam(m, sum) || indexesParam(k, sum)))
    return false;
  // The weight, the product of the scalars, in the body.
  OpBuilder inside(body.getTerminator());
  Value weight = scalars.front();
  for (Value scalar : llvm::drop_begin(scalars))
    weight = MulOp::create(inside, sum.getLoc(), weight, scalar);
  SmallVector<Attribute> sizes(sum.getSizes().begin(), sum.getSizes().end());
  Value rows = arrayOver(row, {b, k}, sizes, blocks, loop);
  sizes.push_back(loop.getSizes()[0]);
  Value coefficients = arrayOver(weight, {b, k, m}, sizes, blocks, loop);
  OpBuilder builder(loop);
  Location loc = sum.getLoc();
  Value product = buildRowProduct(builder, loc, coefficients, rows,
                                  /*transposeLhs=*/true, /*transposeRhs=*/false,
                                  /*summed=*/true);
  builder.setInsertionPoint(sum);
  Value entry =
      ExtractOp::create(builder, loc, sum.getType(), product,
                        AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(
                            1, builder.getContext())),
                        ValueRange{m});
  sum.getResult().replaceAllUsesWith(entry);
  sum.erase();
  return true;
}

} // namespace

void mlir::energy::formIndexProducts(ModelOp model) {
  SmallVector<DotOp> dots;
  model.walk([&](DotOp dot) { dots.push_back(dot); });
  for (DotOp dot : dots)
    (void)dotAsPairTable(dot);
  SmallVector<ReduceOp> sums;
  model.walk<WalkOrder::PostOrder>([&](ReduceOp sum) {
    if (!sum->getParentOfType<SoftmaxContractOp>() &&
        !sum->getParentOfType<LetOp>())
      sums.push_back(sum);
  });
  for (ReduceOp sum : sums)
    (void)(weightedRowsAsProduct(sum) || weightedBatchRowsAsProduct(sum));
  // The arrays read whole, and their transposes, out of the loops around,
  // where the loops' products can take them.
  model.walk([](LoopLikeOpInterface loop) { moveLoopInvariantCode(loop); });
}
