//===- ExprBuilder.h - Building energy expressions --------------*- C++ -*-===//
//
// Energy ops at one place with one location, as derivative rules build
// them (the table in EnergyExprOps.td and DerivativeRules.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_INTERFACES_EXPRBUILDER_H
#define ENERGY_INTERFACES_EXPRBUILDER_H

#include "energy/IR/EnergyOps.h"

#include "mlir/IR/Builders.h"

namespace mlir::energy {

/// Builds energy expressions at one place with one location.
class ExprBuilder {
public:
  ExprBuilder(OpBuilder &builder, Location loc) : builder(builder), loc(loc) {}

  Value constant(double value) {
    return ConstantOp::create(builder, loc, value);
  }
  Value add(Value lhs, Value rhs) {
    return AddOp::create(builder, loc, lhs, rhs);
  }
  Value sub(Value lhs, Value rhs) {
    return SubOp::create(builder, loc, lhs, rhs);
  }
  Value mul(Value lhs, Value rhs) {
    return MulOp::create(builder, loc, lhs, rhs);
  }
  Value div(Value lhs, Value rhs) {
    return DivOp::create(builder, loc, lhs, rhs);
  }
  Value neg(Value value) {
    return NegOp::create(builder, loc, value.getType(), value);
  }
  template <typename UnaryOp> Value unary(Value value) {
    return UnaryOp::create(builder, loc, value.getType(), value);
  }
  Value matmul(Value lhs, Value rhs) {
    return MatmulOp::create(builder, loc, lhs, rhs);
  }
  Value transpose(Value value) {
    return TransposeOp::create(builder, loc, value);
  }
  Value outer(Value lhs, Value rhs) {
    return OuterOp::create(builder, loc, lhs, rhs);
  }
  Value sumElements(Value value) {
    return ReduceElementsOp::create(builder, loc, ElementsKind::sum, value);
  }
  Value sumLast(Value value) { return SumLastOp::create(builder, loc, value); }

  /// The real value of dim `name`.
  Value dimSize(StringAttr name) {
    Value size = SizeOp::create(
        builder, loc,
        DimExprAttr::getDim(builder.getContext(), name.getValue()));
    return ToRealOp::create(builder, loc, size);
  }

  /// The number of elements of an array of `type`.
  Value elementCount(ArrayType type) {
    Value count = constant(1.0);
    for (StringAttr dim : type.getShape())
      count = mul(count, dimSize(dim));
    return count;
  }

  /// `value` of a shape that is a prefix of `type`'s, repeated along the
  /// remaining axes. Scalars are returned as they are: elementwise ops
  /// broadcast them.
  Value expandTo(Value value, Type type) {
    auto array = cast<ArrayType>(value.getType());
    if (array == type || array.isScalar())
      return value;
    return BroadcastOp::create(builder, loc, type, value);
  }

  /// `value` repeated along new trailing axes to `type`, always of `type`
  /// (a scalar becomes a constant array).
  Value broadcastTo(Value value, Type type) {
    if (value.getType() == type)
      return value;
    return BroadcastOp::create(builder, loc, type, value);
  }

  /// The mean along the last axis of `value`, repeated along that axis.
  Value meanLastExpanded(Value value) {
    auto array = cast<ArrayType>(value.getType());
    Value mean = div(sumLast(value), dimSize(array.getShape().back()));
    return expandTo(mean, array);
  }

  /// The adjoint of an operand of `type` that was broadcast into a result
  /// whose adjoint is `adjoint`: summed over the broadcast elements.
  Value unbroadcast(Value adjoint, Type type) {
    if (adjoint.getType() == type)
      return adjoint;
    return sumElements(adjoint);
  }

  /// A copy of `reduce`'s domain (and predicate) whose body is built by
  /// `buildBody` from a copy of the original body's yielded value. The
  /// result is summed.
  Value sumOverDomain(ReduceOp reduce,
                      function_ref<Value(ExprBuilder &, Value)> buildBody);

private:
  /// The type `buildBody` produces, found by building it once in a scratch
  /// block and erasing it.
  Type buildBodyType(ReduceOp reduce,
                     function_ref<Value(ExprBuilder &, Value)> buildBody);

  OpBuilder &builder;
  Location loc;
};

} // namespace mlir::energy

#endif // ENERGY_INTERFACES_EXPRBUILDER_H
