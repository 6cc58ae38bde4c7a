//===- EnergyDialect.td - The energy dialect -----------------*- tablegen -*-===//
//
// Declares the `energy` dialect: energy graphs (dims, tensors, energy terms,
// outputs, dynamics) and the index-domain expressions their terms are built of.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_DIALECT_TD
#define ENERGY_DIALECT_TD

include "mlir/IR/OpBase.td"

def Energy_Dialect : Dialect {
  let name = "energy";
  let cppNamespace = "::mlir::energy";
  let summary = "Energy graphs: tensors, energy terms over index domains, dynamics";
  let description = [{
    An `energy.model` holds the declarations of one energy graph: symbolic
    dims, tensors with a role (input, param, state), scalar consts, `let`
    comprehensions, energy terms whose sum is the global energy, outputs, and
    the dynamics that minimise the energy. Expressions inside terms are built
    from reads of tensors at affine indices, elementwise and vector math, and
    reductions (`sum`, `mean`, `max`, `lse`) over index domains with optional
    predicates. Values have the type `!energy.array<...>`, whose shape is a
    list of dim names; the element type is chosen when the model is lowered.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let extraClassDeclaration = [{
    void registerTypes();
    void registerAttributes();
  }];
}

class Energy_Op<string mnemonic, list<Trait> traits = []>
    : Op<Energy_Dialect, mnemonic, traits>;

#endif // ENERGY_DIALECT_TD
