//===- RunSharded.cpp - energy-run --shard: one rank of a sharded run -----===//
//
// Reads the rank's rows of the inputs, evaluates collectively, and
// reports from rank 0 only (the other ranks' standard output is discarded).
//
//===----------------------------------------------------------------------===//

#include "RunSharded.h"

#include "RunReport.h"

#include "energy/Runtime/Manifest.h"
#include "energy/Runtime/Safetensors.h"

#include <fcntl.h>
#include <unistd.h>

using namespace mlir::energy::tools;

namespace {
using Shapes = std::map<std::string, std::vector<int64_t>>;

/// The length of the sharded dim: --dim, else the first tensor of the
/// files (their shapes `shapes`) with an axis of it.
std::optional<int64_t> shardedLength(const ::energy::ShardLayout &layout,
                                     const RunInputs &inputs,
                                     const Shapes &shapes) {
  for (const auto &[name, value] : inputs.dims)
    if (name == layout.dim)
      return value;
  for (const ::energy::ShardLayout::ShardedTensor &tensor : layout.tensors)
    if (auto it = shapes.find(tensor.name);
        it != shapes.end() && it->second.size() > tensor.axis)
      return it->second[tensor.axis];
  return std::nullopt;
}
} // namespace

::energy::ShardLayout mlir::energy::tools::shardLayoutOf(
    const ::energy::frontend::ShardedModel &sharded) {
  ::energy::ShardLayout layout;
  layout.dim = sharded.dim;
  layout.wholeDim = sharded.wholeDim;
  layout.offsetDim = sharded.offsetDim;
  layout.stride = sharded.stride;
  layout.firstRankConst = sharded.firstRankConst;
  for (const ::energy::frontend::ShardedTensor &tensor : sharded.tensors)
    layout.tensors.push_back({tensor.name, tensor.gathered, tensor.axis});
  if (sharded.ring) {
    ::energy::ShardLayout::Ring &ring = layout.ring.emplace();
    ring.blockDim = sharded.ring->blockDim;
    ring.blockOffsetDim = sharded.ring->blockOffsetDim;
    for (const ::energy::frontend::RingSite &site : sharded.ring->sites)
      ring.sites.push_back({site.merged, site.partial, site.count, site.weight,
                            site.probe, site.scale});
  }
  return layout;
}

int mlir::energy::tools::runSharded(const ::energy::Model &rankModel,
                                    const ::energy::ShardLayout &layout,
                                    const RunInputs &inputs,
                                    const RunSettings &settings,
                                    ::energy::Communicator &group,
                                    const ::energy::Model *blockModel) {
  RunSettings rankSettings = settings;
  if (group.rank() != 0) {
    // Rank 0 reports and writes; the others compute.
    int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) {
      ::dup2(null, STDOUT_FILENO);
      ::close(null);
    }
    rankSettings.outputFile.clear();
  }
  if (settings.threads > 0) {
    rankModel.setThreads(settings.threads);
    if (blockModel)
      blockModel->setThreads(settings.threads);
  }
  if (inputs.seed && group.size() > 1)
    return fail("--shard " + layout.dim + " on " +
                std::to_string(group.size()) +
                " processes: --init random would draw each rank's values "
                "apart from the others; bind the tensors with --in");
  // The files' headers first (the length), then each rank reads its rows
  // of the sharded tensors and the others whole.
  Shapes shapes;
  std::vector<Shapes> shapesOfFile;
  for (const std::string &file : inputs.files) {
    ::energy::Expected<Shapes> read = ::energy::readSafetensorsShapes(file);
    if (!read)
      return fail(read.message());
    for (const auto &[name, shape] : *read)
      if (name != kStepTensor && !shapes.emplace(name, shape).second)
        return fail("--in: tensor '" + name + "' is given twice");
    shapesOfFile.push_back(std::move(*read));
  }
  std::optional<int64_t> length = shardedLength(layout, inputs, shapes);
  if (!length)
    return fail("--shard " + layout.dim + ": give --dim " + layout.dim +
                "=LENGTH, or bind a tensor with an axis of " + layout.dim);
  ::energy::SessionOptions options;
  for (const auto &[name, value] : inputs.dims)
    if (name != layout.dim)
      options.dims[name] = value;
  for (const auto &[name, value] : inputs.consts)
    options.consts[name] = value;
  options.seed = inputs.seed;
  ::energy::Expected<::energy::ShardedSession> created =
      ::energy::ShardedSession::create(rankModel, layout, *length, options,
                                       group, blockModel);
  if (!created)
    return fail(created.message());
  ::energy::ShardedSession &session = *created;
  for (size_t file = 0; file < inputs.files.size(); ++file) {
    ::energy::Expected<std::map<std::string, ::energy::SafetensorsRows>> rows =
        session.rowsOf(shapesOfFile[file]);
    if (!rows)
      return fail(rows.message());
    ::energy::Expected<::energy::SafetensorsContents> contents =
        ::energy::readSafetensors(inputs.files[file], *rows);
    if (!contents)
      return fail(contents.message());
    for (const auto &[name, value] : contents->tensors) {
      if (name == kStepTensor)
        continue;
      ::energy::Status status = rows->count(name) ? session.setRows(name, value)
                                                  : session.set(name, value);
      if (!status)
        return fail(status.message());
    }
  }

  std::vector<std::string> gradients;
  for (const std::string &name :
       ::energy::gradientsToReport(rankModel.manifest(), rankSettings.wrt)) {
    bool copy = false;
    for (const ::energy::ShardLayout::ShardedTensor &tensor : layout.tensors)
      copy = copy || tensor.gathered == name;
    if (!copy)
      gradients.push_back(name);
  }
  auto evaluate = [&](RuntimeTensors *results, double *energy) {
    if (rankSettings.eval == EvalKind::Energy) {
      ::energy::Expected<double> value = session.energy();
      if (!value)
        return fail(value.message()), false;
      if (energy)
        *energy = *value;
      return true;
    }
    ::energy::Expected<std::vector<::energy::Tensor>> values =
        session.gradients(gradients);
    if (!values)
      return fail(values.message()), false;
    if (results)
      for (size_t i = 0; i < gradients.size(); ++i)
        results->emplace("grad." + gradients[i], std::move((*values)[i]));
    return true;
  };
  if (rankSettings.benchRepetitions > 0 && rankSettings.eval == EvalKind::Run)
    return fail("--bench with --shard times --eval energy, grad or loss-grad");
  ::energy::BackwardOptions backwardOptions;
  backwardOptions.steps = rankSettings.stepsOption();
  backwardOptions.storage = rankSettings.backwardStorage();
  if (rankSettings.eval == EvalKind::LossGrad &&
      rankSettings.benchRepetitions == 0) {
    ::energy::Expected<::energy::BackwardResult> result =
        session.backward(backwardOptions);
    if (!result)
      return fail(result.message());
    ::energy::tools::LossGradients gradients;
    gradients.steps = result->steps;
    gradients.losses = result->losses;
    // Every rank gathers (a collective); rank 0 reports.
    for (const std::string &name : session.adjointNames()) {
      ::energy::Expected<::energy::Tensor> adjoint = session.adjoint(name);
      if (!adjoint)
        return fail(adjoint.message());
      gradients.adjoints.emplace("adjoint." + name, std::move(*adjoint));
    }
    return reportLossGradients(rankSettings, gradients) ? 0 : 1;
  }
  if (rankSettings.benchRepetitions > 0) {
    bool timed = runBench(
        rankSettings,
        [&] {
          // Each evaluation gathers, as each step of a run would.
          session.invalidateCopies();
          return true;
        },
        [&] {
          // A backward run ends where it started.
          if (rankSettings.eval == EvalKind::LossGrad) {
            ::energy::Expected<::energy::BackwardResult> result =
                session.backward(backwardOptions);
            return result ? true : (fail(result.message()), false);
          }
          return evaluate(nullptr, nullptr);
        },
        [&] { return benchedEvaluation(rankSettings, std::nullopt); });
    // What each rank holds, on its standard error.
    if (timed)
      llvm::errs() << "energy-run: rank " << group.rank() << " of "
                   << group.size() << ": the sessions' buffers take "
                   << ::energy::byteCountText(session.bufferBytes()) << "\n";
    return timed ? 0 : 1;
  }
  if (rankSettings.eval == EvalKind::Run) {
    ::energy::Expected<int64_t> steps = session.run(rankSettings.stepsOption());
    if (!steps)
      return fail(steps.message());
    ::energy::Expected<double> energy = session.energy();
    if (!energy)
      return fail(energy.message());
    if (!settings.outputFile.empty()) {
      // Every rank gathers (a collective); rank 0 writes.
      RuntimeTensors states;
      for (const std::string &name : session.stateNames()) {
        ::energy::Expected<::energy::Tensor> value = session.get(name);
        if (!value)
          return fail(value.message());
        states.emplace(name, std::move(*value));
      }
      ::energy::Tensor step(::energy::DType::F64, {});
      step.set(0, static_cast<double>(*steps));
      states.emplace(kStepTensor, std::move(step));
      if (!rankSettings.outputFile.empty() &&
          !writeOutputs(rankSettings, states))
        return 1;
    }
    StepReporter(rankSettings).printSummary(*steps, *energy);
    return 0;
  }
  if (rankSettings.eval == EvalKind::Energy) {
    double energy = 0;
    if (!evaluate(nullptr, &energy))
      return 1;
    printEnergy(rankSettings, energy);
    return 0;
  }
  RuntimeTensors results;
  if (!evaluate(&results, nullptr))
    return 1;
  return reportGradients(rankSettings, results) ? 0 : 1;
}
