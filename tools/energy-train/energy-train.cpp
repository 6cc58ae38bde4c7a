//===- energy-train.cpp - Trains a compiled model's params ----------------===//
//
// energy-train ARTIFACT.so --data FILE.safetensors [--val FILE] [--batch B]
//   [--epochs E] [--optimizer sgd|momentum|adam|adamw|NAME] [--plugin LIB]
//   [--lr X] [--schedule constant|cosine|step] ... [--checkpoint FILE]
//   [--resume FILE] [--out FILE] [--log FILE.csv] [--plot FILE.svg|.png]
// minibatch training of the params of a model with a loss (energy::Trainer):
// a progress bar with the running loss and throughput, checkpoints that
// resume exactly, the loss curves as CSV and as a picture.
//
//===----------------------------------------------------------------------===//

#include "Charts.h"

#include "CommandLineValues.h"
#include "LaunchedGroup.h"

#include "energy/Runtime/Communicator.h"
#include "energy/Runtime/Log.h"
#include "energy/Runtime/Model.h"
#include "energy/Runtime/ParamOptimizer.h"
#include "energy/Runtime/Safetensors.h"
#include "energy/Runtime/Trainer.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

using namespace energy;
using energy::tools::integerOf;
using energy::tools::numberOf;
using energy::tools::readSetting;

namespace {

/// The processes of a data-parallel run (mpirun -np R energy-train ...);
/// null when this one trains alone.
std::unique_ptr<energy::Communicator> group;

/// Reports `message`; in a data-parallel run names the rank and ends every
/// process, so that none waits for this one.
int fail(const std::string &message) {
  if (group)
    energy::tools::abortGroup(*group, "energy-train", message);
  std::fprintf(stderr, "energy-train: error: %s\n", message.c_str());
  return 1;
}

const char *kUsage =
    R"(usage: energy-train ARTIFACT.so --data FILE.safetensors [options]

Trains the params of a compiled model with a loss: for each minibatch of the
data (tensors named as the model's inputs or states, examples along their
first axis, the model's batch dim), the dynamics run, the losses are
differentiated through the run, and the params are updated.

  --data FILE            training examples (safetensors)
  --val FILE             validation examples: the loss after every epoch
  --batch B              examples per update (default: all)
  --epochs E             passes over the data (default 1)
  --optimizer NAME       sgd, momentum, adam (default), adamw, or a plugin's
  --plugin LIB           load the parameter optimisers of a plugin's run-time
                         library (repeatable; a bare file name is looked for
                         in ENERGY_PLUGIN_PATH first)
  --lr X                 learning rate (default 1e-3)
  --momentum X           momentum's coefficient (default 0.9)
  --beta1 X --beta2 X --eps X   Adam's (defaults 0.9, 0.999, 1e-8)
  --weight-decay X       L2 (sgd, momentum, adam) or decoupled (adamw)
  --schedule KIND        constant (default), cosine or step
  --lr-min X             cosine's final rate (default 0)
  --step-size N --gamma X   step's period in updates and factor (1000, 0.1)
  --steps K              dynamics steps per example (default: the model's)
  --store-all-steps      keep every step for the backward pass
                         (default: checkpoints every sqrt(steps) steps)
  --seed S               shuffling and initialisers (default 0)
  --no-shuffle           visit the examples in order
  --dim NAME=V, --const NAME=V, --in FILE   as energy-exec: dims, consts,
                         fixed tensors and initial params
  --checkpoint FILE      write a checkpoint after every epoch ({epoch} in
                         FILE becomes the epoch's number)
  --resume FILE          go on from a checkpoint (same data and options)
  --out FILE             write the trained params (safetensors)
  --log FILE.csv         the loss of every update and each epoch's
                         validation loss
  --plot FILE            draw the loss curves (.svg or .png)
  --quiet                no progress output
)";

struct Options {
  std::string artifact, data, validation, checkpoint, resume, out, log, plot;
  std::vector<std::string> inputs, plugins;
  TrainOptions train;
  bool quiet = false;
};

/// Parses the command line; an error message, "help", or "".
std::string parse(int argc, char **argv, Options &options) {
  TrainOptions &train = options.train;
  for (int i = 1; i < argc; ++i) {
    std::string argument = argv[i];
    if (argument.rfind("--", 0) != 0) {
      if (!options.artifact.empty())
        return "more than one model: " + options.artifact + ", " + argument;
      options.artifact = argument;
      continue;
    }
    std::string name = argument.substr(2), value;
    bool flag = name == "help" || name == "quiet" || name == "no-shuffle" ||
                name == "store-all-steps";
    if (size_t equals = name.find('='); equals != std::string::npos) {
      value = name.substr(equals + 1);
      name = name.substr(0, equals);
    } else if (!flag) {
      if (i + 1 >= argc)
        return "--" + name + " needs a value";
      value = argv[++i];
    }
    auto number = [&](double &into, bool positive) -> std::string {
      std::optional<double> parsed = numberOf(value);
      if (!parsed || (positive ? *parsed <= 0 : *parsed < 0))
        return "--" + name + " " + value + ": expected a " +
               (positive ? "positive" : "non-negative") + " number";
      into = *parsed;
      return "";
    };
    auto count = [&](int64_t &into, bool positive) -> std::string {
      std::optional<int64_t> parsed = integerOf(value);
      if (!parsed || (positive ? *parsed <= 0 : *parsed < 0))
        return "--" + name + " " + value + ": expected a " +
               (positive ? "positive" : "non-negative") + " whole number";
      into = *parsed;
      return "";
    };
    auto setting = [&](auto parse, auto &into) {
      return readSetting(name, value, parse, into);
    };
    std::string error;
    if (name == "help")
      return "help";
    else if (name == "quiet")
      options.quiet = true;
    else if (name == "no-shuffle")
      train.shuffle = false;
    else if (name == "store-all-steps")
      train.backward.storage = BackpropStorage::Full;
    else if (name == "data")
      options.data = value;
    else if (name == "val")
      options.validation = value;
    else if (name == "checkpoint")
      options.checkpoint = value;
    else if (name == "resume")
      options.resume = value;
    else if (name == "out")
      options.out = value;
    else if (name == "log")
      options.log = value;
    else if (name == "plot")
      options.plot = value;
    else if (name == "in")
      options.inputs.push_back(value);
    else if (name == "plugin")
      options.plugins.push_back(value);
    else if (name == "optimizer")
      train.optimizer = value;
    else if (name == "schedule")
      train.schedule.kind = value;
    else if (name == "batch")
      error = count(train.batchSize, true);
    else if (name == "epochs")
      error = count(train.epochs, false);
    else if (name == "step-size")
      error = count(train.schedule.stepSize, true);
    else if (name == "steps") {
      int64_t steps = 0;
      error = count(steps, false);
      train.backward.steps = steps;
    } else if (name == "seed") {
      int64_t seed = 0;
      error = count(seed, false);
      train.seed = static_cast<uint64_t>(seed);
      train.session.seed = train.seed;
    } else if (name == "lr")
      error = number(train.schedule.lr, true);
    else if (name == "lr-min")
      error = number(train.schedule.lrMin, false);
    else if (name == "gamma")
      error = number(train.schedule.gamma, true);
    else if (name == "momentum")
      error = number(train.optimizerOptions.momentum, false);
    else if (name == "beta1")
      error = number(train.optimizerOptions.beta1, false);
    else if (name == "beta2")
      error = number(train.optimizerOptions.beta2, false);
    else if (name == "eps")
      error = number(train.optimizerOptions.eps, true);
    else if (name == "weight-decay")
      error = number(train.optimizerOptions.weightDecay, false);
    else if (name == "dim")
      error = setting(integerOf, train.session.dims);
    else if (name == "const")
      error = setting(numberOf, train.session.consts);
    else
      return "unknown option --" + name;
    if (!error.empty())
      return error;
  }
  if (options.artifact.empty())
    return "no model given";
  if (options.data.empty())
    return "no training data given (--data FILE.safetensors)";
  return "";
}

Expected<TrainData> readTensors(const std::string &path) {
  Expected<SafetensorsContents> contents = readSafetensors(path);
  if (!contents)
    return contents.status();
  return std::move(contents->tensors);
}

/// The progress line on stderr: redrawn in place on a terminal, otherwise a
/// line every tenth of an epoch.
class ProgressBar {
public:
  explicit ProgressBar(bool quiet)
      : quiet(quiet), terminal(isatty(STDERR_FILENO)) {}

  void update(const TrainProgress &progress) {
    if (quiet)
      return;
    auto now = std::chrono::steady_clock::now();
    bool last = progress.batch == progress.batches;
    if (terminal) {
      if (!last && now - drawn < std::chrono::milliseconds(100))
        return;
    } else {
      int64_t tenth = progress.batch * 10 / progress.batches;
      if (!last && tenth == printedTenth)
        return;
      printedTenth = tenth;
    }
    drawn = now;
    constexpr int kWidth = 24;
    int filled = static_cast<int>(kWidth * progress.batch / progress.batches);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr,
                 "%sepoch %lld/%lld [%s] %lld/%lld  loss %.4g (running %.4g)  "
                 "lr %.3g  %.1f examples/s%s",
                 terminal ? "\r" : "", static_cast<long long>(progress.epoch),
                 static_cast<long long>(progress.epochs), bar.c_str(),
                 static_cast<long long>(progress.batch),
                 static_cast<long long>(progress.batches), progress.loss,
                 progress.runningLoss, progress.learningRate,
                 progress.examplesPerSecond, terminal ? "" : "\n");
    if (terminal && last)
      std::fputc('\n', stderr);
    std::fflush(stderr);
  }

  void epoch(const EpochSummary &summary) {
    if (quiet)
      return;
    std::fprintf(stderr, "epoch %lld: train loss %.6g",
                 (long long)summary.epoch, summary.trainLoss);
    if (summary.validationLoss)
      std::fprintf(stderr, ", validation loss %.6g", *summary.validationLoss);
    std::fprintf(stderr, " (%.1f s)\n", summary.seconds);
  }

private:
  bool quiet, terminal;
  std::chrono::steady_clock::time_point drawn;
  int64_t printedTenth = -1;
};

/// The loss curves: every update's loss, and each epoch's means.
struct Curves {
  std::vector<double> updates, losses, running;
  std::vector<double> epochEnds, trainMeans, validation;
  std::vector<std::string> csvRows;

  void record(const TrainProgress &progress) {
    updates.push_back(static_cast<double>(progress.update));
    losses.push_back(progress.loss);
    running.push_back(progress.runningLoss);
    char row[256];
    std::snprintf(row, sizeof row, "%lld,%lld,%lld,%.17g,%.17g,%.17g,%.6g,",
                  (long long)progress.update, (long long)progress.epoch,
                  (long long)progress.batch, progress.loss,
                  progress.runningLoss, progress.learningRate,
                  progress.examplesPerSecond);
    csvRows.push_back(row);
  }

  void record(const EpochSummary &summary, int64_t update) {
    epochEnds.push_back(static_cast<double>(update));
    trainMeans.push_back(summary.trainLoss);
    if (summary.validationLoss) {
      validation.push_back(*summary.validationLoss);
      if (!csvRows.empty()) {
        char value[40];
        std::snprintf(value, sizeof value, "%.17g", *summary.validationLoss);
        csvRows.back() += value;
      }
    }
  }

  Status writeCsv(const std::string &path) const {
    std::ofstream file(path);
    if (!file)
      return Status::error("cannot write " + path);
    file << "update,epoch,batch,loss,running_loss,learning_rate,examples_per_"
            "second,validation_loss\n";
    for (const std::string &row : csvRows)
      file << row << "\n";
    if (!file)
      return Status::error("cannot write " + path);
    return Status::success();
  }

  Status draw(const std::string &path, const std::string &model) const {
    charts::Panel panel;
    panel.title = "training " + model;
    panel.xLabel = "update";
    panel.yLabel = "loss";
    panel.series.push_back({"loss per update", updates, losses});
    panel.series.push_back({"epoch's running mean", updates, running});
    if (!validation.empty())
      panel.series.push_back(
          {"validation (end of epoch)", epochEnds, validation});
    std::string error;
    if (!charts::writeLineCharts({panel}, path, error))
      return Status::error(error);
    return Status::success();
  }
};

} // namespace

int main(int argc, char **argv) {
  energy::setLogHandler(energy::printLogToStderr);
  if (std::string error =
          energy::tools::joinLaunchedGroup(argc, argv, "energy-train", group);
      !error.empty())
    return fail(error);
  Options options;
  if (std::string error = parse(argc, argv, options); !error.empty()) {
    if (error == "help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    std::fputs(kUsage, stderr);
    return fail(error);
  }
  for (const std::string &plugin : options.plugins)
    if (Expected<std::vector<std::string>> loaded =
            loadPluginParamOptimizers(plugin);
        !loaded)
      return fail("--plugin: " + loaded.message());
  if (options.artifact.size() > 7 &&
      options.artifact.substr(options.artifact.size() - 7) == ".energy")
    return fail(options.artifact +
                " is a model's source: compile it first (energyc " +
                options.artifact + " -o MODEL.so)");
  Expected<Model> model = Model::load(options.artifact);
  if (!model)
    return fail(model.message());
  Expected<TrainData> data = readTensors(options.data);
  if (!data)
    return fail(data.message());
  std::optional<TrainData> validation;
  if (!options.validation.empty()) {
    Expected<TrainData> read = readTensors(options.validation);
    if (!read)
      return fail(read.message());
    validation = std::move(*read);
  }
  for (const std::string &path : options.inputs) {
    Expected<TrainData> read = readTensors(path);
    if (!read)
      return fail(read.message());
    for (auto &[name, value] : *read)
      options.train.fixed[name] = std::move(value);
  }

  // Every rank trains on the same data and takes the same updates; rank 0
  // alone reports and writes files.
  bool leader = !group || group->rank() == 0;
  if (group) {
    options.train.communicator = group.get();
    if (!leader) {
      options.quiet = true;
      options.checkpoint.clear();
      options.out.clear();
      options.log.clear();
      options.plot.clear();
    }
  }
  Expected<std::unique_ptr<Trainer>> created = Trainer::create(
      *model, std::move(*data), options.train, std::move(validation));
  if (!created)
    return fail(created.message());
  Trainer &trainer = **created;
  if (!options.resume.empty())
    if (Status status = trainer.loadCheckpoint(options.resume); !status)
      return fail(status.message());
  if (!options.quiet)
    std::fprintf(stderr,
                 "energy-train: %s, %lld updates per epoch of batch %s = %lld, "
                 "optimizer %s%s\n",
                 model->name().c_str(), (long long)trainer.updatesPerEpoch(),
                 trainer.batchDim().c_str(), (long long)trainer.batchSize(),
                 options.train.optimizer.c_str(),
                 group ? (", data-parallel over " +
                          std::to_string(group->size()) + " processes")
                             .c_str()
                       : "");

  ProgressBar bar(options.quiet);
  Curves curves;
  while (!trainer.finished()) {
    Expected<EpochSummary> summary =
        trainer.runEpoch([&](const TrainProgress &progress) {
          bar.update(progress);
          curves.record(progress);
        });
    if (!summary)
      return fail(summary.message());
    bar.epoch(*summary);
    curves.record(*summary, trainer.updatesDone());
    if (!options.checkpoint.empty()) {
      std::string path = options.checkpoint;
      if (size_t at = path.find("{epoch}"); at != std::string::npos)
        path.replace(at, 7, std::to_string(summary->epoch));
      if (Status status = trainer.saveCheckpoint(path); !status)
        return fail(status.message());
    }
  }
  if (!options.out.empty()) {
    Expected<std::map<std::string, Tensor>> params = trainer.params();
    if (!params)
      return fail(params.message());
    if (Status status = writeSafetensors(options.out, *params); !status)
      return fail(status.message());
  }
  if (!options.log.empty())
    if (Status status = curves.writeCsv(options.log); !status)
      return fail(status.message());
  if (!options.plot.empty() && !curves.updates.empty())
    if (Status status = curves.draw(options.plot, model->name()); !status)
      return fail(status.message());
  if (leader)
    std::printf("trained %lld updates; final epoch's train loss %.6g\n",
                (long long)trainer.updatesDone(),
                curves.trainMeans.empty() ? 0.0 : curves.trainMeans.back());
  group.reset();
  return 0;
}
