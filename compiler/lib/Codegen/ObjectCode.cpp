//===- ObjectCode.cpp - Native object code of the kernels -----------------===//
//
// LLVM's pipeline at the chosen level (what clang -O<level>
// -fno-unroll-loops runs on IR), then the target machine's code generator
// into an in-memory object file.
//
//===----------------------------------------------------------------------===//

#include "ObjectCode.h"

#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

using namespace mlir;
using namespace mlir::energy;

FailureOr<std::unique_ptr<llvm::TargetMachine>>
codegen::createKernelTargetMachine(StringRef cpu, unsigned optLevel,
                                   bool positionIndependent,
                                   std::string &error) {
  // Once, whichever thread comes first (registration is not thread-safe).
  static const bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)initialized;
  llvm::orc::JITTargetMachineBuilder builder{
      llvm::Triple(llvm::sys::getProcessTriple())};
  if (cpu == "native") {
    auto host = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!host) {
      error = llvm::toString(host.takeError());
      return failure();
    }
    builder = std::move(*host);
  } else {
    builder.setCPU(cpu.str());
  }
  builder.setCodeGenOptLevel(optLevel == 0   ? llvm::CodeGenOptLevel::None
                             : optLevel == 1 ? llvm::CodeGenOptLevel::Less
                             : optLevel == 2
                                 ? llvm::CodeGenOptLevel::Default
                                 : llvm::CodeGenOptLevel::Aggressive);
  if (positionIndependent)
    builder.setRelocationModel(llvm::Reloc::PIC_);
  auto machine = builder.createTargetMachine();
  if (!machine) {
    error = llvm::toString(machine.takeError());
    return failure();
  }
  return std::move(*machine);
}

LogicalResult codegen::emitObjectCode(llvm::Module &module,
                                      llvm::TargetMachine &machine,
                                      unsigned optLevel,
                                      SmallVectorImpl<char> &object,
                                      std::string &error) {
  module.setDataLayout(machine.createDataLayout());
  module.setTargetTriple(machine.getTargetTriple());

  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = false;
  tuning.LoopInterleaving = false;
  tuning.LoopVectorization = optLevel > 1;
  tuning.SLPVectorization = optLevel > 1;
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager callGraph;
  llvm::ModuleAnalysisManager modules;
  llvm::PassBuilder builder(&machine, tuning);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(callGraph);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, callGraph, modules);
  llvm::OptimizationLevel level = optLevel == 0   ? llvm::OptimizationLevel::O0
                                  : optLevel == 1 ? llvm::OptimizationLevel::O1
                                  : optLevel == 2 ? llvm::OptimizationLevel::O2
                                                  : llvm::OptimizationLevel::O3;
  llvm::ModulePassManager passes =
      optLevel == 0 ? builder.buildO0DefaultPipeline(level)
                    : builder.buildPerModuleDefaultPipeline(level);
  passes.run(module, modules);

  llvm::raw_svector_ostream stream(object);
  llvm::legacy::PassManager codeGenerator;
  if (machine.addPassesToEmitFile(codeGenerator, stream, nullptr,
                                  llvm::CodeGenFileType::ObjectFile)) {
    error = "the target machine of " + machine.getTargetCPU().str() +
            " cannot emit object code";
    return failure();
  }
  codeGenerator.run(module);
  return success();
}
