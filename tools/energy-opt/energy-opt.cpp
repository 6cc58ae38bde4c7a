//===- energy-opt.cpp - Runs energy passes over MLIR files ----------------===//
//
// The `-opt` tool of the project: parses, verifies and prints energy IR and
// runs the project's passes (and MLIR's generic ones) over it.
//
//===----------------------------------------------------------------------===//

#include "energy/IR/EnergyDialect.h"
#include "energy/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

namespace mlir::energy::test {
void registerTestPasses();
} // namespace mlir::energy::test

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  mlir::energy::registerEnergyPasses();
  mlir::energy::test::registerTestPasses();

  mlir::DialectRegistry registry;
  registry.insert<mlir::energy::EnergyDialect, mlir::arith::ArithDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Energy dialect optimizer\n", registry));
}
