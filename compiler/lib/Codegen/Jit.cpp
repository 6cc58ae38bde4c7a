//===- Jit.cpp - Compiles an artifact in process --------------------------===//
//
// The MLIR ExecutionEngine with a host target machine (without one it does not
// vectorise) and LLVM's pipeline as the shared library's clang runs it. The
// kernel support functions are resolved to the copies linked into the running
// tool.
//
//===----------------------------------------------------------------------===//

#include "SupportFunctions.h"
#include "energy/Codegen/Artifact.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/Runtime/ArtifactABI.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

using namespace mlir;
using namespace mlir::energy;

/// LLVM's pipeline at `optLevel` for `machine`, without unrolling loops (as
/// writeSharedLibrary's clang runs it: -fno-unroll-loops).
static std::function<llvm::Error(llvm::Module *)>
kernelOptimizer(unsigned optLevel, llvm::TargetMachine *machine) {
  return [optLevel, machine](llvm::Module *module) -> llvm::Error {
    llvm::PipelineTuningOptions tuning;
    tuning.LoopUnrolling = false;
    tuning.LoopInterleaving = false;
    tuning.LoopVectorization = optLevel > 1;
    tuning.SLPVectorization = optLevel > 1;
    llvm::LoopAnalysisManager loops;
    llvm::FunctionAnalysisManager functions;
    llvm::CGSCCAnalysisManager callGraph;
    llvm::ModuleAnalysisManager modules;
    llvm::PassBuilder builder(machine, tuning);
    builder.registerModuleAnalyses(modules);
    builder.registerCGSCCAnalyses(callGraph);
    builder.registerFunctionAnalyses(functions);
    builder.registerLoopAnalyses(loops);
    builder.crossRegisterProxies(loops, functions, callGraph, modules);
    llvm::OptimizationLevel level =
        optLevel == 0   ? llvm::OptimizationLevel::O0
        : optLevel == 1 ? llvm::OptimizationLevel::O1
        : optLevel == 2 ? llvm::OptimizationLevel::O2
                        : llvm::OptimizationLevel::O3;
    llvm::ModulePassManager passes =
        optLevel == 0 ? builder.buildO0DefaultPipeline(level)
                      : builder.buildPerModuleDefaultPipeline(level);
    passes.run(*module, modules);
    return llvm::Error::success();
  };
}

FailureOr<JitArtifact> mlir::energy::compileInProcess(ModuleOp module,
                                                      std::string &error,
                                                      unsigned optLevel) {
  optLevel = std::min(optLevel, 3u);
  llvm::CodeGenOptLevel codegenLevel =
      optLevel == 0   ? llvm::CodeGenOptLevel::None
      : optLevel == 1 ? llvm::CodeGenOptLevel::Less
      : optLevel == 2 ? llvm::CodeGenOptLevel::Default
                      : llvm::CodeGenOptLevel::Aggressive;
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder) {
    error = llvm::toString(builder.takeError());
    return failure();
  }
  builder->setCodeGenOptLevel(codegenLevel);
  // One machine for LLVM's pipeline, one for the engine's code generator:
  // the engine uses the machine it is given and ignores
  // jitCodeGenOptLevel for one it makes itself.
  auto makeMachine = [&]() -> std::unique_ptr<llvm::TargetMachine> {
    auto machine = builder->createTargetMachine();
    if (!machine) {
      error = llvm::toString(machine.takeError());
      return nullptr;
    }
    return std::move(*machine);
  };
  std::shared_ptr<llvm::TargetMachine> targetMachine = makeMachine();
  std::unique_ptr<llvm::TargetMachine> codegenMachine =
      targetMachine ? makeMachine() : nullptr;
  if (!codegenMachine)
    return failure();
  auto transformer = kernelOptimizer(optLevel, targetMachine.get());
  ExecutionEngineOptions options;
  options.transformer = transformer;
  options.jitCodeGenOptLevel = codegenLevel;
  auto buildModule = [](Operation *op, llvm::LLVMContext &context) {
    return translateArtifact(cast<ModuleOp>(op), context);
  };
  options.llvmModuleBuilder = buildModule;
  auto engine =
      ExecutionEngine::create(module, options, std::move(codegenMachine));
  if (!engine) {
    error = llvm::toString(engine.takeError());
    return failure();
  }
  (*engine)->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap symbols;
    auto add = [&](const char *name, void *address) {
      symbols[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(address),
                                 llvm::JITSymbolFlags::Exported};
    };
    for (const codegen::SupportFunction &support : codegen::supportFunctions())
      add(support.name.data(), support.address);
    add(ENERGY_ARTIFACT_SET_LOG_HANDLER_SYMBOL,
        reinterpret_cast<void *>(&energy_support_set_log_handler));
    return symbols;
  });
  std::shared_ptr<ExecutionEngine> shared(std::move(*engine));
  // Materialising the module now reports what it lacks (an unresolved
  // symbol, say) here rather than as an artifact without a manifest.
  if (auto manifest = shared->lookup(ENERGY_ARTIFACT_MANIFEST_SYMBOL);
      !manifest) {
    error = llvm::toString(manifest.takeError());
    return failure();
  }
  JitArtifact artifact;
  artifact.handle = std::shared_ptr<void>(shared, shared.get());
  artifact.lookup = [shared](const std::string &name) -> void * {
    auto address = shared->lookup(name);
    if (!address) {
      llvm::consumeError(address.takeError());
      return nullptr;
    }
    return *address;
  };
  return artifact;
}
