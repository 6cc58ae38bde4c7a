//===- ElementwiseOpInterface.h - What element-wise ops compute -*- C++ -*-===//
//
// The interface through which element-wise ops state what they compute, on
// doubles and on lanes (ElementwiseOpInterface.td), and the builder of lanes
// that code generation implements for them.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_INTERFACES_ELEMENTWISEOPINTERFACE_H
#define ENERGY_INTERFACES_ELEMENTWISEOPINTERFACE_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

#include <functional>

namespace mlir::energy {

/// An element-wise op's function on doubles: one of the two is set.
struct ScalarFunction {
  std::function<double(double)> unary;
  std::function<double(double, double)> binary;
};

/// What element-wise ops build their lanes with: values of the kernel's
/// element type, scalars or vectors of lanes alike. Code generation
/// implements it (its exp and log vectorise; its constants take the shape
/// of the lanes they meet).
class LaneBuilder {
public:
  virtual ~LaneBuilder();
  virtual OpBuilder &getBuilder() = 0;
  virtual Location getLoc() = 0;
  /// `value` in every lane of `like`'s shape.
  virtual Value constant(double value, Value like) = 0;
  virtual Value add(Value lhs, Value rhs) = 0;
  virtual Value sub(Value lhs, Value rhs) = 0;
  virtual Value mul(Value lhs, Value rhs) = 0;
  virtual Value div(Value lhs, Value rhs) = 0;
  virtual Value maximum(Value lhs, Value rhs) = 0;
  virtual Value exp(Value x) = 0;
  virtual Value log(Value x) = 0;
  virtual Value compare(arith::CmpFPredicate predicate, Value lhs,
                        Value rhs) = 0;
  virtual Value select(Value condition, Value whenTrue, Value whenFalse) = 0;
};

} // namespace mlir::energy

#include "energy/Interfaces/ElementwiseOpInterface.h.inc"

#endif // ENERGY_INTERFACES_ELEMENTWISEOPINTERFACE_H
