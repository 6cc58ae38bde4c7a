//===- IndexProducts.cpp - Products over index domains as matrix products -===//
//
// Two contractions over an index domain that are matrix products in
// disguise:
//   - dot(T[k], v) in a body over k (and perhaps other indices I that v
//     depends on), T a whole array read at k: the element k of T v, so the
//     body reads the products T v for every position of I, computed ahead
//     of it (T v, or the rows v times Tᵀ);
//   - Σ_k c_k T[k], T read at the sum's one index: Tᵀ c, with c tabulated
//     over k.
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

/// The whole array `read` reads a row of, read at the builder's point,
/// when it is a param's: a layer's weights or memories, whose pairs with
/// the rows of data a table may hold (pairs of data rows are
/// contractions', streamed).
Value wholeArrayOf(ReadOp read, OpBuilder &builder) {
  auto model = read->getParentOfType<ModelOp>();
  auto tensor =
      dyn_cast_or_null<TensorOp>(model.lookupSymbol(read.getSource()));
  if (!tensor || tensor.getRole() != Role::param)
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
    if (!isa<ReadOp>(op) && !isMemoryEffectFree(op))
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

/// dot(T[k], v) in `domain`'s body → extract of T v (or of the rows v times
/// Tᵀ, over the indices v depends on) at (those indices, k).
bool dotsAsProducts(Domain domain) {
  Block &body = *domain.body;
  bool changed = false;
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    auto dot = dyn_cast<DotOp>(op);
    if (!dot)
      continue;
    for (unsigned side = 0; side < 2; ++side) {
      Value index;
      ReadOp row = rowAt(dot->getOperand(side), body, index);
      Value other = dot->getOperand(1 - side);
      if (!row)
        continue;
      FailureOr<SmallVector<Value>> indices = indicesOf(other, domain.op, body);
      if (failed(indices) || indices->size() > 2 ||
          llvm::is_contained(*indices, index) ||
          (!indices->empty() &&
           (!computableEverywhere(other, body) || !hasPlainDims(domain.sizes))))
        continue;
      OpBuilder builder(domain.op);
      Value matrix = wholeArrayOf(row, builder);
      if (!matrix)
        continue;
      Location loc = dot.getLoc();
      Value products;
      if (indices->empty()) {
        products = MatmulOp::create(builder, loc, matrix, other);
      } else {
        SmallVector<Attribute> sizes;
        for (Value argument : *indices)
          sizes.push_back(
              domain.sizes[cast<BlockArgument>(argument).getArgNumber()]);
        // The rows v over their indices, computed ahead of the domain.
        Value rows = [&]() -> Value {
          MLIRContext *context = dot.getContext();
          SmallVector<StringAttr> dims;
          for (Attribute size : sizes)
            dims.push_back(StringAttr::get(
                context, *cast<DimExprAttr>(size).getDimName()));
          llvm::append_range(dims, cast<ArrayType>(other.getType()).getShape());
          auto type = ArrayType::get(context, dims);
          if (Value whole = wholeTensorOf(other, *indices, type, builder))
            return whole;
          auto table = TabulateOp::create(builder, loc, type,
                                          ArrayAttr::get(context, sizes));
          Block &tableBody = table.getBody().emplaceBlock();
          IRMapping mapping;
          for (Value argument : *indices)
            mapping.map(argument, tableBody.addArgument(argument.getType(),
                                                        argument.getLoc()));
          llvm::SetVector<Operation *> slice;
          addToSlice(other, body, slice);
          OpBuilder inside = OpBuilder::atBlockEnd(&tableBody);
          cloneSlice(body, slice, inside, mapping);
          YieldOp::create(inside, loc, mapping.lookupOrDefault(other));
          moveLoopInvariantCode(
              cast<LoopLikeOpInterface>(table.getOperation()));
          return table;
        }();
        products = buildRowProduct(builder, loc, rows, matrix, false,
                                   /*transposeRhs=*/true, false);
      }
      SmallVector<Value> at(*indices);
      at.push_back(index);
      OpBuilder inside(dot);
      Value element = ExtractOp::create(
          inside, loc, dot.getType(), products,
          AffineMapAttr::get(
              AffineMap::getMultiDimIdentityMap(at.size(), dot.getContext())),
          at);
      dot.getResult().replaceAllUsesWith(element);
      dot.erase();
      changed = true;
      break;
    }
  }
  return changed;
}

/// Σ_k c_k T[k] (a sum over the one index k, c a scalar) → Tᵀ C, C the
/// table of c over k, built where the sum was.
bool weightedRowsAsProduct(ReduceOp sum) {
  if (sum.getKind() != ReduceKind::sum || sum.hasPredicate() ||
      sum.getTemperature() || sum.getSizes().size() != 1 ||
      !hasPlainDims(sum.getSizes()))
    return false;
  Block &body = sum.getBody().front();
  auto mul = sum.getBodyValue().getDefiningOp<MulOp>();
  if (!mul)
    return false;
  for (unsigned side = 0; side < 2; ++side) {
    Value index;
    ReadOp row = rowAt(mul->getOperand(side), body, index);
    Value weight = mul->getOperand(1 - side);
    if (!row || !isScalar(weight))
      continue;
    OpBuilder builder(sum);
    Value matrix = wholeArrayOf(row, builder);
    if (!matrix)
      continue;
    Location loc = sum.getLoc();
    MLIRContext *context = sum.getContext();
    SmallVector<StringAttr> weightsShape = {StringAttr::get(
        context, *cast<DimExprAttr>(sum.getSizes()[0]).getDimName())};
    auto weightsType = ArrayType::get(context, weightsShape);
    auto weights =
        TabulateOp::create(builder, loc, weightsType, sum.getSizes());
    Block &tableBody = weights.getBody().emplaceBlock();
    IRMapping mapping;
    mapping.map(body.getArgument(0),
                tableBody.addArgument(index.getType(), index.getLoc()));
    llvm::SetVector<Operation *> slice;
    addToSlice(weight, body, slice);
    OpBuilder inside = OpBuilder::atBlockEnd(&tableBody);
    cloneSlice(body, slice, inside, mapping);
    YieldOp::create(inside, loc, mapping.lookupOrDefault(weight));
    Value transposed = TransposeOp::create(builder, loc, matrix);
    Value product = MatmulOp::create(builder, loc, transposed, weights);
    if (product.getType() != sum.getType()) {
      product.getDefiningOp()->erase();
      transposed.getDefiningOp()->erase();
      weights.erase();
      return false;
    }
    sum.getResult().replaceAllUsesWith(product);
    sum.erase();
    return true;
  }
  return false;
}

} // namespace

void mlir::energy::formIndexProducts(ModelOp model) {
  SmallVector<Operation *> ops;
  model.walk<WalkOrder::PostOrder>([&](Operation *op) {
    if (domainOf(op) && !op->getParentOfType<SoftmaxContractOp>() &&
        !op->getParentOfType<LetOp>())
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    auto reduce = dyn_cast<ReduceOp>(op);
    if (!reduce || reduce.getKind() != ReduceKind::lse) {
      std::optional<Domain> domain = domainOf(op);
      while (dotsAsProducts(*domain)) {
      }
    }
    if (reduce)
      (void)weightedRowsAsProduct(reduce);
  }
  // The arrays read whole, and their transposes, out of the loops around,
  // where the loops' products can take them.
  model.walk([](LoopLikeOpInterface loop) { moveLoopInvariantCode(loop); });
}
