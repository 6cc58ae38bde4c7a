//===- AccumulateProducts.cpp - Products added into gradients in place ----===//
//
// A gradient that adds a sum of terms into a tensor, some of them products
// of whole matrices (a parameter's adjoint from two outer-product sums),
// adds each term on its own: the kernels add a product's result into the
// gradient's buffer as the GEMM writes it, with no array of its own, no
// pass that clears it and none that adds it. Differences, negations and
// scalar factors of a product go into its smaller operand. A loop that
// adds a whole array into a tensor row by row is that accumulate too.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "SizeEstimates.h"
#include "Slices.h"

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

/// A term of a sum: a value times a sign and scalar factors, each
/// multiplied (`false`) or divided by (`true`).
struct Term {
  Value value;
  bool negated = false;
  SmallVector<std::pair<Value, bool>> factors;
};

/// The terms of `value` through sums, differences, negations and products
/// and quotients by scalars that only it reads, of its own type, and
/// those ops, outermost first.
void collectTerms(Term term, Type type, SmallVectorImpl<Term> &terms,
                  SmallVectorImpl<Operation *> &wrappers) {
  Operation *def = term.value.getDefiningOp();
  auto ofType = [&](Value operand) { return operand.getType() == type; };
  if (!def || !def->hasOneUse() || def->getResult(0).getType() != type) {
    terms.push_back(term);
    return;
  }
  if (isa<AddOp, SubOp>(def) && ofType(def->getOperand(0)) &&
      ofType(def->getOperand(1))) {
    wrappers.push_back(def);
    Term lhs = term, rhs = term;
    lhs.value = def->getOperand(0);
    rhs.value = def->getOperand(1);
    rhs.negated ^= isa<SubOp>(def);
    collectTerms(lhs, type, terms, wrappers);
    collectTerms(rhs, type, terms, wrappers);
    return;
  }
  if (auto neg = dyn_cast<NegOp>(def)) {
    wrappers.push_back(def);
    term.value = neg.getOperand();
    term.negated = !term.negated;
    collectTerms(term, type, terms, wrappers);
    return;
  }
  if (isa<MulOp, DivOp>(def)) {
    Value lhs = def->getOperand(0), rhs = def->getOperand(1);
    bool divides = isa<DivOp>(def);
    if (ofType(lhs) && isScalar(rhs)) {
      wrappers.push_back(def);
      term.value = lhs;
      term.factors.push_back({rhs, divides});
      collectTerms(term, type, terms, wrappers);
      return;
    }
    if (!divides && isScalar(lhs) && ofType(rhs)) {
      wrappers.push_back(def);
      term.value = rhs;
      term.factors.push_back({lhs, false});
      collectTerms(term, type, terms, wrappers);
      return;
    }
  }
  terms.push_back(term);
}

/// `value` times the sign and factors of `term`, built at the builder.
Value scaled(OpBuilder &builder, Location loc, Value value, const Term &term) {
  for (auto [factor, divides] : term.factors)
    value = divides ? DivOp::create(builder, loc, value, factor).getResult()
                    : MulOp::create(builder, loc, value, factor).getResult();
  if (term.negated)
    value = NegOp::create(builder, loc, value);
  return value;
}

/// The operand of `product` of fewer (estimated) elements, if it has no
/// more than the result: scaling it costs less than scaling the result.
std::optional<unsigned> cheaperOperand(Operation *product) {
  auto model = product->getParentOfType<ModelOp>();
  auto elements = [&](Value value) {
    return estimatedElements(model, value.getType());
  };
  unsigned operand =
      elements(product->getOperand(1)) < elements(product->getOperand(0)) ? 1
                                                                          : 0;
  if (elements(product->getOperand(operand)) > elements(product->getResult(0)))
    return std::nullopt;
  return operand;
}

/// Whether `term` is a product that `accumulate` can add in place: one
/// with no sign or factor, or one with an operand to scale instead.
bool isAddedInPlace(const Term &term, AccumulateOp accumulate) {
  if (!isProductOfMatrices(term.value, accumulate))
    return false;
  return (!term.negated && term.factors.empty()) ||
         cheaperOperand(term.value.getDefiningOp());
}

/// Moves the product of `term` right ahead of `accumulate` with the term's
/// sign and factors in its cheaper operand; its operands dominate its old
/// place, which is ahead of this one.
Value scaledProduct(const Term &term, AccumulateOp accumulate) {
  Operation *product = term.value.getDefiningOp();
  product->moveBefore(accumulate);
  if (!term.negated && term.factors.empty())
    return term.value;
  unsigned operand = *cheaperOperand(product);
  OpBuilder builder(product);
  product->setOperand(operand, scaled(builder, product->getLoc(),
                                      product->getOperand(operand), term));
  return term.value;
}

void splitAccumulatedSum(AccumulateOp accumulate) {
  Value total = accumulate.getValue();
  // A product alone goes right ahead of its accumulate.
  if (isProductOfMatrices(total, accumulate)) {
    total.getDefiningOp()->moveBefore(accumulate);
    return;
  }
  SmallVector<Term> terms;
  SmallVector<Operation *> wrappers;
  Term whole;
  whole.value = total;
  collectTerms(whole, total.getType(), terms, wrappers);
  if (wrappers.empty() || llvm::none_of(terms, [&](const Term &term) {
        return isAddedInPlace(term, accumulate);
      }))
    return;
  OpBuilder builder(accumulate);
  for (const Term &term : terms) {
    Value added = isAddedInPlace(term, accumulate)
                      ? scaledProduct(term, accumulate)
                      : scaled(builder, accumulate.getLoc(), term.value, term);
    AccumulateOp::create(builder, accumulate.getLoc(), added,
                         accumulate.getTensorAttr(), accumulate.getMapAttr(),
                         ValueRange());
  }
  accumulate.erase();
  for (Operation *wrapper : wrappers)
    wrapper->erase();
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
