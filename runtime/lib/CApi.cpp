//===- CApi.cpp - The runtime's C API -------------------------------------===//
//
// Thin wrappers over Model and Session: errors become a non-zero return and
// a thread-local message, and no exception (such as std::bad_alloc) crosses
// into C.
//
//===----------------------------------------------------------------------===//

#include "energy/energy.h"

#include "energy/Runtime/Log.h"
#include "energy/Runtime/Model.h"
#include "energy/Runtime/ParamOptimizer.h"
#include "energy/Runtime/Safetensors.h"
#include "energy/Runtime/Session.h"
#include "energy/Runtime/Trainer.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace energy;

struct energy_model {
  Model model;
};

struct energy_session {
  Session session;
};

static thread_local std::string lastError;

/// Records `message` as the latest failure.
static void recordError(std::string message) { lastError = std::move(message); }

/// Runs `body`; an exception it throws is recorded and gives `failure`.
template <typename Result, typename Body>
static Result guarded(Result failure, Body &&body) {
#if defined(__cpp_exceptions)
  try {
    return body();
  } catch (const std::bad_alloc &) {
    recordError("out of memory");
  } catch (const std::exception &error) {
    recordError(std::string("internal error: ") + error.what());
  } catch (...) {
    recordError("internal error");
  }
  return failure;
#else
  (void)failure;
  return body();
#endif
}

/// Fails with the message of `status` (non-zero), or succeeds (0).
static int result(const Status &status) {
  if (status.ok())
    return 0;
  recordError(status.message());
  return 1;
}

/// The runtime's type for `dtype`; nothing for a value outside the enum.
static std::optional<DType> runtimeType(energy_dtype dtype) {
  switch (dtype) {
  case ENERGY_F32:
    return DType::F32;
  case ENERGY_F64:
    return DType::F64;
  default:
    return std::nullopt;
  }
}

static Status badType(const char *function, energy_dtype dtype) {
  return Status::error(std::string(function) + ": unknown dtype " +
                       std::to_string(static_cast<int>(dtype)) +
                       " (ENERGY_F32 or ENERGY_F64)");
}

static Status nullArgument(const char *function, const char *argument) {
  return Status::error(std::string(function) + ": " + argument + " is NULL");
}

const char *energy_last_error(void) { return lastError.c_str(); }

energy_model *energy_model_load(const char *path) {
  return guarded<energy_model *>(nullptr, [&]() -> energy_model * {
    if (!path)
      return result(nullArgument("energy_model_load", "path")), nullptr;
    Expected<Model> model = Model::load(path);
    if (!model)
      return result(model.status()), nullptr;
    return new energy_model{std::move(*model)};
  });
}

void energy_model_free(energy_model *model) { delete model; }

energy_dtype energy_model_dtype(const energy_model *model) {
  return model->model.dtype() == DType::F32 ? ENERGY_F32 : ENERGY_F64;
}

const char *energy_model_device(const energy_model *model) {
  return model->model.device() == "cuda" ? "cuda" : "cpu";
}

void energy_set_log_handler(energy_log_fn handler, void *user_data) {
  static_assert(ENERGY_LOG_NOTE == static_cast<int>(energy::LogLevel::Note) &&
                ENERGY_LOG_TRACE == static_cast<int>(energy::LogLevel::Trace));
  if (!handler)
    return energy::setLogHandler(nullptr);
  energy::setLogHandler(
      [handler, user_data](energy::LogLevel level, const char *message) {
        handler(static_cast<energy_log_level>(level), message, user_data);
      });
}

int energy_model_set_threads(energy_model *model, int threads) {
  if (!model)
    return result(nullArgument("energy_model_set_threads", "model"));
  if (!model->model.setThreads(threads))
    return result(
        Status::error(model->model.label() + " was built without threads"));
  return 0;
}

energy_session *energy_session_create(energy_model *model,
                                      const char *const *dim_names,
                                      const int64_t *dim_values, size_t ndims,
                                      uint64_t seed, int has_seed) {
  return guarded<energy_session *>(nullptr, [&]() -> energy_session * {
    if (!model)
      return result(nullArgument("energy_session_create", "model")), nullptr;
    if (ndims && (!dim_names || !dim_values))
      return result(nullArgument("energy_session_create",
                                 "dim_names or dim_values")),
             nullptr;
    SessionOptions options;
    for (size_t i = 0; i < ndims; ++i) {
      if (!dim_names[i])
        return result(nullArgument("energy_session_create", "a dim name")),
               nullptr;
      options.dims[dim_names[i]] = dim_values[i];
    }
    if (has_seed)
      options.seed = seed;
    Expected<Session> session = model->model.session(options);
    if (!session)
      return result(session.status()), nullptr;
    return new energy_session{std::move(*session)};
  });
}

void energy_session_free(energy_session *session) { delete session; }

/// The element type and shape energy_session_set and
/// energy_session_set_device are given, checked.
static Expected<std::pair<DType, std::vector<int64_t>>>
checkedArray(const char *function, const char *name, energy_dtype dtype,
             const int64_t *shape, size_t rank) {
  std::optional<DType> type = runtimeType(dtype);
  if (!type)
    return badType(function, dtype);
  if (rank && !shape)
    return nullArgument(function, "shape");
  std::vector<int64_t> dims(shape, shape + rank);
  if (!checkedElementCount(dims, dtypeSize(*type)))
    return Status::error(std::string(function) + ": tensor '" + name +
                         "': invalid shape " + Tensor::shapeText(dims));
  return std::make_pair(*type, std::move(dims));
}

int energy_session_set(energy_session *session, const char *name,
                       energy_dtype dtype, const int64_t *shape, size_t rank,
                       const void *data) {
  return guarded(1, [&] {
    const char *function = "energy_session_set";
    if (!session || !name)
      return result(nullArgument(function, "session or name"));
    auto array = checkedArray(function, name, dtype, shape, rank);
    if (!array)
      return result(array.status());
    Expected<Tensor> allocated = Tensor::allocate(array->first, array->second);
    if (!allocated)
      return result(allocated.status().withContext(std::string(function) +
                                                   ": tensor '" + name + "'"));
    Tensor &value = *allocated;
    if (value.byteSize()) {
      if (!data)
        return result(nullArgument(function, "data"));
      std::memcpy(value.data(), data, value.byteSize());
    }
    return result(session->session.set(name, value));
  });
}

int energy_session_set_device(energy_session *session, const char *name,
                              energy_dtype dtype, const int64_t *shape,
                              size_t rank, const void *data) {
  return guarded(1, [&] {
    const char *function = "energy_session_set_device";
    if (!session || !name)
      return result(nullArgument(function, "session or name"));
    auto array = checkedArray(function, name, dtype, shape, rank);
    if (!array)
      return result(array.status());
    auto &[type, dims] = *array;
    if (!*checkedElementCount(dims, dtypeSize(type)))
      return result(session->session.set(name, Tensor(type, dims)));
    if (!data)
      return result(nullArgument(function, "data"));
    // The application keeps the memory; nothing to release.
    Tensor value = Tensor::borrow(type, dims, const_cast<void *>(data),
                                  std::make_shared<char>());
    return result(
        session->session.setFromDevice(name, value).withContext(function));
  });
}

/// Copies `value` out as energy_session_get describes.
static int copyOut(const char *function, Expected<Tensor> value,
                   energy_dtype dtype, void *data, size_t capacity,
                   int64_t *shapeOut, size_t *rankInOut) {
  if (!value)
    return result(value.status());
  std::optional<DType> type = runtimeType(dtype);
  if (!type)
    return result(badType(function, dtype));
  Tensor converted =
      value->dtype() == *type ? std::move(*value) : value->converted(*type);
  size_t rank = converted.shape().size();
  if (rankInOut) {
    size_t room = *rankInOut;
    *rankInOut = rank;
    if (rank > room)
      return result(Status::error(
          std::string(function) + ": the shape has " + std::to_string(rank) +
          " axes but rank_inout gives room for " + std::to_string(room)));
    if (rank && !shapeOut)
      return result(nullArgument(function, "shape_out"));
    for (size_t i = 0; i < rank; ++i)
      shapeOut[i] = converted.shape()[i];
  }
  if (!data && capacity == 0)
    return 0;
  size_t count = static_cast<size_t>(converted.elementCount());
  if (count > capacity)
    return result(Status::error(
        std::string(function) + ": the value has " + std::to_string(count) +
        " elements (shape " + converted.shapeString() +
        ") but capacity_elements is " + std::to_string(capacity)));
  if (count && !data)
    return result(nullArgument(function, "data"));
  if (count)
    std::memcpy(data, converted.data(), converted.byteSize());
  return 0;
}

int energy_session_get(energy_session *session, const char *name,
                       energy_dtype dtype, void *data, size_t capacity_elements,
                       int64_t *shape_out, size_t *rank_inout) {
  return guarded(1, [&] {
    if (!session || !name)
      return result(nullArgument("energy_session_get", "session or name"));
    return copyOut("energy_session_get", session->session.get(name), dtype,
                   data, capacity_elements, shape_out, rank_inout);
  });
}

int energy_session_gradient(energy_session *session, const char *name,
                            energy_dtype dtype, void *data,
                            size_t capacity_elements, int64_t *shape_out,
                            size_t *rank_inout) {
  return guarded(1, [&] {
    if (!session || !name)
      return result(nullArgument("energy_session_gradient", "session or name"));
    return copyOut("energy_session_gradient", session->session.gradient(name),
                   dtype, data, capacity_elements, shape_out, rank_inout);
  });
}

/// energy_session_device_buffer and _gradient: the buffer `lookup` finds in
/// the session, handed out as they say.
template <typename Lookup>
static int deviceData(const char *function, energy_session *session,
                      const char *name, void **data, size_t *bytes,
                      Lookup lookup) {
  return guarded(1, [&] {
    if (!session || !name || !data || !bytes)
      return result(nullArgument(function, "session, name, data or bytes"));
    auto buffer = lookup(session->session, name);
    if (!buffer)
      return result(buffer.status().withContext(function));
    *data = const_cast<std::byte *>((*buffer)->data());
    *bytes = (*buffer)->byteSize();
    return 0;
  });
}

int energy_session_device_buffer(energy_session *session, const char *name,
                                 void **data, size_t *bytes) {
  return deviceData("energy_session_device_buffer", session, name, data, bytes,
                    [](Session &owner, const char *tensor) {
                      return owner.deviceBuffer(tensor);
                    });
}

int energy_session_device_gradient(energy_session *session, const char *name,
                                   void **data, size_t *bytes) {
  return deviceData("energy_session_device_gradient", session, name, data,
                    bytes, [](Session &owner, const char *tensor) {
                      return owner.deviceGradient(tensor);
                    });
}

int energy_session_set_stream(energy_session *session, void *stream) {
  return guarded(1, [&] {
    if (!session)
      return result(nullArgument("energy_session_set_stream", "session"));
    return result(session->session.setStream(stream).withContext(
        "energy_session_set_stream"));
  });
}

int energy_session_energy(energy_session *session, double *out) {
  return guarded(1, [&] {
    if (!session || !out)
      return result(nullArgument("energy_session_energy", "session or out"));
    Expected<double> energy = session->session.energy();
    if (!energy)
      return result(energy.status());
    *out = *energy;
    return 0;
  });
}

int energy_session_step(energy_session *session) {
  return guarded(1, [&] {
    if (!session)
      return result(nullArgument("energy_session_step", "session"));
    return result(session->session.step());
  });
}

int energy_session_run(energy_session *session, int64_t steps,
                       int64_t *steps_taken, double *final_energy) {
  return guarded(1, [&] {
    if (!session)
      return result(nullArgument("energy_session_run", "session"));
    RunOptions options;
    if (steps >= 0)
      options.steps = steps;
    options.trace = false;
    Expected<RunResult> run = session->session.run(options);
    if (!run)
      return result(run.status());
    if (steps_taken)
      *steps_taken = run->steps;
    if (final_energy)
      *final_energy = run->energy;
    return 0;
  });
}

int energy_session_backward(energy_session *session, int64_t steps,
                            int store_all_steps, double *loss,
                            int64_t *steps_taken) {
  return guarded(1, [&] {
    if (!session)
      return result(nullArgument("energy_session_backward", "session"));
    BackwardOptions options;
    if (steps >= 0)
      options.steps = steps;
    options.storage =
        store_all_steps ? BackpropStorage::Full : BackpropStorage::Checkpointed;
    Expected<BackwardResult> run = session->session.backward(options);
    if (!run)
      return result(run.status());
    if (loss)
      *loss = run->loss;
    if (steps_taken)
      *steps_taken = run->steps;
    return 0;
  });
}

int energy_session_adjoint(energy_session *session, const char *name,
                           energy_dtype dtype, void *data,
                           size_t capacity_elements, int64_t *shape_out,
                           size_t *rank_inout) {
  return guarded(1, [&] {
    if (!session || !name)
      return result(nullArgument("energy_session_adjoint", "session or name"));
    Expected<const Tensor *> adjoint = session->session.adjoint(name);
    Expected<Tensor> value = adjoint ? Expected<Tensor>(**adjoint)
                                     : Expected<Tensor>(adjoint.status());
    return copyOut("energy_session_adjoint", std::move(value), dtype, data,
                   capacity_elements, shape_out, rank_inout);
  });
}

int energy_session_reset_states(energy_session *session) {
  return guarded(1, [&] {
    if (!session)
      return result(nullArgument("energy_session_reset_states", "session"));
    return result(session->session.resetStates());
  });
}

namespace {
/// The application's group of processes (energy_communicator) as a
/// Communicator: every collective through its all_gather.
class ApplicationGroup final : public Communicator {
public:
  explicit ApplicationGroup(const energy_communicator &group) : group(group) {}
  int rank() const override { return group.rank; }
  int size() const override { return group.size; }
  Status allGather(const std::vector<double> &values,
                   std::vector<double> &gathered) override {
    gathered.assign(values.size() * static_cast<size_t>(group.size), 0.0);
    if (group.all_gather(group.context, values.data(), values.size(),
                         gathered.data()) != 0)
      return Status::error("the application's all_gather failed on rank " +
                           std::to_string(group.rank) + " of " +
                           std::to_string(group.size));
    return Status::success();
  }
  [[noreturn]] void abort(int code) override { std::exit(code); }

private:
  energy_communicator group;
};
} // namespace

struct energy_trainer {
  std::unique_ptr<Communicator> group;
  std::unique_ptr<Trainer> trainer;
};

void energy_train_options_init(energy_train_options *options) {
  if (!options)
    return;
  *options = energy_train_options{};
  options->epochs = 1;
  options->learning_rate = 1e-3;
  options->shuffle = 1;
}

energy_trainer *energy_trainer_create(energy_model *model,
                                      const char *data_path,
                                      const char *validation_path,
                                      const energy_train_options *options) {
  return guarded<energy_trainer *>(nullptr, [&]() -> energy_trainer * {
    if (!model || !data_path || !options) {
      result(
          nullArgument("energy_trainer_create", "model, data_path or options"));
      return nullptr;
    }
    Expected<SafetensorsContents> data = readSafetensors(data_path);
    if (!data) {
      result(data.status());
      return nullptr;
    }
    std::optional<TrainData> validation;
    if (validation_path) {
      Expected<SafetensorsContents> read = readSafetensors(validation_path);
      if (!read) {
        result(read.status());
        return nullptr;
      }
      validation = std::move(read->tensors);
    }
    TrainOptions train;
    train.batchSize = options->batch_size;
    train.epochs = options->epochs;
    if (options->optimizer)
      train.optimizer = options->optimizer;
    train.schedule.lr = options->learning_rate;
    if (options->schedule)
      train.schedule.kind = options->schedule;
    train.optimizerOptions.weightDecay = options->weight_decay;
    train.seed = options->seed;
    train.session.seed = options->seed;
    train.shuffle = options->shuffle != 0;
    std::unique_ptr<Communicator> group;
    if (const energy_communicator *given = options->communicator) {
      if (!given->all_gather || given->size < 1 || given->rank < 0 ||
          given->rank >= given->size) {
        result(Status::error(
            "energy_trainer_create: the communicator needs all_gather and "
            "0 <= rank < size (rank " +
            std::to_string(given->rank) + ", size " +
            std::to_string(given->size) + ")"));
        return nullptr;
      }
      group = std::make_unique<ApplicationGroup>(*given);
      train.communicator = group.get();
    }
    Expected<std::unique_ptr<Trainer>> created = Trainer::create(
        model->model, std::move(data->tensors), train, std::move(validation));
    if (!created) {
      result(created.status());
      return nullptr;
    }
    return new energy_trainer{std::move(group), std::move(*created)};
  });
}

void energy_trainer_free(energy_trainer *trainer) { delete trainer; }

int energy_trainer_run_epoch(energy_trainer *trainer, double *train_loss,
                             double *validation_loss) {
  return guarded(1, [&] {
    if (!trainer)
      return result(nullArgument("energy_trainer_run_epoch", "trainer"));
    Expected<EpochSummary> summary = trainer->trainer->runEpoch();
    if (!summary)
      return result(summary.status());
    if (train_loss)
      *train_loss = summary->trainLoss;
    if (validation_loss)
      *validation_loss = summary->validationLoss.value_or(
          std::numeric_limits<double>::quiet_NaN());
    return 0;
  });
}

int energy_trainer_get_param(energy_trainer *trainer, const char *name,
                             energy_dtype dtype, void *data,
                             size_t capacity_elements, int64_t *shape_out,
                             size_t *rank_inout) {
  return guarded(1, [&] {
    if (!trainer || !name)
      return result(
          nullArgument("energy_trainer_get_param", "trainer or name"));
    Expected<std::map<std::string, Tensor>> params = trainer->trainer->params();
    if (!params)
      return result(params.status());
    auto found = params->find(name);
    if (found == params->end())
      return result(
          Status::error(std::string("'") + name + "' is not a trained param"));
    return copyOut("energy_trainer_get_param", found->second, dtype, data,
                   capacity_elements, shape_out, rank_inout);
  });
}

int energy_trainer_save_checkpoint(energy_trainer *trainer, const char *path) {
  return guarded(1, [&] {
    if (!trainer || !path)
      return result(
          nullArgument("energy_trainer_save_checkpoint", "trainer or path"));
    return result(trainer->trainer->saveCheckpoint(path));
  });
}

int energy_trainer_load_checkpoint(energy_trainer *trainer, const char *path) {
  return guarded(1, [&] {
    if (!trainer || !path)
      return result(
          nullArgument("energy_trainer_load_checkpoint", "trainer or path"));
    return result(trainer->trainer->loadCheckpoint(path));
  });
}

int energy_plugin_load(const char *path) {
  return guarded(1, [&] {
    if (!path)
      return result(nullArgument("energy_plugin_load", "path"));
    return result(loadPluginParamOptimizers(path).status());
  });
}
