//===- Jit.cpp - Compiles an artifact in process --------------------------===//
//
// The MLIR ExecutionEngine (-O3 by default) with a host target machine (without
// one it does not vectorise). The kernel support functions are resolved to the
// copies linked into the running tool.
//
//===----------------------------------------------------------------------===//

#include "SupportFunctions.h"
#include "energy/Codegen/Artifact.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/Runtime/ArtifactABI.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

using namespace mlir;
using namespace mlir::energy;

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
  auto machine = builder->createTargetMachine();
  if (!machine) {
    error = llvm::toString(machine.takeError());
    return failure();
  }
  std::shared_ptr<llvm::TargetMachine> targetMachine = std::move(*machine);
  auto transformer =
      makeOptimizingTransformer(optLevel, 0, targetMachine.get());
  ExecutionEngineOptions options;
  options.transformer = transformer;
  options.jitCodeGenOptLevel = codegenLevel;
  auto buildModule = [](Operation *op, llvm::LLVMContext &context) {
    return translateArtifact(cast<ModuleOp>(op), context);
  };
  options.llvmModuleBuilder = buildModule;
  auto engine = ExecutionEngine::create(module, options, nullptr);
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
