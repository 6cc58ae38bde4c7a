//===- EmitIndices.cpp - Indices and predicates in the dialect ------------===//
//
// The emitter's index variables as block arguments, index expressions as
// affine maps over them, and domain predicates as `arith` comparisons.
//
//===----------------------------------------------------------------------===//

#include "Emitter.h"

#include "energy/IR/IndexArithmetic.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::energy;
using namespace ::energy::frontend;
using namespace ::energy::frontend::detail;

Block *Emitter::bindIndices(Region &region, const IndexDomain &domain) {
  Block *block = &region.emplaceBlock();
  for (const IndexBinding &binding : domain.bindings)
    indices[&binding] =
        block->addArgument(builder.getIndexType(),
                           NameLoc::get(builder.getStringAttr(binding.name),
                                        loc(binding.nameRange.Start)));
  return block;
}

void Emitter::unbindIndices(const IndexDomain &domain) {
  for (const IndexBinding &binding : domain.bindings)
    indices.erase(&binding);
}

Value Emitter::indexValue(const IndexBinding &binding, Location where) {
  auto found = inlinedIndices.find(&binding);
  if (found == inlinedIndices.end())
    return indices.lookup(&binding);
  return materializeAffineExpr(builder, where, found->second.expr,
                               found->second.operands, {});
}

FailureOr<mlir::AffineExpr>
Emitter::affineIndex(const Expr &expr, SmallVectorImpl<Value> &operands) {
  auto dimFor = [&](Value value) {
    auto *found = llvm::find(operands, value);
    unsigned position = found - operands.begin();
    if (found == operands.end())
      operands.push_back(value);
    return getAffineDimExpr(position, &context);
  };
  if (auto *number = dyn_cast<NumberExpr>(&expr)) {
    if (number->isInteger())
      return getAffineConstantExpr(static_cast<int64_t>(number->getValue()),
                                   &context);
  } else if (auto *name = dyn_cast<NameExpr>(&expr)) {
    if (name->getSymbolKind() == SymbolKind::IndexVar) {
      auto found = inlinedIndices.find(name->getBinding());
      if (found == inlinedIndices.end())
        return dimFor(indices.lookup(name->getBinding()));
      // An output's index bound by an inlined read: the read's index.
      SmallVector<mlir::AffineExpr> dims;
      for (Value operand : found->second.operands)
        dims.push_back(dimFor(operand));
      return found->second.expr.replaceDims(dims);
    }
    if (name->getSymbolKind() == SymbolKind::Dim)
      return dimFor(SizeOp::create(
          builder, loc(expr), DimExprAttr::getDim(&context, name->getName())));
  } else if (isa<StepExpr>(&expr)) {
    return dimFor(StepOp::create(builder, loc(expr)));
  } else if (auto *unary = dyn_cast<UnaryExpr>(&expr)) {
    FailureOr<mlir::AffineExpr> operand =
        affineIndex(unary->getOperand(), operands);
    if (succeeded(operand))
      return -*operand;
    return failure();
  } else if (auto *binary = dyn_cast<BinaryExpr>(&expr)) {
    FailureOr<mlir::AffineExpr> lhs = affineIndex(binary->getLhs(), operands);
    FailureOr<mlir::AffineExpr> rhs = affineIndex(binary->getRhs(), operands);
    if (failed(lhs) || failed(rhs))
      return failure();
    bool constantFactor =
        isa<AffineConstantExpr>(*lhs) || isa<AffineConstantExpr>(*rhs);
    switch (binary->getOp()) {
    case BinaryOp::Add:
      return *lhs + *rhs;
    case BinaryOp::Sub:
      return *lhs - *rhs;
    case BinaryOp::Mul:
      if (constantFactor)
        return *lhs * *rhs;
      break;
    default:
      break;
    }
  }
  return error(expr.getLoc(),
               "an index must be affine in index variables, `step` and dims");
}

FailureOr<AffineMap> Emitter::affineIndices(ArrayRef<ExprPtr> exprs,
                                            SmallVectorImpl<Value> &operands) {
  SmallVector<mlir::AffineExpr> results;
  for (const ExprPtr &expr : exprs) {
    FailureOr<mlir::AffineExpr> result = affineIndex(*expr, operands);
    if (failed(result))
      return failure();
    results.push_back(*result);
  }
  return AffineMap::get(operands.size(), 0, results, &context);
}

Value Emitter::emitPredicate(const Expr &expr) {
  auto *binary = dyn_cast<BinaryExpr>(&expr);
  if (!binary) {
    (void)error(expr.getLoc(), "expected a comparison of indices");
    return {};
  }
  if (binary->getOp() == BinaryOp::And || binary->getOp() == BinaryOp::Or) {
    Value lhs = emitPredicate(binary->getLhs());
    Value rhs = emitPredicate(binary->getRhs());
    if (!lhs || !rhs)
      return {};
    if (binary->getOp() == BinaryOp::And)
      return arith::AndIOp::create(builder, loc(expr), lhs, rhs);
    return arith::OrIOp::create(builder, loc(expr), lhs, rhs);
  }
  static const std::pair<BinaryOp, arith::CmpIPredicate> predicates[] = {
      {BinaryOp::Eq, arith::CmpIPredicate::eq},
      {BinaryOp::Ne, arith::CmpIPredicate::ne},
      {BinaryOp::Lt, arith::CmpIPredicate::slt},
      {BinaryOp::Le, arith::CmpIPredicate::sle},
      {BinaryOp::Gt, arith::CmpIPredicate::sgt},
      {BinaryOp::Ge, arith::CmpIPredicate::sge}};
  for (auto [op, predicate] : predicates) {
    if (binary->getOp() != op)
      continue;
    SmallVector<Value> operands;
    FailureOr<mlir::AffineExpr> lhs = affineIndex(binary->getLhs(), operands);
    FailureOr<mlir::AffineExpr> rhs = affineIndex(binary->getRhs(), operands);
    if (failed(lhs) || failed(rhs))
      return {};
    Location where = loc(expr);
    Value left = materializeAffineExpr(builder, where, *lhs, operands, {});
    Value right = materializeAffineExpr(builder, where, *rhs, operands, {});
    return arith::CmpIOp::create(builder, where, predicate, left, right);
  }
  (void)error(expr.getLoc(), "expected a comparison of indices");
  return {};
}
