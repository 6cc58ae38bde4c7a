//===- Training.cpp - The trainer as a Python class -----------------------===//
//
// The options come as keyword arguments of energy.Trainer (python/energy/
// __init__.py checks and documents them); a Python all_gather becomes a
// Communicator that calls it under the GIL.
//
//===----------------------------------------------------------------------===//

#include "Training.h"
#include "Arrays.h"
#include "Errors.h"

#include "energy/Runtime/Communicator.h"
#include "energy/Runtime/Model.h"
#include "energy/Runtime/Trainer.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>

namespace py = pybind11;
using namespace energy;
using namespace energy::python;

namespace {
/// A group whose all_gather is a Python callable: given a float64 array of
/// this rank's values, it returns every rank's, in rank order.
class PythonGroup final : public Communicator {
public:
  PythonGroup(int rank, int size, py::object gather)
      : myRank(rank), count(size), gather(std::move(gather)) {}
  ~PythonGroup() override {
    py::gil_scoped_acquire locked;
    gather = py::object();
  }
  int rank() const override { return myRank; }
  int size() const override { return count; }
  Status allGather(const std::vector<double> &values,
                   std::vector<double> &gathered) override {
    py::gil_scoped_acquire locked;
    try {
      py::array_t<double> mine(static_cast<py::ssize_t>(values.size()));
      std::memcpy(mine.mutable_data(), values.data(),
                  values.size() * sizeof(double));
      auto all = py::array_t<double, py::array::c_style | py::array::forcecast>(
          gather(mine));
      if (static_cast<size_t>(all.size()) != values.size() * count)
        return Status::error("all_gather returned " +
                             std::to_string(all.size()) + " values, not " +
                             std::to_string(values.size() * count));
      gathered.assign(all.data(), all.data() + all.size());
      return Status::success();
    } catch (py::error_already_set &error) {
      return Status::error("all_gather on rank " + std::to_string(myRank) +
                           " raised " + std::string(error.what()));
    }
  }
  [[noreturn]] void abort(int code) override { std::_Exit(code); }

private:
  int myRank, count;
  py::object gather;
};

TrainData tensorsOf(const py::dict &arrays, const std::string &what) {
  TrainData data;
  for (auto [name, value] : arrays) {
    std::string key = py::str(name);
    data.emplace(key, tensorFromPython(value, what + " '" + key + "'"));
  }
  return data;
}

/// A trainer with the group it trains in.
struct PyTrainer {
  std::unique_ptr<Communicator> group;
  std::unique_ptr<Trainer> trainer;
};

PyTrainer makeTrainer(const Model &model, const py::dict &data,
                      std::optional<py::dict> validation, int64_t batch,
                      int64_t epochs, const std::string &optimizer, double lr,
                      double weightDecay, const std::string &schedule,
                      uint64_t seed, bool shuffle, const py::dict &fixed,
                      std::optional<py::object> allGather, int rank, int size) {
  TrainOptions options;
  options.batchSize = batch;
  options.epochs = epochs;
  options.optimizer = optimizer;
  options.schedule.lr = lr;
  options.schedule.kind = schedule;
  options.optimizerOptions.weightDecay = weightDecay;
  options.seed = seed;
  options.session.seed = seed;
  options.shuffle = shuffle;
  options.fixed = tensorsOf(fixed, "tensor");
  PyTrainer result;
  if (allGather) {
    result.group = std::make_unique<PythonGroup>(rank, size, *allGather);
    options.communicator = result.group.get();
  }
  std::optional<TrainData> checking;
  if (validation)
    checking = tensorsOf(*validation, "validation tensor");
  Expected<std::unique_ptr<Trainer>> created = Trainer::create(
      model, tensorsOf(data, "data tensor"), options, std::move(checking));
  if (!created)
    raise(created.status().kind() == ErrorKind::Shape ? "ShapeError"
                                                      : "RuntimeError",
          created.message());
  result.trainer = std::move(*created);
  return result;
}
} // namespace

void python::bindTrainer(py::module_ &module) {
  module.def("make_trainer", &makeTrainer);
  py::class_<PyTrainer>(module, "Trainer")
      .def("run_epoch",
           [](PyTrainer &self) {
             Expected<EpochSummary> summary = [&] {
               py::gil_scoped_release unlocked;
               return self.trainer->runEpoch();
             }();
             if (!summary)
               raise(summary.status());
             py::dict report;
             report["epoch"] = summary->epoch;
             report["train_loss"] = summary->trainLoss;
             report["validation_loss"] =
                 summary->validationLoss
                     ? py::object(py::float_(*summary->validationLoss))
                     : py::none();
             return report;
           })
      .def_property_readonly(
          "finished", [](PyTrainer &self) { return self.trainer->finished(); })
      .def("params",
           [](PyTrainer &self) {
             Expected<std::map<std::string, Tensor>> params =
                 self.trainer->params();
             if (!params)
               raise(params.status());
             py::dict values;
             for (const auto &[name, value] : *params)
               values[py::str(name)] = arrayFromTensor(value);
             return values;
           })
      .def("save_checkpoint",
           [](PyTrainer &self, const std::string &path) {
             if (Status status = self.trainer->saveCheckpoint(path); !status)
               raise(status);
           })
      .def("load_checkpoint", [](PyTrainer &self, const std::string &path) {
        if (Status status = self.trainer->loadCheckpoint(path); !status)
          raise(status);
      });
}
