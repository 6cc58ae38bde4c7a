//===- DerivativeOpInterface.td - Reverse-mode rules ---------*- tablegen -*-===//
//
// The interface through which every differentiable op states its reverse-mode
// derivative rule, so that gradient derivation and plugins need no op list.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_DERIVATIVE_OP_INTERFACE_TD
#define ENERGY_DERIVATIVE_OP_INTERFACE_TD

include "mlir/IR/OpBase.td"

def DerivativeOpInterface : OpInterface<"DerivativeOpInterface"> {
  let cppNamespace = "::mlir::energy";
  let description = [{
    Reverse-mode derivative rule of an op. Given the adjoint of each result
    (the derivative of a scalar objective with respect to that result, with
    the result's type), the op builds the contribution to the adjoint of each
    of its operands. Ops that reduce a region body over an index domain also
    state how the adjoint of their result reaches the value the body yields
    at one position of the domain.

    An op that does not implement this interface has no derivative rule:
    gradient derivation reports it as an error naming the op and its location.
  }];

  let methods = [
    InterfaceMethod<[{
        Whether this instance of the op has a rule. Ops whose rule depends on
        an attribute (a reduction's kind) say no for the kinds that have
        none; gradient derivation reports them before building anything.
      }],
      "bool", "hasDerivativeRule", (ins), /*methodBody=*/"",
      /*defaultImplementation=*/"return true;">,
    InterfaceMethod<[{
        Builds, at the builder's insertion point, the contribution of this op
        to the adjoint of each operand. `resultAdjoints` holds one value per
        result, of the result's type. On success `operandAdjoints` holds one
        entry per operand, of the operand's type, or a null Value where no
        derivative flows (index operands, or an operand the result does not
        depend on smoothly). The insertion point must be dominated by the
        op's operands and results. On failure the rule has emitted an error
        on the op and `operandAdjoints` is unspecified.
      }],
      "::mlir::LogicalResult", "buildAdjoints",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultAdjoints,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandAdjoints)>,
    InterfaceMethod<[{
        For an op that reduces the value yielded by its body over an index
        domain: builds the adjoint of that yielded value at one position,
        given the adjoint of the op's result. The builder is inside a copy of
        the body where `bodyValue` (the value yielded at the position) and
        `result` (the op's result, computed outside) are both visible.
        Returns a null Value for ops without such a body, and, after emitting
        an error, for reductions that have no derivative rule.
      }],
      "::mlir::Value", "buildBodyAdjoint",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Value":$resultAdjoint,
           "::mlir::Value":$result, "::mlir::Value":$bodyValue),
      /*methodBody=*/"", /*defaultImplementation=*/"return {};">,
  ];
}

#endif // ENERGY_DERIVATIVE_OP_INTERFACE_TD
