//===- energyc.cpp - The energy-graph compiler driver ---------------------===//
//
// `energyc FILE.energy [-o OUT]
// [--shard DIM]
// [--emit=lib|llvm|source|ast|energy|grad|update|plan|plan-stats|dot|svg]
// [--dtype f32|f64]
// [--cpu native|x86-64-v2|x86-64-v3|x86-64-v4] [--dim N=V]...`: parses and
// checks a model, emits the energy dialect, runs the passes the requested
// output needs and, for `lib` (the default), writes a shared-library
// artifact. Errors are `file:line:col: error: ...` with the source line and a
// caret; the exit status is non-zero on any error, and no output file is
// written then.
//
//===----------------------------------------------------------------------===//

#include "energy/Codegen/Artifact.h"
#include "energy/Codegen/BackendRegistry.h"
#include "energy/Dynamics/OptimizerRegistry.h"
#include "energy/Frontend/EmitEnergyDialect.h"
#include "energy/Frontend/Frontend.h"
#include "energy/Frontend/Shard.h"
#include "energy/Graph/ModelGraph.h"
#include "energy/IR/EnergyDialect.h"
#include "energy/IR/EnergyOps.h"
#include "energy/Plugin/OptimizerTable.h"
#include "energy/Runtime/Log.h"
#include "energy/Runtime/ModelFile.h"
#include "energy/Transforms/DimDefaults.h"
#include "energy/Transforms/InternalErrors.h"
#include "energy/Transforms/Passes.h"
#include "energy/Transforms/Pipelines.h"
#include "energy/Transforms/PlanStats.h"

#include "ShardedRank.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;
namespace fe = ::energy::frontend;

namespace {
enum class EmitKind {
  Source,
  Ast,
  Energy,
  Grad,
  Update,
  Plan,
  PlanStats,
  Llvm,
  Ptx,
  Lib,
  Dot,
  Svg
};

cl::OptionCategory energycOptions("energyc options");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.energy>"),
                               cl::Required, cl::cat(energycOptions));
cl::opt<std::string> outputFile(
    "o",
    cl::desc("Output file (default: stdout; for --emit=lib, MODEL.so named "
             "after the input)"),
    cl::value_desc("file"), cl::init("-"), cl::cat(energycOptions));
cl::opt<EmitKind> emitKind(
    "emit", cl::desc("What to emit"), cl::init(EmitKind::Lib),
    cl::values(clEnumValN(EmitKind::Lib, "lib",
                          "a shared-library artifact (default)"),
               clEnumValN(EmitKind::Llvm, "llvm", "the artifact's LLVM IR"),
               clEnumValN(EmitKind::Ptx, "ptx",
                          "with --target cuda: the GPU kernels' PTX, for "
                          "each architecture after a line "
                          "'// energy-ptx: sm_NN'"),
               clEnumValN(EmitKind::Source, "source",
                          "the model's source (with --shard, one rank's "
                          "model)"),
               clEnumValN(EmitKind::Ast, "ast", "the checked syntax tree"),
               clEnumValN(EmitKind::Energy, "energy", "the energy dialect"),
               clEnumValN(EmitKind::Grad, "grad",
                          "the energy dialect with derived gradients"),
               clEnumValN(EmitKind::Update, "update",
                          "and the step program of the dynamics"),
               clEnumValN(EmitKind::Plan, "plan",
                          "and the kernel plan (softmax contractions, "
                          "tables, parallel loops)"),
               clEnumValN(EmitKind::PlanStats, "plan-stats",
                          "each loop nest of the kernel plan with its trip "
                          "count and work per iteration, and the loops "
                          "over pairs of positions that do row work per "
                          "pair"),
               clEnumValN(EmitKind::Dot, "dot",
                          "the energy graph as Graphviz text: tensors, "
                          "energy terms (factors) and their edges, rules"),
               clEnumValN(EmitKind::Svg, "svg",
                          "the energy graph drawn by Graphviz (SVG)")),
    cl::cat(energycOptions));
cl::opt<std::string> shardDim(
    "shard",
    cl::desc("Rewrite the model into what one rank of `energy-run --shard "
             "DIM` evaluates (its rows of DIM), and emit that; for "
             "--emit=source and the IR, not artifacts"),
    cl::value_desc("DIM"), cl::init(""), cl::cat(energycOptions));
cl::opt<int64_t> shardRanks(
    "shard-ranks",
    cl::desc("With --shard: the rank count (a model that uses its rows' "
             "positions as numbers, a causal mask, gets every R-th row, "
             "as energy-run on R ranks gives it)"),
    cl::value_desc("R"), cl::init(1), cl::cat(energycOptions));
cl::opt<bool> shardRing(
    "ring",
    cl::desc("With --shard: stream the other ranks' rows in blocks around a "
             "ring instead of gathering them (per-rank memory 1/R); the rank "
             "model reads each lse's merge over the blocks"),
    cl::init(false), cl::cat(energycOptions));
cl::opt<bool> shardRingBlock(
    "ring-block",
    cl::desc("With --shard --ring: emit the block model (each lse over one "
             "block, weighted by each row's share of its gradient) instead"),
    cl::init(false), cl::cat(energycOptions));
cl::opt<bool> shardSuppliedGradients(
    "supplied-gradients",
    cl::desc("With --shard: build the programs as energy-run --shard does "
             "for --eval run and loss-grad (a ring's block model: for "
             "loss-grad): the steps read the gradient the ranks put "
             "together, a backward step pairs every rank's cotangents"),
    cl::init(false), cl::cat(energycOptions));
cl::opt<std::string>
    dtype("dtype",
          cl::desc("Element type of an artifact: f32 (default), f64, or "
                   "bf16 with --target cuda (f32 tensors; matrix products "
                   "and softmax contractions on tensor cores with bf16 "
                   "operands and f32 accumulation)"),
          cl::value_desc("f32|f64|bf16"), cl::init("f32"),
          cl::cat(energycOptions));
cl::opt<std::string>
    cpu("cpu",
        cl::desc("The CPU an artifact's kernels are compiled for (as clang's "
                 "-march): native (default: the features of this machine), "
                 "x86-64-v2, x86-64-v3 or x86-64-v4; its manifest lists the "
                 "CPU features the code may use"),
        cl::value_desc("native|x86-64-v2|x86-64-v3|x86-64-v4"),
        cl::init("native"), cl::cat(energycOptions));
cl::opt<std::string>
    backendName("target",
                cl::desc("The backend that writes the artifact (default "
                         "cpu); plugins may register more"),
                cl::value_desc("name"), cl::init("cpu"),
                cl::cat(energycOptions));
cl::list<std::string> dimValues("dim", cl::desc("Set a dim's default"),
                                cl::value_desc("NAME=VALUE"),
                                cl::cat(energycOptions));
cl::list<std::string> plugins(
    "plugin",
    cl::desc("Load a plugin (a shared library exporting "
             "energyGetPluginInfo) before reading the model; repeatable. "
             "ENERGY_PLUGINS (colon-separated paths) loads more"),
    cl::value_desc("path"), cl::cat(energycOptions));
cl::opt<unsigned> optLevel(
    "opt-level",
    cl::desc("How hard LLVM optimises the artifact's kernels, 0-3 (default "
             "2; 3 compiles longer and runs no faster; lower levels compile "
             "faster and run slower)"),
    cl::init(mlir::energy::kDefaultOptLevel), cl::cat(energycOptions));
cl::opt<bool> deviceLoops(
    "device-loops",
    cl::desc("Generate loops as a GPU needs them, on a CPU too: the exp of a "
             "panel, log determinants and inverses as code instead of calls "
             "of the support library (always so with --target cuda; for "
             "testing that code)"),
    cl::init(false), cl::Hidden, cl::cat(energycOptions));
cl::opt<bool> noRunCaches(
    "no-run-caches",
    cl::desc("Compute every value at every step, also what reads only params "
             "and inputs, and pack every product's operands at every product "
             "(energy-plan-run-caches and energy-plan-pack-invariant-operands "
             "keep them within a call of the runtime by default)"),
    cl::init(false), cl::cat(energycOptions));
cl::opt<bool> noChangeOfVariables(
    "no-change-of-variables",
    cl::desc("Run gd on a state that the energy reads through one linear map "
             "as the model writes it, instead of in that map's image "
             "(energy-change-of-variables)"),
    cl::init(false), cl::cat(energycOptions));
cl::opt<bool> callerCotangents(
    "caller-cotangents",
    cl::desc("Seed the backward program with the caller's cotangents of the "
             "final states (inputs X.incoming) instead of the model's losses, "
             "and differentiate the inputs too: a layer of a larger program, "
             "as energy.torch.EnergyModule uses it"),
    cl::init(false), cl::cat(energycOptions));
cl::list<std::string> wrt("wrt", cl::CommaSeparated,
                          cl::desc("Also differentiate with respect to these "
                                   "tensors (with --emit=grad, update, "
                                   "plan)"),
                          cl::value_desc("a,b"), cl::cat(energycOptions));

int fail(const Twine &message) {
  WithColor::error(errs(), "energyc") << message << "\n";
  return 1;
}

/// Prints the declarations of a checked model, one per line, expressions as
/// S-expressions.
void printAst(const fe::ModelSpec &model, raw_ostream &os) {
  os << "model " << model.name << "\n";
  for (const fe::DeclPtr &decl : model.decls) {
    os << "  ";
    if (auto *dim = dyn_cast<fe::DimDecl>(decl.get())) {
      os << "dim " << dim->getName();
      if (dim->getValue())
        os << " = " << fe::printExpr(*dim->getValue());
    } else if (auto *tensor = dyn_cast<fe::TensorDecl>(decl.get())) {
      os << ::energy::tensorRoleName(tensor->getRole()) << ' '
         << tensor->getName() << " : " << tensor->getShape().str();
    } else if (auto *constant = dyn_cast<fe::ConstDecl>(decl.get())) {
      os << "const " << constant->getName() << " = "
         << fe::printExpr(constant->getValue());
    } else if (auto *let = dyn_cast<fe::LetDecl>(decl.get())) {
      os << "let " << let->getName() << " : " << let->getShape().str() << " = "
         << fe::printExpr(let->getBody());
    } else if (auto *fn = dyn_cast<fe::FnDecl>(decl.get())) {
      os << "fn " << fn->getName() << " -> " << fn->getResultShape().str()
         << " = " << fe::printExpr(fn->getBody());
    } else if (auto *term = dyn_cast<fe::TermDecl>(decl.get())) {
      os << (isa<fe::LossDecl>(term) ? "loss " : "energy ") << term->getName()
         << " = " << fe::printExpr(term->getBody());
    } else if (auto *output = dyn_cast<fe::OutputDecl>(decl.get())) {
      os << "output " << output->getName() << " : " << output->getShape().str()
         << " = " << fe::printExpr(output->getBody());
    }
    os << "\n";
  }
  if (model.dynamics) {
    os << "  dynamics";
    for (const fe::UpdateRule &rule : model.dynamics->rules)
      os << ' ' << rule.node << ':'
         << (rule.kind == fe::UpdateRule::Kind::Explicit ? StringRef("<-")
                                                         : rule.optimizer);
    if (const std::optional<fe::BackwardClause> &backward =
            model.dynamics->backward) {
      os << " backward " << backward->mode;
      if (backward->implicit)
        os << " cg=" << backward->iterations << " tol=" << backward->tolerance;
    }
    os << "\n";
  }
}

/// Applies `--dim NAME=VALUE`: the dim's default becomes VALUE.
mlir::LogicalResult applyDimValues(mlir::ModuleOp module) {
  std::vector<std::pair<std::string, int64_t>> sizes;
  for (const std::string &setting : dimValues) {
    auto [name, text] = StringRef(setting).split('=');
    int64_t value;
    if (text.getAsInteger(10, value))
      return mlir::emitError(module.getLoc())
             << "--dim " << setting << ": expected NAME=VALUE with a positive "
             << "integer VALUE";
    sizes.emplace_back(name.str(), value);
  }
  return mlir::energy::setDimDefaults(module, sizes);
}

/// Emits the checked model as the dialect, runs what `--emit` asks for and
/// prints the result into `os` (for `--emit=lib`, writes the artifact
/// instead). Returns the exit status.
/// With --shard: how the rank's programs are built.
std::optional<mlir::energy::ShardedRankOptions> shardedRank;

int compileModel(mlir::MLIRContext &context, SourceMgr &sourceMgr,
                 unsigned buffer, fe::DiagnosticEngine &diagnostics,
                 const mlir::energy::ArtifactTarget &target,
                 const mlir::energy::Backend *backend, raw_ostream &os) {
  mlir::OwningOpRef<mlir::ModuleOp> module =
      fe::emitSource(context, sourceMgr, buffer, diagnostics);
  if (!module || mlir::failed(applyDimValues(*module)))
    return 1;
  bool planned = emitKind == EmitKind::Plan || emitKind == EmitKind::PlanStats;
  if (emitKind == EmitKind::Grad || emitKind == EmitKind::Update || planned) {
    mlir::PassManager passes(&context, mlir::ModuleOp::getOperationName());
    mlir::OpPassManager &perModel = passes.nest<mlir::energy::ModelOp>();
    std::vector<std::string> wrtNames(wrt.begin(), wrt.end());
    if (emitKind == EmitKind::Grad)
      mlir::energy::buildGradientPipeline(perModel, wrtNames);
    else
      mlir::energy::buildUpdatePipeline(
          perModel, wrtNames,
          {callerCotangents, shardedRank, !noChangeOfVariables});
    mlir::energy::reportCrashesByPass(passes);
    if (mlir::failed(mlir::applyPassManagerCLOptions(passes)))
      return 1;
    if (mlir::failed(passes.run(*module)))
      return 1;
    if (planned &&
        mlir::failed(mlir::energy::runKernelPlanPipeline(
            *module,
            {backendName == "cuda", dtype == "bf16", !noRunCaches,
             !(shardedRank && shardedRank->backwardStepAlone), deviceLoops},
            [](mlir::PassManager &plan) {
              return mlir::applyPassManagerCLOptions(plan);
            })))
      return 1;
  }
  if (emitKind == EmitKind::PlanStats) {
    module->walk([&](mlir::energy::ModelOp model) {
      mlir::energy::printPlanStats(model, os);
    });
    return 0;
  }
  if (emitKind == EmitKind::Dot || emitKind == EmitKind::Svg) {
    mlir::energy::ModelOp graphModel;
    module->walk([&](mlir::energy::ModelOp found) { graphModel = found; });
    std::string dot;
    raw_string_ostream dotStream(dot);
    mlir::energy::writeModelGraph(graphModel, dotStream);
    if (emitKind == EmitKind::Dot) {
      os << dot;
    } else {
      std::string svg, error;
      if (mlir::failed(mlir::energy::renderGraph(dot, "svg", svg, error)))
        return fail(error);
      os << svg;
    }
  } else if (emitKind == EmitKind::Lib || emitKind == EmitKind::Llvm ||
             emitKind == EmitKind::Ptx) {
    mlir::energy::ArtifactOptions options;
    options.dtype = dtype;
    options.target = target;
    options.optLevel = optLevel;
    options.runCaches = !noRunCaches;
    options.changeOfVariables = !noChangeOfVariables;
    options.deviceLoops = deviceLoops;
    options.callerCotangents = callerCotangents;
    options.sourceName = inputFile;
    options.sourceText = sourceMgr.getMemoryBuffer(buffer)->getBuffer();
    if (emitKind == EmitKind::Lib) {
      std::string path = outputFile;
      if (path == "-")
        path = (sys::path::stem(inputFile) + ".so").str();
      std::string error;
      if (mlir::failed(backend->writeArtifact(*module, options, path, error)))
        return error.empty() ? 1 : fail(error);
      return 0;
    }
    if (emitKind == EmitKind::Ptx)
      options.target = mlir::energy::withCudaDevice(options.target);
    mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>> artifact =
        mlir::energy::compileToArtifactModule(*module, options);
    if (mlir::failed(artifact))
      return 1;
    if (emitKind == EmitKind::Ptx) {
      for (const auto &[arch, ptx] : mlir::energy::cudaImagesOf(**artifact))
        os << "// energy-ptx: " << arch << "\n" << ptx;
    } else {
      LLVMContext llvmContext;
      std::unique_ptr<Module> llvmModule =
          mlir::energy::translateArtifact(**artifact, llvmContext);
      if (!llvmModule)
        return fail("translating the kernels to LLVM IR failed");
      llvmModule->print(os, nullptr);
    }
  } else {
    module->print(os);
  }
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  ::energy::setLogHandler(::energy::printLogToStderr);
  InitLLVM init(argc, argv);
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "energyc 0.1.0 (energy dialect on LLVM/MLIR " LLVM_VERSION_STRING
          ")\n";
  });
  // MLIR's pass manager options (--mlir-print-ir-after=PASS, timing, ...),
  // to look into the pipeline: their pass names are the registered ones.
  mlir::energy::registerEnergyPasses();
  mlir::registerPassManagerCLOptions();
  cl::HideUnrelatedOptions(energycOptions);
  cl::ParseCommandLineOptions(
      argc, argv,
      "energyc: compiles a .energy model (energy graph) to the energy dialect "
      "and derives its gradients\n");

  if (llvm::Error error = mlir::energy::loadPlugins(
          std::vector<std::string>(plugins.begin(), plugins.end())))
    return fail(toString(std::move(error)));

  // A compiled artifact, a safetensors file, an empty file: one line that
  // says what the file is, not the parser's view of its bytes.
  ::energy::Expected<::energy::ModelFileKind> kind =
      ::energy::identifyModelFile(inputFile,
                                  ::energy::AcceptedModelFiles::Source);
  if (!kind)
    return fail(kind.message());

  SourceMgr sourceMgr;
  fe::DiagnosticEngine diagnostics(sourceMgr);
  std::string readError;
  std::optional<unsigned> buffer =
      fe::readSourceFile(inputFile, sourceMgr, readError);
  if (!buffer)
    return fail(readError);

  if (dtype != "f32" && dtype != "f64" && dtype != "bf16")
    return fail("--dtype " + dtype + ": expected f32, f64 or bf16");
  if (dtype == "bf16" && backendName != "cuda")
    return fail("--dtype bf16 needs --target cuda (bf16 products run on "
                "tensor cores; the " +
                backendName + " backend computes in f32 or f64)");
  std::string targetError;
  mlir::FailureOr<mlir::energy::ArtifactTarget> target =
      mlir::energy::resolveArtifactTarget(cpu, targetError);
  if (mlir::failed(target))
    return fail(targetError);
  const mlir::energy::Backend *backend =
      mlir::energy::getBackendRegistry().lookup(backendName);
  if (!backend)
    return fail("--target " + backendName + ": unknown backend (known: " +
                mlir::energy::getBackendRegistry().names() + ")");
  if (emitKind == EmitKind::Llvm && backendName != "cpu")
    return fail("--emit=llvm shows the cpu backend's code only");
  if (emitKind == EmitKind::Ptx && backendName != "cuda")
    return fail("--emit=ptx needs --target cuda");
  if (shardDim.empty() && shardRanks.getNumOccurrences())
    return fail("--shard-ranks needs --shard DIM (the rank count of a "
                "sharded model)");
  if (shardDim.empty() && (shardRing || shardRingBlock))
    return fail("--ring needs --shard DIM");
  if (shardDim.empty() && shardSuppliedGradients)
    return fail("--supplied-gradients needs --shard DIM");
  if (shardRingBlock && !shardRing)
    return fail("--ring-block needs --ring");
  if (!shardDim.empty()) {
    if (emitKind == EmitKind::Lib || emitKind == EmitKind::Llvm ||
        emitKind == EmitKind::Ptx)
      return fail("--shard " + shardDim +
                  " shows one rank's model (--emit=source, or the IR); "
                  "energy-run --shard compiles it itself");
    if (shardRanks < 1)
      return fail("--shard-ranks " + Twine(shardRanks.getValue()) +
                  ": expected a rank count of 1 or more");
    unsigned sharded = 0, block = 0;
    std::optional<fe::ShardedModel> rank =
        fe::shardSourceBuffer(sourceMgr, *buffer, shardDim, shardRanks,
                              diagnostics, sharded, shardRing, &block);
    if (!rank)
      return 1;
    buffer = shardRingBlock ? block : sharded;
    shardedRank = energy::tools::shardedRankOf(*rank, shardRingBlock);
    shardedRank->suppliedGradients = shardSuppliedGradients;
    // The rank's model is ours: its unused declarations are not the user's.
    diagnostics.ignoreWarnings(true);
  }
  std::string text;
  raw_string_ostream os(text);
  if (emitKind == EmitKind::Source) {
    os << sourceMgr.getMemoryBuffer(*buffer)->getBuffer();
  } else if (emitKind == EmitKind::Ast) {
    std::unique_ptr<fe::ModelSpec> model =
        fe::parseAndCheck(sourceMgr, *buffer, diagnostics);
    if (!model || diagnostics.hasErrors())
      return 1;
    printAst(*model, os);
  } else {
    mlir::MLIRContext context;
    context.printOpOnDiagnostic(false);
    mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
    int status = 1;
    (void)mlir::energy::guardCompilation(
        "energyc", mlir::FileLineColLoc::get(&context, inputFile, 1, 1), [&] {
          status = compileModel(context, sourceMgr, *buffer, diagnostics,
                                *target, backend, os);
          return mlir::success();
        });
    // An artifact is written by its backend, not as text.
    if (status != 0 || emitKind == EmitKind::Lib)
      return status;
  }

  std::string error;
  std::unique_ptr<ToolOutputFile> output =
      mlir::openOutputFile(outputFile, &error);
  if (!output)
    return fail(error);
  output->os() << text;
  output->keep();
  return 0;
}
