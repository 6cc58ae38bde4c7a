//===- EnergyDialect.cpp - The energy dialect -----------------------------===//
//
// Registers the ops, types and attributes of the `energy` dialect.
//
//===----------------------------------------------------------------------===//

#include "energy/IR/EnergyDialect.h"
#include "energy/IR/EnergyOps.h"

#include "mlir/Interfaces/FoldInterfaces.h"

using namespace mlir;
using namespace mlir::energy;

#include "energy/IR/EnergyDialect.cpp.inc"

namespace {
/// Constants that folding creates belong to the body that uses them (a term,
/// let, output, gradient, rule, stopping rule or update program), never to the
/// model, which holds only declarations.
struct EnergyFoldInterface : public DialectFoldInterface {
  using DialectFoldInterface::DialectFoldInterface;

  bool shouldMaterializeInto(Region *region) const final {
    return isa<TermOp, LetOp, OutputOp, GradientOp, UpdateOp, AssignOp,
               DynamicsOp, UpdateProgramOp, BackwardProgramOp>(
        region->getParentOp());
  }
};
} // namespace

void EnergyDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "energy/IR/EnergyOps.cpp.inc"
      >();
  registerTypes();
  registerAttributes();
  addInterfaces<EnergyFoldInterface>();
}

Operation *EnergyDialect::materializeConstant(OpBuilder &builder,
                                              Attribute value, Type type,
                                              Location loc) {
  auto number = dyn_cast<FloatAttr>(value);
  auto array = dyn_cast<ArrayType>(type);
  if (!number || !array || !array.isScalar())
    return nullptr;
  return ConstantOp::create(builder, loc, number.getValueAsDouble());
}
