//===- energy-opt.cpp - Runs energy passes over MLIR files ----------------===//
//
// The `-opt` tool of the project: parses, verifies and prints energy IR and
// runs the project's passes (and MLIR's generic ones) over it.
//
//===----------------------------------------------------------------------===//

#include "energy/Codegen/Passes.h"
#include "energy/Codegen/Pipelines.h"
#include "energy/Dynamics/OptimizerRegistry.h"
#include "energy/IR/EnergyDialect.h"
#include "energy/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

namespace mlir::energy::test {
void registerTestPasses();
} // namespace mlir::energy::test

int main(int argc, char **argv) {
  // `--plugin PATH` (repeatable) and ENERGY_PLUGINS load plugins first; the
  // rest of the command line is MlirOptMain's.
  std::vector<std::string> plugins;
  std::vector<char *> arguments = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef argument = argv[i];
    if ((argument == "--plugin" || argument == "-plugin") && i + 1 < argc)
      plugins.push_back(argv[++i]);
    else if (argument.consume_front("--plugin="))
      plugins.push_back(argument.str());
    else
      arguments.push_back(argv[i]);
  }
  if (llvm::Error error = mlir::energy::loadPlugins(plugins)) {
    llvm::errs() << "energy-opt: error: " << llvm::toString(std::move(error))
                 << "\n";
    return 1;
  }
  argc = static_cast<int>(arguments.size());
  argv = arguments.data();
  mlir::registerTransformsPasses();
  mlir::energy::registerKernelLoweringConversions();
  mlir::energy::registerEnergyPasses();
  mlir::energy::registerEnergyCodegenPasses();
  mlir::energy::test::registerTestPasses();

  mlir::DialectRegistry registry;
  // The dialects of the plan and of what code generation lowers it to.
  registry.insert<mlir::energy::EnergyDialect, mlir::arith::ArithDialect,
                  mlir::func::FuncDialect, mlir::math::MathDialect,
                  mlir::scf::SCFDialect, mlir::vector::VectorDialect,
                  mlir::LLVM::LLVMDialect, mlir::gpu::GPUDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Energy dialect optimizer\n", registry));
}
