//===- energy-opt.cpp - Runs energy passes over MLIR files ----------------===//
//
// The `-opt` tool of the project: parses, verifies and prints energy IR and
// runs the project's passes (and MLIR's generic ones) over it.
//
//===----------------------------------------------------------------------===//

#include "energy/Codegen/Passes.h"
#include "energy/Dynamics/OptimizerRegistry.h"
#include "energy/IR/EnergyDialect.h"
#include "energy/Transforms/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
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

/// MLIR's conversions to the LLVM dialect that code generation runs (all of
/// MLIR's, mlir/Conversion/Passes.h, would double this file's compile time).
static void registerLoweringPasses() {
  mlir::registerPass([] { return mlir::createSCFToControlFlowPass(); });
  mlir::registerPass([] { return mlir::createConvertVectorToLLVMPass(); });
  mlir::registerPass([] { return mlir::createConvertMathToLLVMPass(); });
  mlir::registerPass([] { return mlir::createConvertMathToLibmPass(); });
  mlir::registerPass([] { return mlir::createArithToLLVMConversionPass(); });
  mlir::registerPass([] { return mlir::createConvertIndexToLLVMPass(); });
  mlir::registerPass([] { return mlir::createConvertControlFlowToLLVMPass(); });
  mlir::registerPass([] { return mlir::createConvertFuncToLLVMPass(); });
  mlir::registerPass([] { return mlir::createReconcileUnrealizedCastsPass(); });
}

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
  registerLoweringPasses();
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
