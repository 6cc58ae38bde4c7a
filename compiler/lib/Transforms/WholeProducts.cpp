//===- WholeProducts.cpp - Products of whole matrices in programs ---------===//
//
// A program's products of two whole matrices as GEMMs of the backend's,
// with transposed operands read as they are, and sums of such products that
// share a factor as one product.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

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

bool isMatrix(Value value) {
  auto type = dyn_cast<ArrayType>(value.getType());
  return type && type.getRank() == 2;
}

/// Moves a transpose of a matrix that only it reads into what computes that
/// matrix: (P ± Q)ᵀ = Pᵀ ± Qᵀ, (P Q)ᵀ = Qᵀ Pᵀ, a transpose of a transpose
/// folding away; so that the adjoint of a product of a matrix with its own
/// transpose (W Wᵀ) is products by W that one sum can take. Whether it
/// changed `transpose`.
bool distributeTranspose(TransposeOp transpose) {
  Operation *inner = transpose.getOperand().getDefiningOp();
  if (!inner || !isMatrix(transpose.getResult()) ||
      !inner->getResult(0).hasOneUse() ||
      inner->getBlock() != transpose->getBlock() ||
      !isa<AddOp, SubOp, MatmulOp>(inner) ||
      !llvm::all_of(inner->getOperands(), isMatrix))
    return false;
  OpBuilder builder(transpose);
  Location loc = transpose.getLoc();
  auto flip = [&](Value value) {
    return builder.createOrFold<TransposeOp>(loc, value);
  };
  Value lhs = inner->getOperand(0), rhs = inner->getOperand(1);
  Value result;
  if (isa<AddOp>(inner))
    result = AddOp::create(builder, loc, flip(lhs), flip(rhs));
  else if (isa<SubOp>(inner))
    result = SubOp::create(builder, loc, flip(lhs), flip(rhs));
  else
    result = MatmulOp::create(builder, loc, flip(rhs), flip(lhs));
  if (result.getType() != transpose.getType()) {
    result.getDefiningOp()->erase();
    return false;
  }
  transpose.getResult().replaceAllUsesWith(result);
  transpose.erase();
  inner->erase();
  return true;
}

/// The values a sum adds, through additions that only it reads.
void summands(Value value, AddOp root, SmallVectorImpl<Value> &terms) {
  auto add = value.getDefiningOp<AddOp>();
  if (add && (add == root ||
              (add->hasOneUse() && add->getBlock() == root->getBlock()))) {
    summands(add.getLhs(), root, terms);
    summands(add.getRhs(), root, terms);
    return;
  }
  terms.push_back(value);
}

/// A sum of matrix products that share their right (or left) factor as one
/// product of that factor with the sum of the others: A X + B X = (A + B) X.
/// Whether it changed `sum`.
bool combineSharedFactors(AddOp sum) {
  if (!isMatrix(sum.getResult()))
    return false;
  SmallVector<Value> terms;
  summands(sum.getResult(), sum, terms);
  for (unsigned side : {1u, 0u}) {
    llvm::MapVector<Value, SmallVector<MatmulOp>> byFactor;
    for (Value term : terms)
      if (auto product = term.getDefiningOp<MatmulOp>();
          product && product->hasOneUse() &&
          product->getBlock() == sum->getBlock() &&
          isMatrix(product.getLhs()) && isMatrix(product.getRhs()))
        byFactor[product->getOperand(side)].push_back(product);
    for (auto &[factor, products] : byFactor) {
      if (products.size() < 2)
        continue;
      OpBuilder builder(sum);
      Location loc = sum.getLoc();
      Value others;
      for (MatmulOp product : products) {
        Value other = product->getOperand(1 - side);
        others = others ? AddOp::create(builder, loc, others, other).getResult()
                        : other;
      }
      Value combined = side == 1
                           ? MatmulOp::create(builder, loc, others, factor)
                           : MatmulOp::create(builder, loc, factor, others);
      Value total = combined;
      for (Value term : terms)
        if (llvm::find(products, term.getDefiningOp<MatmulOp>()) ==
            products.end())
          total = AddOp::create(builder, loc, total, term);
      if (total.getType() != sum.getType())
        return false;
      sum.getResult().replaceAllUsesWith(total);
      // What only the old sum read goes with it.
      llvm::SetVector<Operation *> dead;
      dead.insert(sum);
      while (!dead.empty()) {
        Operation *op = dead.pop_back_val();
        SmallVector<Value> operands(op->getOperands());
        op->erase();
        for (Value operand : operands)
          if (Operation *producer = operand.getDefiningOp();
              producer && producer->use_empty() &&
              isa<AddOp, MatmulOp>(producer))
            dead.insert(producer);
      }
      return true;
    }
  }
  return false;
}

/// The program blocks: the step program's parts and the backward program's.
SmallVector<Block *> programBlocks(ModelOp model) {
  SmallVector<Block *> blocks;
  for (Operation &op : model.getBody().front())
    if (isa<UpdateProgramOp, BackwardProgramOp>(op))
      for (Region &region : op.getRegions())
        for (Block &block : region)
          blocks.push_back(&block);
  return blocks;
}

} // namespace

void mlir::energy::formWholeProducts(ModelOp model) {
  for (Block *block : programBlocks(model)) {
    bool changed = true;
    while (changed) {
      changed = false;
      for (Operation &op : llvm::make_early_inc_range(*block)) {
        if (auto transpose = dyn_cast<TransposeOp>(op))
          changed |= distributeTranspose(transpose);
        else if (auto sum = dyn_cast<AddOp>(op))
          changed |= combineSharedFactors(sum);
        if (changed)
          break;
      }
    }
    SmallVector<MatmulOp> products(block->getOps<MatmulOp>());
    for (MatmulOp product : products)
      formWholeProduct(product);
  }
}
