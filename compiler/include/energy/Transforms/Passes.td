//===- Passes.td - Passes over the energy dialect ------------*- tablegen -*-===//
//
// Declares the passes that analyse and transform energy graphs.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TRANSFORMS_PASSES_TD
#define ENERGY_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def EnergyCheckDifferentiable : Pass<"energy-check-differentiable", "::mlir::energy::ModelOp"> {
  let summary = "Reports energy terms that depend on an op with no derivative rule";
  let description = [{
    Walks every energy term of a model and reports, with its location, each
    op that produces an energy value without implementing
    `DerivativeOpInterface`, and each index-domain reduction whose kind has
    no rule (`max`). Gradient derivation runs this check first.

    ```mlir
    energy.term @e {
      %m = energy.maximum %a, %b : !energy.array<>, !energy.array<>
      // error: 'energy.maximum' op has no derivative rule; energy term @e
      // depends on it
      ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::energy::EnergyDialect"];
}

#endif // ENERGY_TRANSFORMS_PASSES_TD
