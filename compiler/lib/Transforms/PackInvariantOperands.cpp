//===- PackInvariantOperands.cpp - Products' fixed operands packed once ---===//
//
// A GEMM copies its right operand into panels of its register tiles before
// it multiplies. Where that operand is the same at every evaluation of a
// call of the runtime (a parameter, or what is computed of parameters and
// inputs), the steps and backward steps of a run would copy the same
// panels again at every product: the product names a scratch tensor that
// keeps them, packed at the first product of a call.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "RunInvariance.h"
#include "Slices.h"

#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// A cache of packed matrices and the product that declared it.
struct PackedOperand {
  BatchMatmulOp product;
  FlatSymbolRefAttr cache, valid;
};

class OperandPacker {
public:
  explicit OperandPacker(ModelOp model) : model(model), invariance(model) {}

  void run() {
    SmallVector<BatchMatmulOp> products;
    model.walk([&](BatchMatmulOp product) { products.push_back(product); });
    for (BatchMatmulOp product : products)
      if (!product.getPackedRhsCache() && !stacksItsBatch(product) &&
          hasInvariantRhs(product))
        pack(product);
  }

private:
  /// Whether the support library runs the product as one product of the
  /// matrices stacked along the inner dim (a sum over a batch of lhs and
  /// rhs matrices, not both transposed: MatrixProduct.h), which packs the
  /// stack, not rhs's matrices one by one.
  static bool stacksItsBatch(BatchMatmulOp product) {
    return product.getSumBatch() && product.hasLhsBatch() &&
           product.hasRhsBatch() &&
           !(product.getTransposeLhs() && product.getTransposeRhs());
  }

  /// Whether rhs is computed in the product's block, or in a block around
  /// it (a value kept per step computed of a kept matrix), of what no call
  /// changes.
  bool hasInvariantRhs(BatchMatmulOp product) {
    Operation *def = product.getRhs().getDefiningOp();
    return def && def->getBlock()->findAncestorOpInBlock(*product) &&
           invariance.isInvariant(def);
  }

  /// Whether `a` and `b` compute the same (run-invariant) value: the same
  /// ops, or values kept in one scratch tensor for the call.
  static bool sameValue(Value a, Value b) {
    auto keptA = a.getDefiningOp<OnceOp>(), keptB = b.getDefiningOp<OnceOp>();
    if (keptA && keptB && !keptA.getPerStep() && !keptB.getPerStep())
      return keptA.getCacheAttr() == keptB.getCacheAttr();
    return computeSame(a, b, IRMapping());
  }

  /// Names the cache of a product that packs the same matrices the same
  /// way, or a new one.
  void pack(BatchMatmulOp product) {
    auto type = cast<ArrayType>(product.getRhs().getType());
    for (PackedOperand &earlier : packed)
      if (earlier.product.getTransposeRhs() == product.getTransposeRhs() &&
          earlier.product.getBatchAxes() == product.getBatchAxes() &&
          earlier.product.getRhsRows() == product.getRhsRows() &&
          earlier.product.getRhs().getType() == type &&
          sameValue(earlier.product.getRhs(), product.getRhs())) {
        product.setPackedRhs(earlier.cache, earlier.valid);
        return;
      }
    SmallVector<Attribute> shape;
    for (StringAttr dim : type.getShape())
      shape.push_back(FlatSymbolRefAttr::get(dim));
    auto [cache, valid] = declareKeptValue(model, shape, {}, nextCache);
    product.setPackedRhs(cache, valid);
    packed.push_back({product, cache, valid});
  }

  ModelOp model;
  RunInvariance invariance;
  SmallVector<PackedOperand> packed;
  unsigned nextCache = 0;
};

} // namespace

void mlir::energy::packInvariantOperands(ModelOp model) {
  OperandPacker(model).run();
}
