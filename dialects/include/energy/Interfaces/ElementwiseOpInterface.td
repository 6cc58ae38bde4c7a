//===- ElementwiseOpInterface.td - What an element-wise op computes -*- tablegen -*-===//
//
// The one statement of what an element-wise op computes, which the
// interpreter (on doubles) and code generation (on lanes of vectors) both
// read.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_ELEMENTWISE_OP_INTERFACE_TD
#define ENERGY_ELEMENTWISE_OP_INTERFACE_TD

include "mlir/IR/OpBase.td"

def ElementwiseOpInterface : OpInterface<"ElementwiseOpInterface"> {
  let description = [{
    An op whose result at each position is a function of its operands at
    that position (a scalar operand at every position). It says what that
    function is twice, in the one place: on doubles, for the reference
    interpreter (`getScalarFunction`), and on lanes, for code generation
    (`buildLanes`, through a LaneBuilder that code generation implements).
  }];
  let cppNamespace = "::mlir::energy";
  let methods = [
    InterfaceMethod<[{
        The function on doubles: `unary` for an op of one operand, `binary`
        for one of two.
      }],
      "::mlir::energy::ScalarFunction", "getScalarFunction", (ins)>,
    InterfaceMethod<[{
        The result's lanes (a scalar or a vector of lanes) from the
        operands' lanes of the same shape, built with `lanes`.
      }],
      "::mlir::Value", "buildLanes",
      (ins "::mlir::energy::LaneBuilder &":$lanes,
           "::mlir::ValueRange":$operands)>,
    InterfaceMethod<[{
        Whether `buildLanes` takes vectors of lanes; false where it calls
        the support library once per element.
      }],
      "bool", "takesVectors", (ins), [{}], [{ return true; }]>
  ];
}

#endif // ENERGY_ELEMENTWISE_OP_INTERFACE_TD
