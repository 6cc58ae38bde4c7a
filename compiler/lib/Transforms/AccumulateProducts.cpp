//===- AccumulateProducts.cpp - Products added into gradients in place ----===//
//
// A gradient that adds a sum of terms into a tensor, some of them products
// of whole matrices (a parameter's adjoint from two outer-product sums),
// adds each term on its own: the kernels add a product's result into the
// gradient's buffer as the GEMM writes it, with no array of its own, no
// pass that clears it and none that adds it. A loop that adds a whole
// array into a tensor row by row is that accumulate too.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// Whether `value` is a product of whole matrices that only `accumulate`
/// would read, in its block, of the type the accumulate adds.
bool isProductOfMatrices(Value value, AccumulateOp accumulate) {
  Operation *def = value.getDefiningOp();
  if (!def || !def->hasOneUse() || def->getBlock() != accumulate->getBlock() ||
      value.getType() != accumulate.getValue().getType())
    return false;
  if (isa<BatchMatmulOp>(def))
    return true;
  auto matmul = dyn_cast<MatmulOp>(def);
  return matmul && cast<ArrayType>(matmul.getLhs().getType()).getRank() == 2 &&
         cast<ArrayType>(matmul.getRhs().getType()).getRank() == 2;
}

/// The terms of `value` through additions that only it reads, of its own
/// type, and those additions, outermost first.
void collectTerms(Value value, Type type, SmallVectorImpl<Value> &terms,
                  SmallVectorImpl<Operation *> &additions) {
  auto add = value.getDefiningOp<AddOp>();
  if (!add || !add->hasOneUse() || add.getLhs().getType() != type ||
      add.getRhs().getType() != type) {
    terms.push_back(value);
    return;
  }
  additions.push_back(add);
  collectTerms(add.getLhs(), type, terms, additions);
  collectTerms(add.getRhs(), type, terms, additions);
}

void splitAccumulatedSum(AccumulateOp accumulate) {
  Value total = accumulate.getValue();
  // A product alone goes right ahead of its accumulate.
  if (isProductOfMatrices(total, accumulate)) {
    total.getDefiningOp()->moveBefore(accumulate);
    return;
  }
  SmallVector<Value> terms;
  SmallVector<Operation *> additions;
  collectTerms(total, total.getType(), terms, additions);
  if (additions.empty() || llvm::none_of(terms, [&](Value term) {
        return isProductOfMatrices(term, accumulate);
      }))
    return;
  OpBuilder builder(accumulate);
  for (Value term : terms) {
    // A product goes right ahead of the accumulate that adds it, where the
    // kernels add it in place; its operands dominate its old place, which
    // is ahead of this one.
    if (isProductOfMatrices(term, accumulate))
      term.getDefiningOp()->moveBefore(accumulate);
    AccumulateOp::create(builder, accumulate.getLoc(), term,
                         accumulate.getTensorAttr(), accumulate.getMapAttr(),
                         ValueRange());
  }
  accumulate.erase();
  for (Operation *add : additions)
    add->erase();
}

/// Whether `indices` are the arguments of `block`, in order, and `map`
/// reads them as they are.
bool atBlockIndices(AffineMap map, ValueRange indices, Block &block) {
  return map.isIdentity() && map.getNumDims() == block.getNumArguments() &&
         llvm::equal(indices, block.getArguments());
}

/// A loop `foreach (i...) { accumulate V[i...] into @T[i...] }` over the
/// whole leading axes of T adds V into T: it becomes the whole-tensor
/// accumulate, so that a product V is added as the GEMM writes it.
void accumulateWhole(ForeachOp loop) {
  Block &body = loop.getBody().front();
  if (loop.hasPredicate() || !llvm::hasNItems(body, 2))
    return;
  auto extract = dyn_cast<ExtractOp>(body.front());
  auto accumulate = dyn_cast<AccumulateOp>(body.back());
  if (!extract || !accumulate || accumulate.getValue() != extract.getResult() ||
      !extract->hasOneUse() ||
      !atBlockIndices(extract.getMap(), extract.getIndices(), body) ||
      !atBlockIndices(accumulate.getMap(), accumulate.getIndices(), body))
    return;
  auto tensor = SymbolTable::lookupNearestSymbolFrom<TensorOp>(
      loop, accumulate.getTensorAttr());
  Value whole = extract.getSource();
  if (!tensor || tensor.getArrayType() != whole.getType())
    return;
  // The loop runs over the tensor's leading axes, all of each.
  ArrayRef<StringAttr> axes = tensor.getArrayType().getShape();
  for (auto [position, size] : llvm::enumerate(loop.getSizes())) {
    std::optional<StringRef> dim = cast<DimExprAttr>(size).getDimName();
    if (position >= axes.size() || !dim || *dim != axes[position].getValue())
      return;
  }
  OpBuilder builder(loop);
  AccumulateOp::create(
      builder, accumulate.getLoc(), whole, accumulate.getTensorAttr(),
      AffineMapAttr::get(AffineMap::get(loop.getContext())), ValueRange());
  loop.erase();
}

} // namespace

void mlir::energy::accumulateProductsInPlace(ModelOp model) {
  SmallVector<ForeachOp> loops;
  model.walk([&](ForeachOp loop) { loops.push_back(loop); });
  for (ForeachOp loop : loops)
    accumulateWhole(loop);
  SmallVector<AccumulateOp> accumulates;
  model.walk([&](AccumulateOp accumulate) {
    if (accumulate.getIndices().empty())
      accumulates.push_back(accumulate);
  });
  for (AccumulateOp accumulate : accumulates)
    splitAccumulatedSum(accumulate);
}
