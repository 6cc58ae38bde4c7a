//===- IndexArithmetic.cpp - Affine index expressions ---------------------===//
//
// Affine expressions over index values evaluated by the runtime's one rule
// (IndexArithmetic.h), lowered to `arith` index ops, and index maps joined.
//
//===----------------------------------------------------------------------===//

#include "energy/IR/IndexArithmetic.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

::energy::IndexOp mlir::energy::indexOpOf(AffineExprKind kind,
                                          bool exactDivision) {
  switch (kind) {
  case AffineExprKind::Add:
    return ::energy::IndexOp::Add;
  case AffineExprKind::Mul:
    return ::energy::IndexOp::Mul;
  case AffineExprKind::FloorDiv:
    return exactDivision ? ::energy::IndexOp::Div : ::energy::IndexOp::FloorDiv;
  case AffineExprKind::CeilDiv:
    return ::energy::IndexOp::CeilDiv;
  case AffineExprKind::Mod:
  default:
    return ::energy::IndexOp::Mod;
  }
}

std::optional<int64_t> mlir::energy::evaluateAffineExpr(
    AffineExpr expr, function_ref<std::optional<int64_t>(AffineExpr)> leaf,
    bool exactDivision) {
  if (auto constant = dyn_cast<AffineConstantExpr>(expr))
    return constant.getValue();
  auto binary = dyn_cast<AffineBinaryOpExpr>(expr);
  if (!binary)
    return leaf(expr);
  std::optional<int64_t> lhs =
      evaluateAffineExpr(binary.getLHS(), leaf, exactDivision);
  std::optional<int64_t> rhs =
      evaluateAffineExpr(binary.getRHS(), leaf, exactDivision);
  int64_t result = 0;
  if (!lhs || !rhs ||
      ::energy::applyIndexOp(indexOpOf(binary.getKind(), exactDivision), *lhs,
                             *rhs, result) != ::energy::IndexFault::None)
    return std::nullopt;
  return result;
}

Value mlir::energy::materializeAffineExpr(OpBuilder &builder, Location loc,
                                          AffineExpr expr, ValueRange dims,
                                          ValueRange symbols) {
  if (auto constant = dyn_cast<AffineConstantExpr>(expr))
    return arith::ConstantIndexOp::create(builder, loc, constant.getValue());
  if (auto dim = dyn_cast<AffineDimExpr>(expr))
    return dims[dim.getPosition()];
  if (auto symbol = dyn_cast<AffineSymbolExpr>(expr))
    return symbols[symbol.getPosition()];
  auto binary = cast<AffineBinaryOpExpr>(expr);
  Value lhs =
      materializeAffineExpr(builder, loc, binary.getLHS(), dims, symbols);
  Value rhs =
      materializeAffineExpr(builder, loc, binary.getRHS(), dims, symbols);
  switch (binary.getKind()) {
  case AffineExprKind::Add:
    return arith::AddIOp::create(builder, loc, lhs, rhs);
  case AffineExprKind::Mul:
    return arith::MulIOp::create(builder, loc, lhs, rhs);
  case AffineExprKind::FloorDiv:
    return arith::FloorDivSIOp::create(builder, loc, lhs, rhs);
  case AffineExprKind::CeilDiv:
    return arith::CeilDivSIOp::create(builder, loc, lhs, rhs);
  case AffineExprKind::Mod: {
    // The modulus with the sign of the divisor (IndexArithmetic.h's
    // floorModulo, affine `mod`): a remainder of the other sign moves by
    // one divisor.
    Value remainder = arith::RemSIOp::create(builder, loc, lhs, rhs);
    Value zero = arith::ConstantIndexOp::create(builder, loc, 0);
    Value inexact = arith::CmpIOp::create(
        builder, loc, arith::CmpIPredicate::ne, remainder, zero);
    Value remainderNegative = arith::CmpIOp::create(
        builder, loc, arith::CmpIPredicate::slt, remainder, zero);
    Value divisorNegative = arith::CmpIOp::create(
        builder, loc, arith::CmpIPredicate::slt, rhs, zero);
    Value signsDiffer =
        arith::XOrIOp::create(builder, loc, remainderNegative, divisorNegative);
    Value moves = arith::AndIOp::create(builder, loc, inexact, signsDiffer);
    Value moved = arith::AddIOp::create(builder, loc, remainder, rhs);
    return arith::SelectOp::create(builder, loc, moves, moved, remainder);
  }
  default:
    llvm_unreachable("unknown affine expression kind");
  }
}

AffineMap mlir::energy::concatIndexMaps(AffineMap leading, AffineMap trailing) {
  if (leading.getNumSymbols() || trailing.getNumSymbols())
    return {};
  unsigned leadingDims = leading.getNumDims();
  SmallVector<AffineExpr> results(leading.getResults());
  for (AffineExpr result : trailing.getResults())
    results.push_back(result.shiftDims(trailing.getNumDims(), leadingDims));
  return AffineMap::get(leadingDims + trailing.getNumDims(), 0, results,
                        leading.getContext());
}
