//===- ExprBuilder.cpp - Building energy expressions ----------------------===//
//
// The sums over an index domain that derivative rules of reductions build.
//
//===----------------------------------------------------------------------===//

#include "energy/Interfaces/ExprBuilder.h"

#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::energy;

Value ExprBuilder::sumOverDomain(
    ReduceOp reduce, function_ref<Value(ExprBuilder &, Value)> buildBody) {
  Type resultType = buildBodyType(reduce, buildBody);
  auto sum = ReduceOp::create(builder, loc, resultType, ReduceKind::sum,
                              reduce.getSizes(), Value());
  IRMapping mapping;
  reduce.getPredicate().cloneInto(&sum.getPredicate(), mapping);
  reduce.getBody().cloneInto(&sum.getBody(), mapping);
  Block &body = sum.getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(yield);
  ExprBuilder inner(builder, loc);
  Value value = buildBody(inner, yield.getValues().front());
  yield->setOperands(value);
  return sum;
}

Type ExprBuilder::buildBodyType(
    ReduceOp reduce, function_ref<Value(ExprBuilder &, Value)> buildBody) {
  Block scratch;
  Value bodyValue = reduce.getBodyValue();
  Value placeholder = scratch.addArgument(bodyValue.getType(), loc);
  OpBuilder scratchBuilder(builder.getContext());
  scratchBuilder.setInsertionPointToStart(&scratch);
  ExprBuilder inner(scratchBuilder, loc);
  Type type = buildBody(inner, placeholder).getType();
  while (!scratch.empty())
    scratch.back().erase();
  return type;
}
