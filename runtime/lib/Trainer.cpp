//===- Trainer.cpp - Minibatch training of a model's params ---------------===//
//
// Batches, the update loop, validation and checkpoints of energy::Trainer.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Trainer.h"

#include "energy/Runtime/Safetensors.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <type_traits>

using namespace energy;

namespace {

std::string joined(const std::vector<std::string> &names) {
  std::string text;
  for (const std::string &name : names)
    text += (text.empty() ? "" : ", ") + name;
  return text.empty() ? "none" : text;
}

/// The dim an axis is declared with, when it is a single dim.
std::optional<std::string> plainDim(const DimExpr &axis) {
  const std::vector<DimExpr::Token> &tokens = axis.tokens();
  if (tokens.size() == 1 && tokens[0].kind == DimExpr::Token::Kind::Dim)
    return tokens[0].dim;
  return std::nullopt;
}

/// Checks `data` against the model and finds the batch dim and the number of
/// examples. `what` names the data ("data", "validation data").
Status checkData(const Manifest &manifest, const TrainData &data,
                 const std::string &what, std::string &batchDim,
                 int64_t &examples) {
  if (data.empty())
    return Status::error(what + " has no tensors");
  examples = -1;
  for (const auto &[name, value] : data) {
    std::optional<size_t> index = manifest.findBuffer(name);
    if (!index || manifest.buffers[*index].kind != BufferKind::Tensor)
      return Status::error(what + ": '" + name + "' is not a tensor of model " +
                           manifest.model);
    const ManifestBuffer &buffer = manifest.buffers[*index];
    if (buffer.role == TensorRole::Param)
      return Status::error(what + ": '" + name +
                           "' is a param: data are inputs or states");
    std::optional<std::string> dim =
        buffer.shape.empty() ? std::nullopt : plainDim(buffer.shape[0]);
    if (!dim)
      return Status::error(
          what + ": tensor '" + name + "' is declared " + buffer.shapeText() +
          ": data need a first axis declared with one dim (the batch dim)");
    if (value.rank() != static_cast<int64_t>(buffer.shape.size()))
      return Status::error(what + ": tensor '" + name + "' is declared " +
                           buffer.shapeText() + " but given " +
                           value.shapeString());
    if (batchDim.empty())
      batchDim = *dim;
    if (*dim != batchDim)
      return Status::error(what + ": tensor '" + name + "' has batch dim " +
                           *dim + " but the others " + batchDim +
                           ": every data tensor's first axis is the batch dim");
    if (examples >= 0 && value.shape()[0] != examples)
      return Status::error(what + ": tensor '" + name + "' has " +
                           std::to_string(value.shape()[0]) +
                           " examples but the others " +
                           std::to_string(examples));
    examples = value.shape()[0];
  }
  if (examples == 0)
    return Status::error(what + " has no examples");
  return Status::success();
}

std::string formatDouble(double value) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

} // namespace

Expected<std::unique_ptr<Trainer>>
Trainer::create(const Model &model, TrainData data, TrainOptions options,
                std::optional<TrainData> validation) {
  const Manifest &manifest = model.manifest();
  if (!manifest.kernels.backward)
    return Status::error("model " + model.name() +
                         " has no loss to train (declare one with `loss NAME "
                         "= ...;`)");
  std::unique_ptr<Trainer> trainer(new Trainer(std::move(options)));
  TrainOptions &opts = trainer->options;
  if (Status status = checkData(manifest, data, "the data",
                                trainer->batchDimName, trainer->examples);
      !status)
    return status;
  if (validation) {
    std::string dim;
    int64_t count = 0;
    if (Status status =
            checkData(manifest, *validation, "the validation data", dim, count);
        !status)
      return status;
    if (dim != trainer->batchDimName)
      return Status::error("the validation data's batch dim is " + dim +
                           " but the data's is " + trainer->batchDimName);
  }
  if (opts.batchSize < 0)
    return Status::error("the batch size is negative");
  if (opts.batchSize == 0)
    opts.batchSize = trainer->examples;
  if (opts.batchSize > trainer->examples)
    return Status::error("the batch size " + std::to_string(opts.batchSize) +
                         " is larger than the " +
                         std::to_string(trainer->examples) + " examples");
  if (opts.epochs < 0)
    return Status::error("the number of epochs is negative");
  if (opts.session.dims.count(trainer->batchDimName) &&
      opts.session.dims[trainer->batchDimName] != opts.batchSize)
    return Status::error("dim " + trainer->batchDimName +
                         " is the batch dim: it is set by the batch size");
  trainer->batchesPerEpoch = trainer->examples / opts.batchSize;

  std::vector<std::string> params;
  for (const ManifestBuffer &buffer : manifest.buffers)
    if (buffer.kind == BufferKind::Tensor && buffer.role == TensorRole::Param)
      params.push_back(buffer.name);
  if (opts.params.empty())
    opts.params = params;
  for (const std::string &name : opts.params)
    if (std::find(params.begin(), params.end(), name) == params.end())
      return Status::error("'" + name + "' is not a param of model " +
                           model.name() + " (its params: " + joined(params) +
                           ")");
  if (opts.params.empty())
    return Status::error("model " + model.name() + " has no params to train");

  opts.schedule.total =
      std::max<int64_t>(1, opts.epochs * trainer->batchesPerEpoch);
  if (Status status = opts.schedule.validate(); !status)
    return status.withContext("the learning-rate schedule");
  Expected<std::unique_ptr<ParamOptimizer>> optimizer =
      createParamOptimizer(opts.optimizer, opts.optimizerOptions);
  if (!optimizer)
    return optimizer.status();
  trainer->optimizer = std::move(*optimizer);
  trainer->model = model;
  trainer->data = std::move(data);
  trainer->validation = std::move(validation);
  if (Communicator *group = opts.communicator) {
    if (opts.batchSize < group->size())
      return Status::error("the batch size " + std::to_string(opts.batchSize) +
                           " is smaller than the " +
                           std::to_string(group->size()) +
                           " processes: each takes a shard of every batch");
    shardOf(opts.batchSize, group->rank(), group->size(), trainer->shardBegin,
            trainer->shardEnd);
  } else {
    trainer->shardEnd = opts.batchSize;
  }
  Expected<std::unique_ptr<Session>> session =
      trainer->makeSession(trainer->shardEnd - trainer->shardBegin);
  if (!session)
    return session.status();
  trainer->session = std::move(*session);
  trainer->epochStart = std::chrono::steady_clock::now();
  return trainer;
}

Status Trainer::reduceOverShards(double &loss,
                                 std::map<std::string, Tensor> &gradients) {
  // The batch's mean is the shards' means weighted by their examples.
  double weight = static_cast<double>(shardEnd - shardBegin) /
                  static_cast<double>(options.batchSize);
  std::vector<double> values = {loss * weight};
  for (const auto &[name, gradient] : gradients)
    for (int64_t i = 0; i < gradient.elementCount(); ++i)
      values.push_back(gradient.at(i) * weight);
  if (Status status = options.communicator->allReduceSum(values); !status)
    return status;
  loss = values[0];
  size_t next = 1;
  for (auto &[name, gradient] : gradients)
    for (int64_t i = 0; i < gradient.elementCount(); ++i)
      gradient.set(i, values[next++]);
  return Status::success();
}

Expected<std::unique_ptr<Session>> Trainer::makeSession(int64_t size) {
  SessionOptions sessionOptions = options.session;
  sessionOptions.dims[batchDimName] = size;
  Expected<Session> created = model->session(sessionOptions);
  if (!created)
    return created.status();
  auto result = std::make_unique<Session>(std::move(*created));
  for (const auto &[name, value] : options.fixed)
    if (Status status = result->set(name, value); !status)
      return status;
  return result;
}

std::vector<int64_t> Trainer::order(int64_t epoch) const {
  std::vector<int64_t> rows(static_cast<size_t>(examples));
  for (int64_t i = 0; i < examples; ++i)
    rows[static_cast<size_t>(i)] = i;
  if (!options.shuffle)
    return rows;
  // Fisher-Yates with the generator's raw outputs (std::shuffle's algorithm
  // differs between standard libraries; this one is the same everywhere).
  std::mt19937_64 random(options.seed * 0x9E3779B97F4A7C15ull +
                         static_cast<uint64_t>(epoch) + 1);
  for (int64_t i = examples - 1; i > 0; --i) {
    auto j = static_cast<int64_t>(random() % static_cast<uint64_t>(i + 1));
    std::swap(rows[static_cast<size_t>(i)], rows[static_cast<size_t>(j)]);
  }
  return rows;
}

Status Trainer::bindBatch(Session &target, const TrainData &from,
                          const std::vector<int64_t> &rows) {
  for (const auto &[name, value] : from) {
    std::vector<int64_t> shape = value.shape();
    int64_t total = shape[0];
    shape[0] = static_cast<int64_t>(rows.size());
    Tensor batch(value.dtype(), shape);
    size_t rowBytes = value.byteSize() / static_cast<size_t>(total);
    for (size_t r = 0; r < rows.size(); ++r)
      std::memcpy(batch.data() + r * rowBytes,
                  value.data() + static_cast<size_t>(rows[r]) * rowBytes,
                  rowBytes);
    if (Status status = target.set(name, batch); !status)
      return status;
  }
  return Status::success();
}

Expected<bool> Trainer::step(TrainProgress &progress) {
  if (finished())
    return false;
  if (orderEpoch != position.epoch) {
    epochOrder = order(position.epoch);
    orderEpoch = position.epoch;
  }
  if (position.batch == 0)
    epochStart = std::chrono::steady_clock::now();
  auto first = epochOrder.begin() + position.batch * options.batchSize;
  std::vector<int64_t> rows(first + shardBegin, first + shardEnd);
  std::string where = "update " + std::to_string(position.update + 1) +
                      " (epoch " + std::to_string(position.epoch + 1) +
                      ", batch " + std::to_string(position.batch + 1) + ")";
  if (Status status = bindBatch(*session, data, rows); !status)
    return status.withContext(where);
  if (Status status = session->resetStates(); !status)
    return status.withContext(where);
  Expected<BackwardResult> result = session->backward(options.backward);
  if (!result)
    return result.status().withContext(where);
  double lr = options.schedule.at(position.update);
  std::map<std::string, Tensor> gradients;
  for (const std::string &name : options.params) {
    Expected<const Tensor *> gradient = session->adjoint(name);
    if (!gradient)
      return gradient.status().withContext(where);
    gradients.emplace(name, **gradient);
  }
  double loss = result->loss;
  if (options.communicator)
    if (Status status = reduceOverShards(loss, gradients); !status)
      return status.withContext(where);
  for (const std::string &name : options.params) {
    Expected<Tensor> value = session->get(name);
    if (!value)
      return value.status().withContext(where);
    if (Status status = optimizer->update(name, *value, gradients.at(name), lr,
                                          position.update + 1);
        !status)
      return status.withContext(where);
    if (Status status = session->set(name, *value); !status)
      return status.withContext(where);
  }
  position.lossSum += loss;
  ++position.update;
  ++position.batch;
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - epochStart)
                       .count();
  progress.update = position.update;
  progress.updates = options.epochs * batchesPerEpoch;
  progress.epoch = position.epoch + 1;
  progress.epochs = options.epochs;
  progress.batch = position.batch;
  progress.batches = batchesPerEpoch;
  progress.loss = loss;
  progress.runningLoss = position.lossSum / static_cast<double>(position.batch);
  progress.learningRate = lr;
  progress.examplesPerSecond =
      seconds > 0
          ? static_cast<double>(position.batch * options.batchSize) / seconds
          : 0;
  return true;
}

Expected<EpochSummary>
Trainer::runEpoch(const std::function<void(const TrainProgress &)> &onUpdate) {
  if (finished())
    return Status::error("training is over: every epoch has run");
  EpochSummary summary;
  summary.epoch = position.epoch + 1;
  auto start = std::chrono::steady_clock::now();
  while (position.batch < batchesPerEpoch) {
    TrainProgress progress;
    Expected<bool> stepped = step(progress);
    if (!stepped)
      return stepped.status();
    if (onUpdate)
      onUpdate(progress);
  }
  summary.trainLoss =
      batchesPerEpoch ? position.lossSum / static_cast<double>(batchesPerEpoch)
                      : 0;
  position.lossSum = 0;
  position.batch = 0;
  ++position.epoch;
  if (validation) {
    Expected<double> loss = validationLoss();
    if (!loss)
      return loss.status();
    summary.validationLoss = *loss;
  }
  summary.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return summary;
}

Expected<std::map<std::string, Tensor>> Trainer::params() {
  std::map<std::string, Tensor> values;
  for (const std::string &name : options.params) {
    Expected<Tensor> value = session->get(name);
    if (!value)
      return value.status();
    values[name] = std::move(*value);
  }
  return values;
}

Expected<double> Trainer::validationLoss() {
  if (!validation)
    return Status::error("no validation data was given");
  Expected<std::map<std::string, Tensor>> current = params();
  if (!current)
    return current.status();
  int64_t count = validation->begin()->second.shape()[0];
  int64_t size = std::min(options.batchSize, count);
  double weighted = 0;
  std::map<int64_t, std::unique_ptr<Session>> sessions;
  for (int64_t start = 0; start < count; start += size) {
    int64_t rows = std::min(size, count - start);
    std::unique_ptr<Session> &evaluator = sessions[rows];
    if (!evaluator) {
      Expected<std::unique_ptr<Session>> made = makeSession(rows);
      if (!made)
        return made.status().withContext("validation");
      evaluator = std::move(*made);
      for (const auto &[name, value] : *current)
        if (Status status = evaluator->set(name, value); !status)
          return status.withContext("validation");
    }
    std::vector<int64_t> indices;
    for (int64_t r = start; r < start + rows; ++r)
      indices.push_back(r);
    if (Status status = bindBatch(*evaluator, *validation, indices); !status)
      return status.withContext("validation");
    if (Status status = evaluator->resetStates(); !status)
      return status.withContext("validation");
    Expected<BackwardResult> result =
        evaluator->evaluateLosses(options.backward);
    if (!result)
      return result.status().withContext("validation");
    weighted += result->loss * static_cast<double>(rows);
  }
  return weighted / static_cast<double>(count);
}

namespace {
constexpr const char *kCheckpointFormat = "energy-train-checkpoint";
} // namespace

Status Trainer::saveCheckpoint(const std::string &path) {
  std::map<std::string, Tensor> tensors;
  Expected<std::map<std::string, Tensor>> current = params();
  if (!current)
    return current.status();
  for (auto &[name, value] : *current)
    tensors["param." + name] = std::move(value);
  for (auto &[name, value] : optimizer->state())
    tensors["optimizer." + name] = value;
  std::map<std::string, std::string> metadata = {
      {"format", kCheckpointFormat},
      {"model", model->name()},
      {"optimizer", std::string(optimizer->name())},
      {"update", std::to_string(position.update)},
      {"epoch", std::to_string(position.epoch)},
      {"batch", std::to_string(position.batch)},
      {"loss_sum", formatDouble(position.lossSum)},
      {"seed", std::to_string(options.seed)},
      {"batch_size", std::to_string(options.batchSize)},
      {"examples", std::to_string(examples)}};
  return writeSafetensors(path, tensors, metadata)
      .withContext("checkpoint " + path);
}

Status Trainer::loadCheckpoint(const std::string &path) {
  Expected<SafetensorsContents> contents = readSafetensors(path);
  if (!contents)
    return contents.status();
  const std::map<std::string, std::string> &metadata = contents->metadata;
  auto field = [&](const std::string &key) -> std::string {
    auto found = metadata.find(key);
    return found == metadata.end() ? "" : found->second;
  };
  std::string where = "checkpoint " + path;
  if (field("format") != kCheckpointFormat)
    return Status::error(where + " is not a training checkpoint");
  auto mustMatch = [&](const std::string &key,
                       const std::string &expected) -> Status {
    if (field(key) != expected)
      return Status::error(where + " was written with " + key + " " +
                           field(key) + ", this run has " + expected);
    return Status::success();
  };
  for (auto [key, expected] :
       {std::pair<std::string, std::string>{"model", model->name()},
        {"optimizer", std::string(optimizer->name())},
        {"seed", std::to_string(options.seed)},
        {"batch_size", std::to_string(options.batchSize)},
        {"examples", std::to_string(examples)}})
    if (Status status = mustMatch(key, expected); !status)
      return status;
  std::map<std::string, Tensor> optimizerState;
  std::map<std::string, Tensor> params;
  for (auto &[name, value] : contents->tensors) {
    if (name.rfind("param.", 0) == 0)
      params[name.substr(6)] = value;
    else if (name.rfind("optimizer.", 0) == 0)
      optimizerState[name.substr(10)] = value;
  }
  for (const std::string &name : options.params)
    if (!params.count(name))
      return Status::error(where + " has no value of param '" + name + "'");
  Position loaded;
  auto number = [&](const std::string &key, auto &out) {
    std::string text = field(key);
    char *end = nullptr;
    if constexpr (std::is_same_v<std::decay_t<decltype(out)>, double>)
      out = std::strtod(text.c_str(), &end);
    else
      out = std::strtoll(text.c_str(), &end, 10);
    return !text.empty() && end && *end == '\0';
  };
  if (!number("update", loaded.update) || !number("epoch", loaded.epoch) ||
      !number("batch", loaded.batch) || !number("loss_sum", loaded.lossSum))
    return Status::error(where + ": its position (update, epoch, batch, "
                                 "loss_sum) is not a set of numbers");
  if (loaded.batch < 0 || loaded.batch > batchesPerEpoch || loaded.epoch < 0)
    return Status::error(where + ": its position is outside this run");
  if (Status status = optimizer->setState(optimizerState); !status)
    return status.withContext(where);
  for (const auto &[name, value] : params)
    if (std::find(options.params.begin(), options.params.end(), name) !=
        options.params.end())
      if (Status status = session->set(name, value); !status)
        return status.withContext(where);
  position = loaded;
  return Status::success();
}
