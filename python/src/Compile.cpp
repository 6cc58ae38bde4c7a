//===- Compile.cpp - energy.compile's compiler half -----------------------===//
//
// The front end, the pipeline to an artifact module and the JIT, as
// `energy-run MODEL.energy` runs them, with the diagnostics kept.
//
//===----------------------------------------------------------------------===//

#include "Compile.h"

#include "energy/Codegen/Artifact.h"
#include "energy/Codegen/CompileCache.h"
#include "energy/Dynamics/OptimizerRegistry.h"
#include "energy/Frontend/Diagnostics.h"
#include "energy/Frontend/EmitEnergyDialect.h"
#include "energy/IR/EnergyDialect.h"
#include "energy/Transforms/DimDefaults.h"
#include "energy/Transforms/InternalErrors.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

using namespace energy;
using namespace energy::python;

namespace {
/// Records the first error the MLIR diagnostics report, passing every
/// diagnostic on to the printing handler.
class FirstErrorRecorder {
public:
  FirstErrorRecorder(mlir::MLIRContext &context, CompileFailure &failure)
      : failure(failure),
        handler(&context, [this](mlir::Diagnostic &diagnostic) {
          record(diagnostic);
          return mlir::failure();
        }) {}

private:
  void record(mlir::Diagnostic &diagnostic) {
    if (diagnostic.getSeverity() != mlir::DiagnosticSeverity::Error ||
        !failure.message.empty())
      return;
    failure.message = diagnostic.str();
    if (auto place = mlir::dyn_cast<mlir::FileLineColLoc>(
            diagnostic.getLocation()->findInstanceOf<mlir::FileLineColLoc>())) {
      failure.file = place.getFilename().str();
      failure.line = place.getLine();
      failure.column = place.getColumn();
    }
  }

  CompileFailure &failure;
  mlir::ScopedDiagnosticHandler handler;
};
} // namespace

bool python::compilerAvailable() { return true; }

std::optional<Model> python::compileSource(const std::string &source,
                                           const std::string &name,
                                           const CompileOptions &options,
                                           CompileFailure &failure) {
  failure = CompileFailure();
  failure.file = name;
  auto fail = [&](std::string message) -> std::optional<Model> {
    if (failure.message.empty())
      failure.message = message;
    if (failure.printed.empty())
      failure.printed = name + ": " + message;
    return std::nullopt;
  };
  unsigned optLevel = options.optLevel.value_or(mlir::energy::kDefaultOptLevel);
  if (optLevel > 3)
    return fail("opt_level " + std::to_string(optLevel) + ": expected 0 to 3");
  if (options.target != "cpu" && options.target != "cuda")
    return fail("target '" + options.target + "': expected cpu or cuda");
  if (options.dtype != "f32" && options.dtype != "f64" &&
      options.dtype != "bf16")
    return fail("dtype '" + options.dtype + "': expected f32, f64 or bf16");
  if (options.dtype == "bf16" && options.target != "cuda")
    return fail("dtype bf16 needs target cuda (bf16 products run on tensor "
                "cores; the cpu target computes in f32 or f64)");
  if (llvm::Error error = mlir::energy::loadPlugins(options.plugins))
    return fail(llvm::toString(std::move(error)));

  llvm::SourceMgr sourceMgr;
  unsigned buffer = sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(source, name), llvm::SMLoc());
  frontend::DiagnosticEngine diagnostics(sourceMgr);
  diagnostics.redirectTo(failure.printed);

  mlir::MLIRContext context;
  context.loadDialect<mlir::energy::EnergyDialect, mlir::arith::ArithDialect>();
  context.printOpOnDiagnostic(false);
  llvm::raw_string_ostream printed(failure.printed);
  mlir::SourceMgrDiagnosticHandler printer(sourceMgr, &context, printed);
  FirstErrorRecorder recorder(context, failure);

  mlir::OwningOpRef<mlir::ModuleOp> module =
      frontend::emitSource(context, sourceMgr, buffer, diagnostics);
  for (const frontend::Diagnostic &diagnostic : diagnostics.getDiagnostics())
    if (diagnostic.severity == frontend::Severity::Error) {
      failure.line = diagnostic.line;
      failure.column = diagnostic.column;
      failure.message = diagnostic.message;
      break;
    }
  if (!module ||
      mlir::failed(mlir::energy::setDimDefaults(
          *module, options.dims, mlir::energy::UnsetDims::Refused, "dims")))
    return fail("the model could not be compiled");

  mlir::energy::ArtifactOptions artifactOptions;
  artifactOptions.dtype = options.dtype;
  artifactOptions.sourceName = name;
  artifactOptions.sourceText = source;
  artifactOptions.callerCotangents = options.callerCotangents;
  if (options.target == "cuda")
    artifactOptions.target =
        mlir::energy::withCudaDevice(artifactOptions.target);
  artifactOptions.optLevel = optLevel;
  std::string error;
  mlir::FailureOr<mlir::energy::JitArtifact> compiled =
      mlir::energy::compileModelInProcess(*module, artifactOptions, error);
  if (mlir::failed(compiled))
    return fail(error.empty() ? "the model could not be compiled"
                              : "compiling the kernels: " + error);
  Expected<Model> model =
      Model::fromSymbols(name, compiled->lookup, compiled->handle);
  if (!model)
    return fail(model.message());
  return std::move(*model);
}
