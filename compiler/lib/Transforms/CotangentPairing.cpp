//===- CotangentPairing.cpp - ⟨C, a comprehension⟩ as a scalar ------------===//
//
// One construction for lets and outputs: a sum over the domain whose body
// is the comprehension's, times C read at the same indices.
//
//===----------------------------------------------------------------------===//

#include "CotangentPairing.h"

#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::energy;

template <typename Comprehension>
Value mlir::energy::buildCotangentPairing(OpBuilder &builder,
                                          Comprehension comprehension,
                                          FlatSymbolRefAttr cotangent) {
  Location loc = comprehension.getLoc();
  MLIRContext *context = builder.getContext();
  OpBuilder::InsertionGuard guard(builder);
  ReduceOp sum;
  if (!comprehension.getDomain().empty()) {
    sum = ReduceOp::create(builder, loc, ArrayType::getScalar(context),
                           ReduceKind::sum, comprehension.getDomain(), Value());
    builder.setInsertionPointToEnd(&sum.getBody().emplaceBlock());
  }
  Block *inner = builder.getInsertionBlock();
  IRMapping mapping;
  Block &source = comprehension.getBody().front();
  SmallVector<Value> indices;
  for (BlockArgument argument : source.getArguments()) {
    Value index = inner->addArgument(argument.getType(), argument.getLoc());
    mapping.map(argument, index);
    indices.push_back(index);
  }
  for (Operation &op : source.without_terminator())
    builder.clone(op, mapping);
  Value element = mapping.lookupOrDefault(
      cast<YieldOp>(source.getTerminator()).getValues()[0]);
  auto map = AffineMap::getMultiDimIdentityMap(indices.size(), context);
  Value weight = ReadOp::create(builder, loc, element.getType(), cotangent,
                                AffineMapAttr::get(map), indices);
  Value product = MulOp::create(builder, loc, element, weight);
  if (!cast<ArrayType>(product.getType()).isScalar())
    product =
        ReduceElementsOp::create(builder, loc, ElementsKind::sum, product);
  if (!sum)
    return product;
  YieldOp::create(builder, loc, product);
  return sum.getResult();
}

template Value mlir::energy::buildCotangentPairing<LetOp>(OpBuilder &, LetOp,
                                                          FlatSymbolRefAttr);
template Value mlir::energy::buildCotangentPairing<OutputOp>(OpBuilder &,
                                                             OutputOp,
                                                             FlatSymbolRefAttr);
