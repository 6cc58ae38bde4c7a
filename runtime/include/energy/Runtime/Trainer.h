//===- Trainer.h - Minibatch training of a model's params -------*- C++ -*-===//
//
// Trains a model with a loss: per minibatch, the data tensors' rows are
// bound, the state is reset, the losses are differentiated through the run
// (Session::backward) and every param is updated by a ParamOptimizer.
// Checkpoints hold everything a run depends on, so a resumed run equals an
// uninterrupted one.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_TRAINER_H
#define ENERGY_RUNTIME_TRAINER_H

#include "energy/Runtime/Communicator.h"
#include "energy/Runtime/Model.h"
#include "energy/Runtime/ParamOptimizer.h"
#include "energy/Runtime/Session.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace energy {

/// Examples: model tensor name → value whose first axis indexes examples
/// (the model declares that axis with one dim, the batch dim, which every
/// data tensor shares).
using TrainData = std::map<std::string, Tensor>;

struct TrainOptions {
  /// Examples per update; 0 takes every example at once. A last batch that
  /// would be smaller is left out of the epoch (the model's batch dim has
  /// one value per session).
  int64_t batchSize = 0;
  int64_t epochs = 1;
  /// Visit the examples in a new random order each epoch, drawn from
  /// `seed` and the epoch's number (so a resumed run draws the same).
  bool shuffle = true;
  uint64_t seed = 0;
  std::string optimizer = "adam";
  ParamOptimizerOptions optimizerOptions;
  /// Its `total` is set to the run's number of updates.
  LearningRateSchedule schedule;
  BackwardOptions backward;
  /// The params to train; every param of the model when empty.
  std::vector<std::string> params;
  /// What every session starts from (dims, consts, seed of initialisers);
  /// the batch dim is set by the trainer.
  SessionOptions session;
  /// Tensors bound in every session before training (fixed inputs, initial
  /// params).
  std::map<std::string, Tensor> fixed;
  /// Data-parallel training in a group of processes (null: this one
  /// alone): every process runs the same trainer on the same data; each
  /// takes a contiguous shard of every batch (shardOf), and the shards'
  /// losses and gradients, weighted by their examples as the loss is a
  /// mean over the batch, are summed in rank order (allReduceSum), so that
  /// every rank takes the same update. Not owned.
  Communicator *communicator = nullptr;
};

/// After each update.
struct TrainProgress {
  int64_t update = 0, updates = 0;
  int64_t epoch = 0, epochs = 0;
  int64_t batch = 0, batches = 0;
  double loss = 0;
  /// The mean loss of the epoch's updates so far.
  double runningLoss = 0;
  double learningRate = 0;
  double examplesPerSecond = 0;
};

/// After each epoch.
struct EpochSummary {
  int64_t epoch = 0;
  /// The mean loss of the epoch's updates.
  double trainLoss = 0;
  /// The loss on the validation data (the mean over its examples' batches,
  /// weighted by examples), when there is validation data.
  std::optional<double> validationLoss;
  double seconds = 0;
};

class Trainer {
public:
  /// Checks the data against the model (tensors, shapes, the shared batch
  /// dim, equal example counts) and the options, and creates the sessions.
  /// Errors name the tensor, its declared and given shapes.
  static Expected<std::unique_ptr<Trainer>>
  create(const Model &model, TrainData data, TrainOptions options,
         std::optional<TrainData> validation = std::nullopt);

  /// Runs one update (the next batch); false once every epoch is done.
  Expected<bool> step(TrainProgress &progress);
  /// Runs the updates left in the current epoch, calling `onUpdate` after
  /// each, then the validation; the summary of that epoch.
  Expected<EpochSummary>
  runEpoch(const std::function<void(const TrainProgress &)> &onUpdate = {});
  /// The loss on the validation data with the current params.
  Expected<double> validationLoss();

  bool finished() const { return position.epoch >= options.epochs; }
  int64_t updatesDone() const { return position.update; }
  int64_t updatesPerEpoch() const { return batchesPerEpoch; }
  /// The batch dim and its value.
  const std::string &batchDim() const { return batchDimName; }
  int64_t batchSize() const { return options.batchSize; }
  /// The trained params' current values.
  Expected<std::map<std::string, Tensor>> params();

  /// Writes the params, the optimiser's state and the position in the run
  /// (update, epoch, batch, the epoch's losses so far, seed) as one
  /// safetensors file; loadCheckpoint restores them, after which the run
  /// goes on exactly as it would have.
  Status saveCheckpoint(const std::string &path);
  Status loadCheckpoint(const std::string &path);

private:
  Trainer(TrainOptions options) : options(std::move(options)) {}
  struct Position {
    int64_t update = 0, epoch = 0, batch = 0;
    double lossSum = 0;
  };
  /// The example order of `epoch`.
  std::vector<int64_t> order(int64_t epoch) const;
  /// Binds rows `rows` of `data` into `session`.
  Status bindBatch(Session &session, const TrainData &data,
                   const std::vector<int64_t> &rows);
  /// The batch's loss and gradients from this rank's shard's: summed over
  /// the ranks, each weighted by its share of the batch.
  Status reduceOverShards(double &loss,
                          std::map<std::string, Tensor> &gradients);
  /// A session with batch dim `size`, the fixed tensors bound.
  Expected<std::unique_ptr<Session>> makeSession(int64_t size);

  std::optional<Model> model;
  TrainOptions options;
  TrainData data;
  std::optional<TrainData> validation;
  std::string batchDimName;
  int64_t examples = 0, batchesPerEpoch = 0;
  std::unique_ptr<Session> session;
  /// This rank's rows of a batch: [shardBegin, shardEnd).
  int64_t shardBegin = 0, shardEnd = 0;
  std::unique_ptr<ParamOptimizer> optimizer;
  Position position;
  std::vector<int64_t> epochOrder;
  int64_t orderEpoch = -1;
  std::chrono::steady_clock::time_point epochStart;
};

} // namespace energy

#endif // ENERGY_RUNTIME_TRAINER_H
