//===- Jit.cpp - Compiles an artifact in process --------------------------===//
//
// Native object code for the host (LLVM's pipeline as the shared library's
// clang runs it), linked in process by ORC as MLIR's ExecutionEngine links.
// The kernel support functions are resolved to the copies linked into the
// running tool.
//
//===----------------------------------------------------------------------===//

#include "SupportFunctions.h"
#include "energy/Codegen/Artifact.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/Runtime/ArtifactABI.h"

#include "llvm/ExecutionEngine/JITEventListener.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h"
#include "llvm/ExecutionEngine/SectionMemoryManager.h"
#include "llvm/IR/LegacyPassManager.h"
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

/// The host's target machine at `optLevel`, as the JIT compiles and links
/// for it.
static FailureOr<llvm::orc::JITTargetMachineBuilder>
hostMachineBuilder(unsigned optLevel, std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder) {
    error = llvm::toString(builder.takeError());
    return failure();
  }
  builder->setCodeGenOptLevel(optLevel == 0   ? llvm::CodeGenOptLevel::None
                              : optLevel == 1 ? llvm::CodeGenOptLevel::Less
                              : optLevel == 2
                                  ? llvm::CodeGenOptLevel::Default
                                  : llvm::CodeGenOptLevel::Aggressive);
  return std::move(*builder);
}

FailureOr<SmallVector<char, 0>>
mlir::energy::compileToObject(ModuleOp module, std::string &error,
                              unsigned optLevel) {
  optLevel = std::min(optLevel, 3u);
  FailureOr<llvm::orc::JITTargetMachineBuilder> builder =
      hostMachineBuilder(optLevel, error);
  if (failed(builder))
    return failure();
  auto machine = builder->createTargetMachine();
  if (!machine) {
    error = llvm::toString(machine.takeError());
    return failure();
  }
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> llvmModule = translateArtifact(module, context);
  if (!llvmModule) {
    error = "the kernels could not be translated to LLVM IR";
    return failure();
  }
  llvmModule->setDataLayout((*machine)->createDataLayout());
  llvmModule->setTargetTriple((*machine)->getTargetTriple());
  if (llvm::Error optimized =
          kernelOptimizer(optLevel, machine->get())(llvmModule.get())) {
    error = llvm::toString(std::move(optimized));
    return failure();
  }
  SmallVector<char, 0> object;
  llvm::raw_svector_ostream stream(object);
  llvm::legacy::PassManager codegen;
  if ((*machine)->addPassesToEmitFile(codegen, stream, nullptr,
                                      llvm::CodeGenFileType::ObjectFile)) {
    error = "the host's target machine cannot emit object code";
    return failure();
  }
  codegen.run(*llvmModule);
  return object;
}

FailureOr<JitArtifact> mlir::energy::loadObject(ArrayRef<char> object,
                                                std::string &error) {
  FailureOr<llvm::orc::JITTargetMachineBuilder> builder =
      hostMachineBuilder(kDefaultOptLevel, error);
  if (failed(builder))
    return failure();
  // As MLIR's ExecutionEngine links: RuntimeDyld, sections from the
  // SectionMemoryManager, the code registered with a debugger.
  auto linkingLayer = [](llvm::orc::ExecutionSession &session) {
    auto layer = std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(
        session, [](const llvm::MemoryBuffer &) {
          return std::make_unique<llvm::SectionMemoryManager>();
        });
    layer->registerJITEventListener(
        *llvm::JITEventListener::createGDBRegistrationListener());
    return layer;
  };
  auto jit =
      llvm::orc::LLJITBuilder()
          .setJITTargetMachineBuilder(std::move(*builder))
          .setObjectLinkingLayerCreator(
              [&](llvm::orc::ExecutionSession &session)
                  -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
                return linkingLayer(session);
              })
          .create();
  if (!jit) {
    error = llvm::toString(jit.takeError());
    return failure();
  }
  llvm::orc::LLJIT &engine = **jit;
  llvm::orc::JITDylib &library = engine.getMainJITDylib();
  llvm::orc::MangleAndInterner interner(engine.getExecutionSession(),
                                        engine.getDataLayout());
  llvm::orc::SymbolMap symbols;
  auto add = [&](const char *name, void *address) {
    symbols[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(address),
                               llvm::JITSymbolFlags::Exported};
  };
  for (const codegen::SupportFunction &support : codegen::supportFunctions())
    add(support.name.data(), support.address);
  add(ENERGY_ARTIFACT_SET_LOG_HANDLER_SYMBOL,
      reinterpret_cast<void *>(&energy_support_set_log_handler));
  if (llvm::Error defined =
          library.define(llvm::orc::absoluteSymbols(std::move(symbols)))) {
    error = llvm::toString(std::move(defined));
    return failure();
  }
  auto processSymbols =
      llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
          engine.getDataLayout().getGlobalPrefix());
  if (!processSymbols) {
    error = llvm::toString(processSymbols.takeError());
    return failure();
  }
  library.addGenerator(std::move(*processSymbols));
  if (llvm::Error added =
          engine.addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(
              StringRef(object.data(), object.size()), "energy_artifact"))) {
    error = llvm::toString(std::move(added));
    return failure();
  }
  // Linking now reports what the code lacks (an unresolved symbol, say)
  // here rather than as an artifact without a manifest.
  if (auto manifest = engine.lookup(ENERGY_ARTIFACT_MANIFEST_SYMBOL);
      !manifest) {
    error = llvm::toString(manifest.takeError());
    return failure();
  }
  if (llvm::Error initialized = engine.initialize(library)) {
    error = llvm::toString(std::move(initialized));
    return failure();
  }
  std::shared_ptr<llvm::orc::LLJIT> shared(std::move(*jit));
  JitArtifact artifact;
  artifact.handle = std::shared_ptr<void>(shared, shared.get());
  artifact.lookup = [shared](const std::string &name) -> void * {
    auto address = shared->lookup(name);
    if (!address) {
      llvm::consumeError(address.takeError());
      return nullptr;
    }
    return address->toPtr<void *>();
  };
  return artifact;
}

FailureOr<JitArtifact> mlir::energy::compileInProcess(ModuleOp module,
                                                      std::string &error,
                                                      unsigned optLevel) {
  FailureOr<SmallVector<char, 0>> object =
      compileToObject(module, error, optLevel);
  if (failed(object))
    return failure();
  return loadObject(*object, error);
}
