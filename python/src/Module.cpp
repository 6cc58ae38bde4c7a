//===- Module.cpp - The Python module _energy -----------------------------===//
//
// Models and sessions of the runtime as Python objects: compile and load,
// tensors in and out, energies, gradients, runs and loss gradients. The
// package energy (energy/__init__.py) wraps it; errors are the exceptions
// of energy/errors.py.
//
//===----------------------------------------------------------------------===//

#include "Arrays.h"
#include "Compile.h"
#include "Errors.h"
#include "Training.h"

#include "energy/Runtime/CudaDriver.h"
#include "energy/Runtime/Manifest.h"
#include "energy/Runtime/Model.h"
#include "energy/Runtime/Session.h"

#include <pybind11/stl.h>

#include <memory>

namespace py = pybind11;
using namespace energy;
using namespace energy::python;

namespace {
template <typename T> T valueOr(Expected<T> result, const char *error) {
  if (!result)
    raise(result.status(), error);
  return std::move(*result);
}

void check(const Status &status, const char *error) {
  if (!status)
    raise(status, error);
}

py::dict tensorsOf(const Manifest &manifest) {
  py::dict tensors;
  for (const ManifestBuffer &buffer : manifest.buffers)
    if (buffer.kind == BufferKind::Tensor && !isKeptValue(buffer)) {
      py::dict info;
      info["role"] = std::string(tensorRoleName(buffer.role));
      info["shape"] = buffer.shapeText();
      tensors[py::str(buffer.name)] = info;
    }
  return tensors;
}

py::dict dimsOf(const Manifest &manifest) {
  py::dict dims;
  for (const ManifestDim &dim : manifest.dims)
    dims[py::str(dim.name)] =
        dim.defaultValue ? py::object(py::int_(*dim.defaultValue)) : py::none();
  return dims;
}

/// A session with the model it was made from kept alive beside it; shared
/// with the DLPack views of its GPU buffers.
struct PySession {
  std::shared_ptr<Session> session;
  /// The stream the session's work goes on (set_stream), on which tensors
  /// handed over on the GPU are made ready.
  uintptr_t stream = 0;

  bool onCuda() const { return session->model().device() == "cuda"; }

  void set(const std::string &name, py::handle value) {
    TensorPlace place = TensorPlace::Host;
    Tensor tensor =
        tensorFromPython(value, "tensor '" + name + "'", &place, stream);
    if (place == TensorPlace::Host) {
      check(session->set(name, tensor), "RuntimeError");
      return;
    }
    if (!onCuda())
      raise("Error", "tensor '" + name + "' is on the GPU; model " +
                         session->model().name() +
                         " runs on the CPU (give it CPU tensors, or compile "
                         "it with target='cuda')");
    Status status = [&] {
      py::gil_scoped_release unlocked;
      return session->setFromDevice(name, tensor);
    }();
    check(status, "RuntimeError");
  }

  py::array get(const std::string &name) {
    Expected<Tensor> value = session->get(name);
    return arrayFromTensor(valueOr(std::move(value), "RuntimeError"));
  }

  /// A DLPack view of `buffer`, a GPU buffer of this session, which keeps
  /// the session alive; once the last view is gone the GPU's queued work is
  /// waited for before the session may free the buffer.
  py::capsule deviceView(const Tensor &buffer) {
    auto *owner = new std::shared_ptr<Session>(session);
    std::shared_ptr<void> lender(owner, [](void *held) {
      synchronizeDevice();
      delete static_cast<std::shared_ptr<Session> *>(held);
    });
    return dlpackFromTensor(
        Tensor::borrow(buffer.dtype(), buffer.shape(),
                       const_cast<std::byte *>(buffer.data()),
                       std::move(lender)),
        TensorPlace::Cuda);
  }

  py::capsule dlpack(const std::string &name) {
    if (!onCuda())
      return dlpackFromTensor(valueOr(session->get(name), "RuntimeError"));
    Expected<Tensor *> buffer = session->deviceBuffer(name);
    return deviceView(*valueOr(std::move(buffer), "RuntimeError"));
  }

  py::capsule adjointDlpack(const std::string &name) {
    if (!onCuda())
      return dlpackFromTensor(*valueOr(session->adjoint(name), "RuntimeError"));
    Expected<const Tensor *> buffer = session->deviceAdjoint(name);
    return deviceView(*valueOr(std::move(buffer), "RuntimeError"));
  }

  void setStream(uintptr_t newStream) {
    check(session->setStream(reinterpret_cast<void *>(newStream)),
          "RuntimeError");
    stream = newStream;
  }

  double energy(std::optional<std::string> term) {
    Expected<double> value = [&] {
      py::gil_scoped_release unlocked;
      return term ? session->termEnergy(*term) : session->energy();
    }();
    return valueOr(std::move(value), "RuntimeError");
  }

  py::dict grad(std::optional<std::vector<std::string>> wrt) {
    std::vector<std::string> names = gradientsToReport(
        session->model().manifest(), wrt.value_or(std::vector<std::string>{}));
    Expected<std::vector<Tensor>> values = [&] {
      py::gil_scoped_release unlocked;
      return session->gradients(names);
    }();
    std::vector<Tensor> computed = valueOr(std::move(values), "RuntimeError");
    py::dict gradients;
    for (size_t i = 0; i < names.size(); ++i)
      gradients[py::str(names[i])] = arrayFromTensor(std::move(computed[i]));
    return gradients;
  }

  py::dict run(std::optional<int64_t> steps, bool trace) {
    RunOptions options;
    options.steps = steps;
    options.trace = trace;
    Expected<RunResult> result = [&] {
      py::gil_scoped_release unlocked;
      return session->run(options);
    }();
    RunResult done = valueOr(std::move(result), "RuntimeError");
    py::dict report;
    report["steps"] = done.steps;
    report["energy"] = done.energy;
    report["trace"] = done.trace;
    return report;
  }

  py::dict lossGrad(std::optional<int64_t> steps, bool storeAllSteps,
                    bool withGrads) {
    if (session->model().lossNames().empty())
      raise("RuntimeError", "model " + session->model().name() +
                                " declares no loss: loss_grad needs one");
    BackwardOptions options;
    options.steps = steps;
    options.storage =
        storeAllSteps ? BackpropStorage::Full : BackpropStorage::Checkpointed;
    Expected<BackwardResult> result = [&] {
      py::gil_scoped_release unlocked;
      return session->backward(options);
    }();
    BackwardResult done = valueOr(std::move(result), "RuntimeError");
    py::dict report;
    report["steps"] = done.steps;
    report["loss"] = done.loss;
    report["losses"] = done.losses;
    if (!withGrads)
      return report;
    py::dict grads;
    for (const std::string &name : session->model().adjointNames()) {
      Expected<const Tensor *> adjoint = session->adjoint(name);
      grads[py::str(name)] =
          arrayFromTensor(*valueOr(std::move(adjoint), "RuntimeError"));
    }
    report["grads"] = grads;
    return report;
  }
};

PySession makeSession(const Model &model, std::map<std::string, int64_t> dims,
                      std::map<std::string, double> consts,
                      std::optional<uint64_t> seed) {
  SessionOptions options;
  options.dims = std::move(dims);
  options.consts = std::move(consts);
  options.seed = seed;
  Expected<Session> session = model.session(options);
  return PySession{
      std::make_shared<Session>(valueOr(std::move(session), "RuntimeError"))};
}

Model compile(const std::string &source, const std::string &name,
              const std::string &target, const std::string &dtype,
              std::vector<std::string> plugins, bool callerCotangents,
              std::optional<unsigned> optLevel,
              std::vector<std::pair<std::string, int64_t>> dims) {
  CompileOptions options{target,           dtype,    std::move(plugins),
                         callerCotangents, optLevel, std::move(dims)};
  CompileFailure failure;
  std::optional<Model> model;
  {
    py::gil_scoped_release unlocked;
    model = compileSource(source, name, options, failure);
  }
  if (!model) {
    py::object error =
        errorClass("CompileError")(failure.message, failure.file, failure.line,
                                   failure.column, failure.printed);
    PyErr_SetObject(error.get_type().ptr(), error.ptr());
    throw py::error_already_set();
  }
  return std::move(*model);
}
} // namespace

PYBIND11_MODULE(_energy, module) {
  module.doc() = "The energy runtime and compiler, in process (use the "
                 "package energy).";
  module.attr("has_compiler") = compilerAvailable();
  module.def("compile", &compile, py::arg("source"), py::arg("name"),
             py::arg("target"), py::arg("dtype"), py::arg("plugins"),
             py::arg("caller_cotangents"), py::arg("opt_level"),
             py::arg("dims"));
  module.def(
      "load",
      [](const std::string &path) {
        return valueOr(Model::load(path), "RuntimeError");
      },
      py::arg("path"));

  bindTrainer(module);

  py::class_<Model>(module, "Model")
      .def_property_readonly("name", &Model::name)
      .def_property_readonly("label", &Model::label)
      .def_property_readonly("dtype",
                             [](const Model &model) {
                               return model.dtype() == DType::F32 ? "f32"
                                                                  : "f64";
                             })
      .def_property_readonly("device", &Model::device)
      .def_property_readonly("manifest_text", &Model::manifestText)
      .def_property_readonly(
          "dims", [](const Model &model) { return dimsOf(model.manifest()); })
      .def_property_readonly(
          "tensors",
          [](const Model &model) { return tensorsOf(model.manifest()); })
      .def_property_readonly("free_dims",
                             [](const Model &model) {
                               std::vector<std::string> names;
                               for (const ManifestDim &dim :
                                    model.manifest().dims)
                                 if (!dim.derived)
                                   names.push_back(dim.name);
                               return names;
                             })
      .def_property_readonly("outputs", &Model::outputNames)
      .def_property_readonly("gradients", &Model::gradientNames)
      .def_property_readonly("terms", &Model::termNames)
      .def_property_readonly("losses", &Model::lossNames)
      .def_property_readonly("adjoints", &Model::adjointNames)
      .def_property_readonly(
          "incoming",
          [](const Model &model) {
            py::dict incoming;
            for (const ManifestBuffer &buffer : model.manifest().buffers)
              if (buffer.incomingOf)
                incoming[py::str(*buffer.incomingOf)] = buffer.name;
            return incoming;
          })
      .def_property_readonly("has_dynamics", &Model::hasDynamics)
      .def("set_threads", &Model::setThreads, py::arg("threads"))
      .def("session", &makeSession, py::arg("dims"), py::arg("consts"),
           py::arg("seed"));

  py::class_<PySession>(module, "Session")
      .def("set", &PySession::set, py::arg("name"), py::arg("value"))
      .def("get", &PySession::get, py::arg("name"))
      .def("dlpack", &PySession::dlpack, py::arg("name"))
      .def("adjoint_dlpack", &PySession::adjointDlpack, py::arg("name"))
      .def("set_stream", &PySession::setStream, py::arg("stream"))
      .def("dims",
           [](PySession &self) {
             return valueOr(self.session->dims(), "RuntimeError");
           })
      .def("energy", &PySession::energy, py::arg("term") = py::none())
      .def("grad", &PySession::grad, py::arg("wrt") = py::none())
      .def("step",
           [](PySession &self) { check(self.session->step(), "RuntimeError"); })
      .def("run", &PySession::run, py::arg("steps") = py::none(),
           py::arg("trace") = false)
      .def("loss_grad", &PySession::lossGrad, py::arg("steps") = py::none(),
           py::arg("store_all_steps") = false, py::arg("grads") = true)
      .def("reset_states",
           [](PySession &self) {
             check(self.session->resetStates(), "RuntimeError");
           })
      .def_property_readonly(
          "notes", [](PySession &self) { return self.session->notes(); });
}
