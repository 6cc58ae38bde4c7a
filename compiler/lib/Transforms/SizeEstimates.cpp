//===- SizeEstimates.cpp - Sizes the planner assumes for its choices ------===//
//
// Estimated dim sizes and matrix-product work, from dim defaults where the
// model declares them and a nominal size elsewhere (SizeEstimates.h).
//
//===----------------------------------------------------------------------===//

#include "SizeEstimates.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The size of the dim `name` fixed by defaults alone, if any.
std::optional<int64_t> declaredSize(ModelOp model, StringRef name,
                                    unsigned depth = 0) {
  auto dim = model.lookupSymbol<DimOp>(name);
  if (!dim || depth > 64)
    return std::nullopt;
  if (std::optional<int64_t> value = dim.getDefaultValue())
    return *value;
  DimExprAttr derived = dim.getDerivedAttr();
  if (!derived)
    return std::nullopt;
  FailureOr<int64_t> value = derived.evaluate([&](StringRef operand) {
    return declaredSize(model, operand, depth + 1);
  });
  if (failed(value) || *value < 1)
    return std::nullopt;
  return *value;
}

double axisSize(ModelOp model, ArrayType type, unsigned axis) {
  return estimatedDimSize(model, type.getShape()[axis].getValue());
}

} // namespace

double mlir::energy::estimatedDimSize(ModelOp model, StringRef name) {
  if (std::optional<int64_t> size = declaredSize(model, name))
    return double(*size);
  return kNominalDimSize;
}

double mlir::energy::estimatedIndexSize(ModelOp model, BlockArgument index) {
  Operation *owner = index.getOwner()->getParentOp();
  SmallVector<Attribute> domain;
  if (auto contract = dyn_cast<SoftmaxContractOp>(owner)) {
    llvm::append_range(domain, contract.getRows());
    domain.push_back(contract.getColsAttr());
  } else {
    for (StringRef name : {"sizes", "domain"})
      if (auto sizes = owner->getAttrOfType<ArrayAttr>(name))
        llvm::append_range(domain, sizes);
  }
  if (index.getArgNumber() >= domain.size())
    return kNominalDimSize;
  auto dim = dyn_cast<DimExprAttr>(domain[index.getArgNumber()]);
  if (std::optional<StringRef> name = dim ? dim.getDimName() : std::nullopt)
    return estimatedDimSize(model, *name);
  return kNominalDimSize;
}

double mlir::energy::estimatedElements(ModelOp model, Type type) {
  auto array = dyn_cast<ArrayType>(type);
  double elements = 1;
  if (array)
    for (unsigned axis = 0; axis < array.getRank(); ++axis)
      elements *= axisSize(model, array, axis);
  return elements;
}

double mlir::energy::estimatedProductWork(ModelOp model, Operation *op) {
  // Each element of the result is an inner product over the inner dim (and
  // over the batch too when the product sums it).
  if (auto product = dyn_cast<MatmulOp>(op)) {
    auto lhs = cast<ArrayType>(product.getLhs().getType());
    return estimatedElements(model, product.getType()) *
           axisSize(model, lhs, lhs.getRank() - 1);
  }
  auto product = dyn_cast<BatchMatmulOp>(op);
  if (!product)
    return 0;
  auto lhs = cast<ArrayType>(product.getLhs().getType());
  auto rhs = cast<ArrayType>(product.getRhs().getType());
  unsigned firstRow = product.hasLhsBatch() ? product.getBatchAxes() : 0;
  double inner = 1;
  if (product.getTransposeLhs())
    for (uint64_t row = 0; row < product.getLhsRows(); ++row)
      inner *= axisSize(model, lhs, firstRow + row);
  else
    inner = axisSize(model, lhs, lhs.getRank() - 1);
  if (product.getSumBatch())
    for (int64_t axis = 0; axis < product.getBatchAxes(); ++axis) {
      if (product.hasLhsBatch())
        inner *= axisSize(model, lhs, axis);
      else if (product.hasRhsBatch())
        inner *= axisSize(model, rhs, axis);
    }
  return estimatedElements(model, product.getType()) * inner;
}
