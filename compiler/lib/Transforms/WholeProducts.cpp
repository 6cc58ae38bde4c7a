//===- WholeProducts.cpp - Products of whole matrices in programs ---------===//
//
// A program's product of two whole matrices as one GEMM of the backend's,
// with transposed operands read as they are rather than copied.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The matrix that `value` transposes, or null.
Value transposedMatrix(Value value) {
  auto transpose = value.getDefiningOp<TransposeOp>();
  if (!transpose || cast<ArrayType>(transpose.getType()).getRank() != 2)
    return {};
  return transpose.getOperand();
}

/// `product` as a batch_matmul without a batch axis, or unchanged where
/// its operands are not matrices.
void formWholeProduct(MatmulOp product) {
  auto lhsType = cast<ArrayType>(product.getLhs().getType());
  auto rhsType = cast<ArrayType>(product.getRhs().getType());
  if (lhsType.getRank() != 2 || rhsType.getRank() != 2)
    return;
  Value lhs = product.getLhs(), rhs = product.getRhs();
  bool transposeLhs = false, transposeRhs = false;
  if (Value matrix = transposedMatrix(rhs)) {
    rhs = matrix;
    transposeRhs = true;
  } else if (Value matrix = transposedMatrix(lhs)) {
    lhs = matrix;
    transposeLhs = true;
  }
  std::string reason;
  ArrayType type = BatchMatmulOp::inferType(
      cast<ArrayType>(lhs.getType()), cast<ArrayType>(rhs.getType()),
      transposeLhs, transposeRhs, /*sumBatch=*/false, reason);
  if (type != product.getType())
    return;
  OpBuilder builder(product);
  auto whole = BatchMatmulOp::create(builder, product.getLoc(), type, lhs, rhs,
                                     transposeLhs, transposeRhs, false);
  product.getResult().replaceAllUsesWith(whole.getResult());
  product.erase();
}

} // namespace

void mlir::energy::formWholeProducts(ModelOp model) {
  SmallVector<MatmulOp> products;
  model.walk([&](MatmulOp product) {
    if (isa<UpdateProgramOp, BackwardProgramOp>(product->getParentOp()))
      products.push_back(product);
  });
  for (MatmulOp product : products)
    formWholeProduct(product);
}
