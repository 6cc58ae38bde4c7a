//===- Jit.cpp - Compiles an artifact in process --------------------------===//
//
// Native object code for the host (ObjectCode.h: the shared libraries'
// pipeline), linked in process by ORC as MLIR's ExecutionEngine links.
// The kernel support functions are resolved to the copies linked into the
// running tool.
//
//===----------------------------------------------------------------------===//

#include "ObjectCode.h"
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
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

using namespace mlir;
using namespace mlir::energy;

/// The host's target machine, as the JIT links for it.
static FailureOr<llvm::orc::JITTargetMachineBuilder>
hostMachineBuilder(std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder) {
    error = llvm::toString(builder.takeError());
    return failure();
  }
  return std::move(*builder);
}

FailureOr<SmallVector<char, 0>>
mlir::energy::compileToObject(ModuleOp module, std::string &error,
                              unsigned optLevel) {
  optLevel = std::min(optLevel, 3u);
  FailureOr<std::unique_ptr<llvm::TargetMachine>> machine =
      codegen::createKernelTargetMachine("native", optLevel,
                                         /*positionIndependent=*/false, error);
  if (failed(machine))
    return failure();
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> llvmModule = translateArtifact(module, context);
  if (!llvmModule) {
    error = "the kernels could not be translated to LLVM IR";
    return failure();
  }
  SmallVector<char, 0> object;
  if (failed(codegen::emitObjectCode(*llvmModule, **machine, optLevel, object,
                                     error)))
    return failure();
  return object;
}

FailureOr<JitArtifact> mlir::energy::loadObject(ArrayRef<char> object,
                                                std::string &error) {
  FailureOr<llvm::orc::JITTargetMachineBuilder> builder =
      hostMachineBuilder(error);
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
  // What the runtime looks up: the same support code the kernels call.
  add(ENERGY_ARTIFACT_SET_LOG_HANDLER_SYMBOL,
      reinterpret_cast<void *>(&energy_support_set_log_handler));
  add(ENERGY_ARTIFACT_DEVICE_ERROR_SYMBOL,
      reinterpret_cast<void *>(&energy_support_cuda_last_error));
  add(ENERGY_ARTIFACT_SET_STREAM_SYMBOL,
      reinterpret_cast<void *>(&energy_support_cuda_set_stream));
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
