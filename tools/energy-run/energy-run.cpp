//===- energy-run.cpp - Runs an energy model ------------------------------===//
//
// `energy-run MODEL(.energy|.so) [--dim N=V]... [--in FILE]... [--init
// random:SEED] [--steps K] [--eval energy|grad|run] [--dtype f32|f64]
// [--threads N] [--out FILE] [--trace] [--json] [--interp] [--bench K]
// [--print-manifest]`: binds the model's tensors, then evaluates its energy,
// its gradients, or runs its dynamics, or times that evaluation (--bench).
// A .so is a compiled artifact; a .energy file is compiled in process (JIT);
// --interp uses the reference interpreter instead.
//
//===----------------------------------------------------------------------===//

#include "ModelCheck.h"
#include "RunCompiled.h"
#include "RunInterpreted.h"
#include "RunReport.h"
#include "RunSettings.h"
#include "RunSharded.h"
#include "ShardedRank.h"

#include "LaunchedGroup.h"

#include "energy/Codegen/Artifact.h"
#include "energy/Codegen/CompileCache.h"
#include "energy/Dynamics/OptimizerRegistry.h"
#include "energy/Frontend/Shard.h"
#include "energy/IR/EnergyDialect.h"
#include "energy/IR/EnergyOps.h"
#include "energy/Plugin/OptimizerTable.h"
#include "energy/Runtime/CudaDriver.h"
#include "energy/Runtime/DimInference.h"
#include "energy/Runtime/Log.h"
#include "energy/Runtime/Model.h"
#include "energy/Runtime/ModelFile.h"

#include "energy/Transforms/DimDefaults.h"
#include "energy/Transforms/InternalErrors.h"
#include "energy/Transforms/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace llvm;
using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::tools;
namespace fe = ::energy::frontend;

namespace {
cl::OptionCategory runOptions("energy-run options");
cl::opt<std::string> modelFile(cl::Positional,
                               cl::desc("<model.energy or artifact.so>"),
                               cl::Required, cl::cat(runOptions));
cl::opt<bool>
    useInterpreter("interp",
                   cl::desc("Evaluate with the reference interpreter"),
                   cl::cat(runOptions));
cl::opt<std::string>
    deviceOption("device",
                 cl::desc("Where kernels run: cpu or cuda (the first GPU; "
                          "the CUDA driver is loaded only then). Default: "
                          "what an artifact was compiled for; a .energy "
                          "model is compiled for it"),
                 cl::value_desc("cpu|cuda"), cl::init(""), cl::cat(runOptions));
cl::list<std::string> dimValues("dim", cl::desc("Bind a dim"),
                                cl::value_desc("NAME=VALUE"),
                                cl::cat(runOptions));
cl::list<std::string> constValues("const", cl::desc("Override a const"),
                                  cl::value_desc("NAME=VALUE"),
                                  cl::cat(runOptions));
cl::opt<std::string>
    initSpec("init",
             cl::desc("Initialise tensors that have no value from a documented "
                      "generator: normal, scaled by 1/sqrt(last dim)"),
             cl::value_desc("random:SEED"), cl::cat(runOptions));
cl::list<std::string>
    inputFiles("in",
               cl::desc("Bind the tensors of a safetensors file (dims are "
                        "inferred from their shapes)"),
               cl::value_desc("FILE.safetensors"), cl::cat(runOptions));
cl::opt<std::string> outputFile(
    "out",
    cl::desc("Write the results (state tensors, outputs, or grad.T) to a "
             "safetensors file"),
    cl::value_desc("FILE.safetensors"), cl::cat(runOptions));
cl::opt<int64_t> stepsOverride("steps", cl::desc("Number of steps to run"),
                               cl::init(-1), cl::cat(runOptions));
cl::opt<EvalKind> evalKind(
    "eval", cl::desc("What to evaluate"), cl::init(EvalKind::Run),
    cl::values(clEnumValN(EvalKind::Energy, "energy", "the global energy"),
               clEnumValN(EvalKind::Grad, "grad",
                          "dE/dT for each state tensor (or --wrt)"),
               clEnumValN(EvalKind::LossGrad, "loss-grad",
                          "run the dynamics, then the losses and their "
                          "gradient through the run (adjoint.T for each param "
                          "and state)"),
               clEnumValN(EvalKind::Run, "run", "run the dynamics (default)")),
    cl::cat(runOptions));
cl::opt<bool> storeAllSteps(
    "store-all-steps",
    cl::desc("With --eval loss-grad: keep the state of every step for the "
             "backward pass instead of checkpoints every sqrt(steps) steps "
             "(more memory, no recomputation)"),
    cl::cat(runOptions));
cl::list<std::string> wrt("wrt", cl::CommaSeparated,
                          cl::desc("Tensors to differentiate (--eval grad)"),
                          cl::value_desc("a,b"), cl::cat(runOptions));
cl::opt<std::string>
    dtypeOption("dtype",
                cl::desc("Element type: f32 (default), f64, or bf16 with "
                         "--device cuda (f32 tensors, bf16 products on "
                         "tensor cores); an artifact has the one energyc "
                         "--dtype gave it"),
                cl::value_desc("f32|f64|bf16"), cl::cat(runOptions));
/// --threads N: LLVM's libraries register an option named `threads`, so
/// main() takes ours out of the command line before parsing the rest.
int threadCount = 0;
cl::opt<std::string> plotFile(
    "plot",
    cl::desc("Draw the run (.svg or .png): the energy per step, in total and "
             "per term, and the norm of the gradient with respect to the "
             "state tensors; with --json, the plotted numbers are printed too"),
    cl::value_desc("FILE"), cl::cat(runOptions));
cl::list<std::string> plotAttentionArgs(
    "plot-attention", cl::multi_val(2),
    cl::desc("After the run, draw the softmax weights of an lse energy term "
             "as a heat map (.svg or .png): TERM:CHILD FILE, CHILD holding "
             "child indices at positions (attn:i=3, or attn: for every "
             "child); the weights come from the reference interpreter at the "
             "run's final values"),
    cl::value_desc("TERM:CHILD FILE"), cl::cat(runOptions));
cl::list<std::string> plugins(
    "plugin",
    cl::desc("Load a plugin before compiling a .energy model (repeatable; "
             "ENERGY_PLUGINS, colon-separated, loads more)"),
    cl::value_desc("path"), cl::cat(runOptions));
cl::opt<bool> trace("trace", cl::desc("Print the energy after every step"),
                    cl::cat(runOptions));
cl::opt<bool> jsonOutput("json", cl::desc("Print results as one JSON object"),
                         cl::cat(runOptions));
cl::opt<int64_t> benchRepetitions(
    "bench",
    cl::desc("Time the evaluation (--eval): one warm-up, then K repetitions "
             "(each run from the same initial state); print the median, min "
             "and max milliseconds of one (--json: only {\"median_ms\": M}); "
             "no results are printed or written"),
    cl::value_desc("K"), cl::init(0), cl::cat(runOptions));
cl::opt<bool> checkAgainstInterpreter(
    "check",
    cl::desc("Compile the model in double precision (single with --dtype "
             "f32, compared within 1e-3) and compare it with the "
             "reference interpreter from the same values (energy, every "
             "gradient on 1 and 3 threads, a run, each loss and its "
             "gradient), and the interpreter's gradients with finite "
             "differences; exit 0 when all agree, 1 when anything differs or "
             "fails, 3 when the model's values are not finite at these dims"),
    cl::cat(runOptions));
cl::opt<bool> checkDeviceLoops(
    "device-loops",
    cl::desc("With --check: compile the model with the loops and the host "
             "code CUDA artifacts get (energyc --device-loops: the GPU's "
             "element loops, factorisations and exp as code, the host's work "
             "on GPU memory as one-iteration loops), run on the CPU"),
    cl::cat(runOptions));
cl::opt<unsigned> jitOptLevel(
    "opt-level",
    cl::desc("Optimisation level (0-3) of a model compiled in process "
             "(default 2; lower levels compile faster)"),
    cl::init(kDefaultOptLevel), cl::cat(runOptions));
cl::opt<std::string> shardDim(
    "shard",
    cl::desc("Spread the rows of dim DIM over the processes mpirun started "
             "(each evaluates its rows; --eval energy, grad or run; a "
             ".energy model)"),
    cl::value_desc("DIM"), cl::init(""), cl::cat(runOptions));
cl::opt<bool> shardRing(
    "ring",
    cl::desc("With --shard: stream the other ranks' rows around a ring in "
             "blocks, merging each lse over them, instead of gathering them "
             "(per-rank memory 1/R; --eval energy, grad or run, and the dim "
             "a multiple of the rank count)"),
    cl::init(false), cl::cat(runOptions));
cl::opt<bool> printManifest(
    "print-manifest",
    cl::desc("Print the compiled model's manifest (JSON) and exit"),
    cl::cat(runOptions));

/// Parses `NAME=VALUE` settings into (name, value) pairs.
template <typename Number>
FailureOr<std::vector<std::pair<std::string, Number>>>
parseSettings(ArrayRef<std::string> settings, StringRef option) {
  std::vector<std::pair<std::string, Number>> result;
  for (const std::string &setting : settings) {
    auto [name, text] = StringRef(setting).split('=');
    Number value;
    bool bad;
    if constexpr (std::is_same_v<Number, double>)
      bad = text.getAsDouble(value);
    else
      bad = text.getAsInteger(10, value) || value <= 0;
    if (name.empty() || bad) {
      (void)fail(
          "--" + option + " " + setting + ": expected NAME=VALUE with a " +
          (std::is_same_v<Number, double> ? "number" : "positive integer"));
      return failure();
    }
    result.emplace_back(name.str(), value);
  }
  return result;
}

/// The settings the runs and reports follow, from the options.
RunSettings settingsFromOptions() {
  RunSettings settings;
  settings.eval = evalKind;
  settings.wrt.assign(wrt.begin(), wrt.end());
  settings.outputFile = outputFile;
  settings.steps = stepsOverride;
  settings.storeAllSteps = storeAllSteps;
  settings.dtype = dtypeOption;
  settings.threads = threadCount;
  settings.plotFile = plotFile;
  settings.plotAttention.assign(plotAttentionArgs.begin(),
                                plotAttentionArgs.end());
  settings.trace = trace;
  settings.json = jsonOutput;
  settings.benchRepetitions = benchRepetitions;
  return settings;
}

/// The sizes of the dims a run of `module` binds, by the runtime's rule
/// (--dim, else the axes of the --in tensors, else defaults), to plan its
/// kernels at; only the --dim ones where they do not resolve (the run
/// reports why).
std::vector<std::pair<std::string, int64_t>> runSizes(ModuleOp module,
                                                      const RunInputs &inputs) {
  auto models = module.getOps<ModelOp>();
  if (models.empty())
    return inputs.dims;
  ::energy::Manifest described = describeDimsAndTensors(*models.begin());
  std::map<std::string, int64_t> given(inputs.dims.begin(), inputs.dims.end());
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto &[name, tensor] : inputs.tensors)
    shapes[name] = tensor.shape();
  std::vector<int64_t> values;
  if (!::energy::resolveDims(described, given, "--dim", shapes, values))
    return inputs.dims;
  std::vector<std::pair<std::string, int64_t>> sizes;
  for (auto [dim, value] : llvm::zip(described.dims, values))
    if (!dim.derived)
      sizes.emplace_back(dim.name, value);
  return sizes;
}

} // namespace

/// Removes `--threads N` / `--threads=N` from `arguments` into threadCount.
bool takeThreadsOption(SmallVectorImpl<const char *> &arguments) {
  for (size_t i = 1; i < arguments.size(); ++i) {
    StringRef argument = arguments[i];
    if (!argument.consume_front("--threads") &&
        !argument.consume_front("-threads"))
      continue;
    size_t count = 1;
    if (argument.empty() && i + 1 < arguments.size()) {
      argument = arguments[i + 1];
      count = 2;
    } else if (!argument.consume_front("=")) {
      continue;
    }
    if (argument.getAsInteger(10, threadCount) || threadCount <= 0)
      return fail("--threads " + argument +
                  ": expected a positive number of threads"),
             false;
    arguments.erase(arguments.begin() + i, arguments.begin() + i + count);
    --i;
  }
  return true;
}

int main(int argc, char **argv) {
  ::energy::setLogHandler(::energy::printLogToStderr);
  InitLLVM init(argc, argv);
  // mpirun -np R energy-run ... --shard DIM: every process joins the group
  // first (MPI may take its own arguments out of argv).
  std::unique_ptr<::energy::Communicator> group;
  if (std::string error =
          ::energy::tools::joinLaunchedGroup(argc, argv, "energy-run", group);
      !error.empty())
    return fail(error);
  setFailureGroup(group.get());
  SmallVector<const char *> arguments(argv, argv + argc);
  if (!takeThreadsOption(arguments))
    return 1;
  argc = arguments.size();
  argv = const_cast<char **>(arguments.data());
  cl::HideUnrelatedOptions(runOptions);
  cl::ParseCommandLineOptions(
      argc, argv,
      "energy-run: evaluates an energy model's energy and gradients, or runs "
      "its dynamics\n");
  if (llvm::Error error = mlir::energy::loadPlugins(
          std::vector<std::string>(plugins.begin(), plugins.end())))
    return fail(toString(std::move(error)));
  if (!deviceOption.empty() && deviceOption != "cpu" && deviceOption != "cuda")
    return fail("--device " + deviceOption + ": expected cpu or cuda");
  if (deviceOption == "cuda") {
    if (useInterpreter)
      return fail("--device cuda runs compiled kernels; the interpreter "
                  "runs on the CPU");
    // The driver is opened only now, so that energy-run starts anywhere.
    ::energy::Expected<::energy::CudaDevice> device =
        ::energy::openCudaDevice(0);
    if (!device)
      return fail("--device cuda: " + device.message());
  }
  if (group && shardDim.empty())
    return fail("started as one of " + Twine(group->size()) +
                " processes by an MPI launcher: give --shard DIM to spread a "
                "dim of the model over them");
  if (!shardDim.empty()) {
    if (useInterpreter || checkAgainstInterpreter || printManifest ||
        !plotFile.empty() || !plotAttentionArgs.empty() ||
        deviceOption == "cuda")
      return fail("--shard evaluates a compiled model on the CPU; it takes "
                  "no --interp, --check, --print-manifest, --plot, "
                  "--plot-attention or --device cuda");
  }
  if (shardRing && shardDim.empty())
    return fail("--ring needs --shard DIM");
  RunSettings settings = settingsFromOptions();
  RunInputs inputs;
  if (!initSpec.empty()) {
    uint64_t value;
    StringRef spec(initSpec);
    if (!spec.consume_front("random:") || spec.getAsInteger(10, value))
      return fail("--init " + initSpec + ": expected random:SEED");
    inputs.seed = value;
  }
  if (!dtypeOption.empty() && dtypeOption != "f32" && dtypeOption != "f64" &&
      dtypeOption != "bf16")
    return fail("--dtype " + dtypeOption + ": expected f32, f64 or bf16");
  if (dtypeOption == "bf16" && deviceOption != "cuda")
    return fail("--dtype bf16 needs --device cuda (bf16 products run on "
                "tensor cores)");
  if ((!plotFile.empty() || !plotAttentionArgs.empty()) &&
      (useInterpreter || evalKind != EvalKind::Run ||
       benchRepetitions.getNumOccurrences()))
    return fail(std::string(plotFile.empty() ? "--plot-attention" : "--plot") +
                " draws a compiled run: use it with --eval run, without "
                "--interp or --bench");
  if (benchRepetitions.getNumOccurrences()) {
    if (benchRepetitions < 1)
      return fail("--bench " + Twine(benchRepetitions) +
                  ": expected a positive number of repetitions");
    if (!outputFile.empty())
      return fail("--bench times the evaluation and writes no results; it "
                  "cannot be used with --out");
    if (trace)
      return fail("--bench prints only timings; it cannot be used with "
                  "--trace");
  }
  if (printManifest && useInterpreter && !StringRef(modelFile).ends_with(".so"))
    return fail("--print-manifest needs a compiled model; the interpreter "
                "has no manifest");
  auto dims = parseSettings<int64_t>(dimValues, "dim");
  auto consts = parseSettings<double>(constValues, "const");
  if (failed(dims) || failed(consts))
    return 1;
  inputs.dims = *dims;
  inputs.consts = *consts;
  // A sharded run reads its rows of the files itself.
  if (shardDim.empty()) {
    FailureOr<RuntimeTensors> tensors = readInputs(inputFiles);
    if (failed(tensors))
      return 1;
    inputs.tensors = std::move(*tensors);
  } else {
    inputs.files.assign(inputFiles.begin(), inputFiles.end());
  }
  if (auto it = inputs.tensors.find(kStepTensor); it != inputs.tensors.end()) {
    if (it->second.elementCount() != 1 || it->second.at(0) < 0)
      return fail("--in: 'step' must be a scalar step count");
    inputs.step = static_cast<int64_t>(it->second.at(0));
    inputs.tensors.erase(it);
  }

  // The source: the .energy file, or the one an artifact embeds. A file
  // that is neither is refused in one line, before it is loaded or parsed.
  ::energy::Expected<::energy::ModelFileKind> kind =
      ::energy::identifyModelFile(
          modelFile, ::energy::AcceptedModelFiles::SourceOrArtifact);
  if (!kind)
    return fail(kind.message());
  SourceMgr sourceMgr;
  bool isArtifact = *kind == ::energy::ModelFileKind::Artifact;
  std::optional<::energy::Model> artifact;
  if (isArtifact && !shardDim.empty())
    return fail("--shard " + shardDim +
                " rewrites the model's source: give "
                "the .energy file, not the artifact " +
                modelFile);
  if (isArtifact) {
    ::energy::Expected<::energy::Model> loaded =
        ::energy::Model::load(modelFile);
    if (!loaded)
      return fail(loaded.message());
    artifact = std::move(*loaded);
    if (printManifest)
      return printManifestOf(*artifact);
    std::string compiledFor = artifact->device();
    if (!useInterpreter && !deviceOption.empty() && deviceOption != compiledFor)
      return fail(modelFile + " is compiled for " + compiledFor +
                  ", not --device " + deviceOption +
                  " (compile it with energyc --target " + deviceOption + ")");
    // --check compiles the source and checks that build, not this one.
    if (checkAgainstInterpreter)
      return fail("--check compiles the model's source and checks it against "
                  "the interpreter: give the .energy file, not the artifact " +
                  modelFile + " (it was compiled from " +
                  artifact->sourceName() + ")");
    if (!useInterpreter)
      return runCompiled(*artifact, inputs, settings);
    sourceMgr.AddNewSourceBuffer(
        MemoryBuffer::getMemBufferCopy(artifact->source(),
                                       artifact->sourceName()),
        SMLoc());
  } else {
    ErrorOr<std::unique_ptr<MemoryBuffer>> file =
        MemoryBuffer::getFileOrSTDIN(modelFile);
    if (!file)
      return fail("cannot read " + modelFile + ": " +
                  file.getError().message());
    sourceMgr.AddNewSourceBuffer(std::move(*file), SMLoc());
  }

  // --shard: the model this rank evaluates, as a second buffer.
  unsigned buffer = sourceMgr.getMainFileID(), blockBuffer = 0;
  std::optional<fe::ShardedModel> sharded;
  if (!shardDim.empty()) {
    fe::DiagnosticEngine diagnostics(sourceMgr);
    sharded = fe::shardSourceBuffer(sourceMgr, buffer, shardDim,
                                    group ? group->size() : 1, diagnostics,
                                    buffer, shardRing, &blockBuffer);
    if (!sharded)
      return 1;
  }
  MLIRContext context;
  context.loadDialect<EnergyDialect, arith::ArithDialect>();
  context.printOpOnDiagnostic(false);
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module =
      emitModel(context, sourceMgr, buffer, sharded.has_value());
  if (!module)
    return 1;

  if (checkDeviceLoops && !checkAgainstInterpreter)
    return fail("--device-loops goes with --check (energyc --device-loops "
                "compiles an artifact with them)");
  if (checkAgainstInterpreter) {
    if (useInterpreter || benchRepetitions > 0 || !outputFile.empty() ||
        !inputs.tensors.empty())
      return fail("--check takes no --interp, --bench, --out or --in: it "
                  "binds its own values (--init random:SEED)");
    ModelCheckOptions check;
    check.dims = inputs.dims;
    check.consts = inputs.consts;
    check.seed = inputs.seed.value_or(1);
    check.steps = settings.stepsOption();
    check.optLevel = jitOptLevel;
    check.deviceLoops = checkDeviceLoops;
    if (!dtypeOption.empty())
      check.dtype = dtypeOption;
    if (check.dtype == "bf16")
      return fail("--check --dtype bf16: the check runs on the CPU, in f64 "
                  "or f32");
    check.sourceName = modelFile;
    check.sourceText =
        sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())->getBuffer().str();
    check.json = jsonOutput;
    return checkModel(*module, check);
  }

  if (!useInterpreter) {
    // Compiles the module of `bufferId` in process: the model, the rank's
    // model of a sharded run, or (`ringBlock`) a ring's block model.
    auto compile = [&](ModuleOp compiledModule, unsigned bufferId,
                       bool suppliedGradients,
                       bool ringBlock) -> std::optional<::energy::Model> {
      ArtifactOptions options;
      options.dtype = dtypeOption.empty() ? "f32" : dtypeOption.getValue();
      options.sourceName = modelFile;
      options.sourceText = sourceMgr.getMemoryBuffer(bufferId)->getBuffer();
      if (deviceOption == "cuda")
        options.target = withCudaDevice(options.target);
      // The rank's copies are set between kernels; a sharded run's steps
      // read the gradient the ranks put together.
      if (sharded) {
        options.shardedRank =
            ::energy::tools::shardedRankOf(*sharded, ringBlock);
        options.shardedRank->suppliedGradients = suppliedGradients;
      }
      options.optLevel = jitOptLevel;
      std::string error;
      FailureOr<JitArtifact> compiled =
          compileModelInProcess(compiledModule, options, error);
      if (failed(compiled)) {
        if (!error.empty())
          fail("compiling " + modelFile + ": " + error);
        return std::nullopt;
      }
      ::energy::Expected<::energy::Model> jitModel =
          ::energy::Model::fromSymbols(modelFile, compiled->lookup,
                                       compiled->handle);
      if (!jitModel)
        return fail(jitModel.message()), std::nullopt;
      return std::move(*jitModel);
    };
    // The kernels are planned at the sizes of the run (not for --check,
    // which checks the model's own plan, nor for a rank's rows, which are
    // not the model's sizes); what cannot be set, the run reports.
    if (!sharded && failed(setDimDefaults(*module, runSizes(*module, inputs),
                                          UnsetDims::Skipped)))
      return 1;
    std::optional<::energy::Model> jitModel =
        compile(*module, buffer,
                evalKind == EvalKind::Run || evalKind == EvalKind::LossGrad,
                /*ringBlock=*/false);
    if (!jitModel)
      return 1;
    if (printManifest)
      return printManifestOf(*jitModel);
    if (sharded) {
      std::optional<::energy::Model> blockModel;
      if (sharded->ring) {
        OwningOpRef<ModuleOp> blockModule =
            emitModel(context, sourceMgr, blockBuffer, /*sharded=*/true);
        if (!blockModule)
          return 1;
        // A loss's gradient through the run takes the sites' part of each
        // backward step from the block model's.
        blockModel =
            compile(*blockModule, blockBuffer,
                    /*suppliedGradients=*/evalKind == EvalKind::LossGrad,
                    /*ringBlock=*/true);
        if (!blockModel)
          return 1;
      }
      std::unique_ptr<::energy::Communicator> alone;
      if (!group)
        alone = ::energy::makeSingleProcessCommunicator();
      return runSharded(*jitModel, shardLayoutOf(*sharded), inputs, settings,
                        group ? *group : *alone,
                        blockModel ? &*blockModel : nullptr);
    }
    return runCompiled(*jitModel, inputs, settings);
  }

  PassManager passes(&context, ModuleOp::getOperationName());
  buildUpdatePipeline(passes.nest<ModelOp>(),
                      std::vector<std::string>(wrt.begin(), wrt.end()));
  reportCrashesByPass(passes);
  if (failed(guardCompilation("the pass pipeline", module->getLoc(),
                              [&] { return passes.run(*module); })))
    return 1;
  return runInterpreted(*module->getOps<ModelOp>().begin(), inputs, settings);
}
