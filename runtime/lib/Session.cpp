//===- Session.cpp - A session's tensor values and kernel calls -----------===//
//
// prepare() builds every buffer in local variables and installs them only
// when all have succeeded, so that an error (an unbound dim, a conflicting
// shape) leaves the session as it was and can be fixed by binding again.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Session.h"
#include "energy/Runtime/CudaDriver.h"
#include "energy/Runtime/DimInference.h"

#include "ModelState.h"

#include "energy/Runtime/Initializer.h"
#include "energy/Runtime/Log.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

using namespace energy;

/// "a, b, c", or "none".
static std::string nameList(const std::vector<std::string> &names) {
  if (names.empty())
    return "none";
  std::string text;
  for (const std::string &name : names)
    text += (text.empty() ? "" : ", ") + name;
  return text;
}

/// How a buffer is named in messages: "tensor 'x'", "gradient 'grad.x'",
/// "output 'y'".
static std::string bufferLabel(const ManifestBuffer &buffer) {
  switch (buffer.kind) {
  case BufferKind::Tensor:
    return "tensor '" + buffer.name + "'";
  case BufferKind::Gradient:
    return "gradient '" + buffer.name + "'";
  case BufferKind::Output:
    return "output '" + buffer.name + "'";
  }
  return "buffer '" + buffer.name + "'";
}

/// The message for kernel return code `code`.
static std::string kernelFailure(int32_t code) {
  switch (code) {
  case ENERGY_KERNEL_NO_CONVERGENCE:
    return "an adaptive step did not converge within its maximum number of "
           "rounds";
  case ENERGY_KERNEL_OUT_OF_MEMORY:
    return "out of memory for its scratch space";
  case ENERGY_KERNEL_INVALID_ARGUMENT:
    return "a value outside its domain (a temperature that is not finite and "
           "positive)";
  case ENERGY_KERNEL_DEVICE_ERROR:
    return "the GPU failed";
  default:
    return "unknown error code " + std::to_string(code);
  }
}

Expected<Session> Session::create(const Model &model,
                                  const SessionOptions &options) {
  const Manifest &manifest = model.manifest();
  Session session(model);
  for (const auto &[name, value] : options.dims) {
    std::optional<size_t> index = manifest.findDim(name);
    if (!index) {
      std::vector<std::string> names;
      for (const ManifestDim &dim : manifest.dims)
        names.push_back(dim.name);
      return Status::error("model " + manifest.model + " has no dim " + name +
                           " (its dims: " + nameList(names) + ")");
    }
    const ManifestDim &dim = manifest.dims[*index];
    if (dim.derived)
      return Status::error("dim " + name + " is derived (" +
                           dim.derived->text() + "); it cannot be given");
    if (value < 0)
      return Status::error("dim " + name + " cannot be negative (" +
                           std::to_string(value) + ")");
  }
  if (manifest.target && manifest.target->device == "cuda") {
    Expected<TensorMemory> memory = cudaManagedMemory();
    if (!memory) {
      std::string archs;
      for (const std::string &arch : manifest.target->deviceArchs)
        archs += (archs.empty() ? "" : ", ") + arch;
      return Status::error("model " + manifest.model +
                           " is compiled for CUDA (" + archs +
                           ") and needs a GPU: " + memory.status().message());
    }
    session.deviceMemory = *memory;
  }
  session.givenDims = options.dims;
  session.seed = options.seed;
  session.memoryLimit = options.memoryLimit;
  for (const ManifestConst &constant : manifest.consts)
    session.consts.push_back(constant.value);
  for (const auto &[name, value] : options.consts) {
    std::optional<size_t> index = manifest.findConst(name);
    if (!index) {
      std::vector<std::string> names;
      for (const ManifestConst &constant : manifest.consts)
        names.push_back(constant.name);
      return Status::error("model " + manifest.model + " has no const " + name +
                           " (its consts: " + nameList(names) + ")");
    }
    session.consts[*index] = value;
  }
  return session;
}

Status Session::set(const std::string &name, const Tensor &value) {
  return bind(name, value, /*onDevice=*/false);
}

Status Session::setFromDevice(const std::string &name, const Tensor &value) {
  const Manifest &manifest = owner.manifest();
  if (!deviceMemory)
    return Status::error("setFromDevice('" + name + "'): model " +
                         manifest.model +
                         " runs on the CPU; it takes host arrays (set)");
  if (!value.borrowed())
    return Status::error("setFromDevice('" + name +
                         "'): the value must be borrowed GPU memory");
  if (value.dtype() != manifest.dtype)
    return Status::error("tensor '" + name + "' is given on the GPU as " +
                         std::string(dtypeName(value.dtype())) + "; model " +
                         manifest.model + " takes " +
                         std::string(dtypeName(manifest.dtype)) +
                         " (convert it on the device first)");
  return bind(name, value, /*onDevice=*/true);
}

Status Session::bind(const std::string &name, const Tensor &value,
                     bool onDevice) {
  const Manifest &manifest = owner.manifest();
  std::optional<size_t> index = manifest.findBuffer(name);
  if (!index || manifest.buffers[*index].kind != BufferKind::Tensor)
    return Status::error(
        "'" + name + "' is not a tensor of model " + manifest.model +
        " (its tensors: " + nameList(owner.tensorNames()) + ")");
  const ManifestBuffer &buffer = manifest.buffers[*index];
  if (static_cast<size_t>(value.rank()) != buffer.shape.size() ||
      (prepared && value.shape() != shapes[*index]))
    return Status::error(
        "tensor '" + name + "' is declared " + buffer.shapeText() +
            (prepared ? " = " + Tensor::shapeText(shapes[*index]) : "") +
            " but given " + value.shapeString(),
        ErrorKind::Shape);
  if (onDevice) {
    if (!prepared) {
      bound[name] = value.view();
      boundOnDevice.insert(name);
      return Status::success();
    }
    residentOnDevice[*index] = false;
    return copyFromDevice(buffers[*index].data(), value.data(),
                          value.byteSize(), stream)
        .withContext("tensor '" + name + "'");
  }
  // Borrowed elements of an input or param are used in place: the kernels
  // write states only.
  bool share = value.borrowed() && value.dtype() == manifest.dtype &&
               buffer.role != TensorRole::State && !deviceMemory;
  Tensor converted = share ? value.view()
                     : value.dtype() == manifest.dtype
                         ? value
                         : value.converted(manifest.dtype);
  if (value.dtype() != manifest.dtype)
    noteList.push_back(
        "tensor '" + name + "' was given as " +
        std::string(dtypeName(value.dtype())) + " and converted to " +
        std::string(dtypeName(manifest.dtype)) + ", the model's element type");
  if (prepared && deviceMemory) {
    // Into the buffer the kernels use, on the device.
    copyToDevice(buffers[*index].data(), converted.data(),
                 converted.byteSize());
    residentOnDevice[*index] = false;
  } else if (prepared)
    buffers[*index] = std::move(converted);
  else {
    bound[name] = std::move(converted);
    boundOnDevice.erase(name);
  }
  return Status::success();
}

Status Session::resolveDims(std::vector<int64_t> &values) const {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto &[name, tensor] : bound)
    shapes[name] = tensor.shape();
  return energy::resolveDims(owner.manifest(), givenDims, "--dim/options",
                             shapes, values);
}

Status
Session::checkMemory(const std::vector<std::vector<int64_t>> &shapes) const {
  const Manifest &manifest = owner.manifest();
  uint64_t limit = memoryLimit.value_or(machineMemoryBytes());
  std::string limitText = (memoryLimit ? "the session's memory limit, "
                                       : "the memory this machine has, ") +
                          byteCountText(limit);
  size_t elementSize = dtypeSize(manifest.dtype);
  uint64_t total = 0;
  for (size_t i = 0; i < manifest.buffers.size(); ++i) {
    const ManifestBuffer &buffer = manifest.buffers[i];
    std::string where = bufferLabel(buffer) + " " + buffer.shapeText();
    std::optional<int64_t> elements =
        checkedElementCount(shapes[i], elementSize);
    if (!elements)
      return allocationBytes(manifest.dtype, shapes[i])
          .status()
          .withContext(where);
    uint64_t bytes = static_cast<uint64_t>(*elements) * elementSize;
    if (bytes > limit - total)
      return Status::error(
          where + ": " + cannotAllocateText(manifest.dtype, shapes[i], bytes) +
          ": " +
          (total ? "with the " + byteCountText(total) +
                       " of the buffers before it, more than "
                 : "more than ") +
          limitText);
    total += bytes;
  }
  return Status::success();
}

Status Session::prepare() {
  if (prepared)
    return Status::success();
  const Manifest &manifest = owner.manifest();
  std::vector<int64_t> newDims;
  if (Status status = resolveDims(newDims); !status)
    return status;
  auto lookup = [&](const std::string &name) -> std::optional<int64_t> {
    return newDims[*manifest.findDim(name)];
  };
  // Index checks over dims alone; those over `step` wait for each call.
  for (const ManifestIndexCheck &check : manifest.indexChecks)
    if (!check.usesStep())
      if (Status status = check.check(lookup); !status)
        return status;

  std::vector<std::vector<int64_t>> newShapes;
  for (const ManifestBuffer &buffer : manifest.buffers) {
    std::vector<int64_t> shape;
    for (size_t axis = 0; axis < buffer.shape.size(); ++axis) {
      std::string where = "buffer '" + buffer.name + "': axis " +
                          std::to_string(axis) + " (" +
                          buffer.shape[axis].text() + ")";
      Expected<int64_t> size = buffer.shape[axis].evaluate(lookup);
      if (!size)
        return size.status().withContext(where);
      if (*size < 0)
        return Status::error(where + " is negative: " + std::to_string(*size));
      shape.push_back(*size);
    }
    auto value = bound.find(buffer.name);
    if (value != bound.end() && value->second.shape() != shape)
      return Status::error("tensor '" + buffer.name + "' is declared " +
                               buffer.shapeText() + " = " +
                               Tensor::shapeText(shape) + " but given " +
                               value->second.shapeString(),
                           ErrorKind::Shape);
    newShapes.push_back(std::move(shape));
  }
  if (Status status = checkMemory(newShapes); !status)
    return status;

  // Every buffer but the copies, which wait for their sources.
  std::vector<std::optional<Tensor>> values(manifest.buffers.size());
  // Which values are borrowed GPU memory (setFromDevice), which only the
  // driver's copies may read.
  std::vector<bool> onDevice(manifest.buffers.size(), false);
  for (size_t i = 0; i < manifest.buffers.size(); ++i) {
    const ManifestBuffer &buffer = manifest.buffers[i];
    if (buffer.kind != BufferKind::Tensor) {
      Expected<Tensor> value = Tensor::allocate(manifest.dtype, newShapes[i]);
      if (!value)
        return value.status().withContext(bufferLabel(buffer) + " " +
                                          buffer.shapeText());
      values[i] = std::move(*value);
    } else if (auto value = bound.find(buffer.name); value != bound.end()) {
      values[i] =
          value->second.borrowed() ? value->second.view() : value->second;
      onDevice[i] = boundOnDevice.count(buffer.name) > 0;
    } else if (!buffer.init || buffer.init->kind != InitKind::Copy) {
      Expected<Tensor> value = initialValue(manifest.dtype, newShapes[i],
                                            buffer.name, buffer.init, seed);
      if (!value)
        return value.status();
      values[i] = std::move(*value);
    }
  }
  // The manifest has no cycles of copies, so each round settles at least
  // one copy.
  for (bool pending = true; pending;) {
    pending = false;
    for (size_t i = 0; i < manifest.buffers.size(); ++i) {
      if (values[i])
        continue;
      const ManifestBuffer &buffer = manifest.buffers[i];
      size_t source = *manifest.findBuffer(buffer.init->source);
      if (!values[source]) {
        pending = true;
        continue;
      }
      if (newShapes[source] != newShapes[i])
        return Status::error(
            "tensor '" + buffer.name + "' is declared " + buffer.shapeText() +
                " = " + Tensor::shapeText(newShapes[i]) +
                " but its copy source '" + buffer.init->source + "' is " +
                Tensor::shapeText(newShapes[source]),
            ErrorKind::Shape);
      values[i] = onDevice[source] ? values[source]->view() : *values[source];
      onDevice[i] = onDevice[source];
    }
  }

  if (deviceMemory) {
    for (size_t i = 0; i < values.size(); ++i) {
      std::string label = bufferLabel(manifest.buffers[i]) + " " +
                          manifest.buffers[i].shapeText();
      Expected<Tensor> copy =
          onDevice[i]
              ? Tensor::allocate(manifest.dtype, newShapes[i], *deviceMemory)
              : values[i]->copyTo(*deviceMemory);
      if (!copy)
        return copy.status().withContext(label);
      if (onDevice[i])
        if (Status status = copyFromDevice(copy->data(), values[i]->data(),
                                           copy->byteSize(), stream);
            !status)
          return status.withContext(label);
      values[i] = std::move(*copy);
    }
    Expected<Tensor> arguments =
        Tensor::allocate(DType::F64,
                         {static_cast<int64_t>(values.size() + newDims.size() +
                                               consts.size() + 1)},
                         *deviceMemory);
    if (!arguments)
      return arguments.status().withContext("the kernels' arguments");
    deviceArguments = std::move(*arguments);
  }
  dimValues = std::move(newDims);
  shapes = std::move(newShapes);
  buffers.clear();
  for (std::optional<Tensor> &value : values)
    buffers.push_back(std::move(*value));
  bound.clear();
  boundOnDevice.clear();
  residentOnDevice.assign(buffers.size(), false);
  prepared = true;
  if (owner.state->backwardStep.function)
    for (size_t i = 0; i < manifest.buffers.size(); ++i)
      if (isForwardState(manifest.buffers[i]))
        initialStates[i] = readBuffer(i);
  return Status::success();
}

namespace {
/// Reports a line of ENERGY_CUDA_TRACE's timings, printf-style.
template <typename... Arguments>
void trace(const char *format, Arguments... arguments) {
  char text[512];
  std::snprintf(text, sizeof text, format, arguments...);
  logMessage(LogLevel::Trace, text);
}

/// Milliseconds since `start`.
double millisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}
} // namespace

Status Session::waitForQueuedCopies() {
  if (!queuedCopies)
    return Status::success();
  queuedCopies = false;
  return waitForStream(stream);
}

const Tensor &Session::readBuffer(size_t index) {
  const Tensor &buffer = buffers[index];
  if (deviceMemory) {
    residentOnDevice[index] = false;
    auto start = std::chrono::steady_clock::now();
    // A failed wait leaves the GPU failed; the next call reports it.
    (void)waitForQueuedCopies();
    prefetchManaged(buffer.data(), buffer.byteSize(), /*toDevice=*/false,
                    stream);
    if (cudaTracing())
      trace("energy-cuda: %s to the host: %zu bytes, %.3f ms",
            owner.manifest().buffers[index].name.c_str(), buffer.byteSize(),
            millisecondsSince(start));
  }
  return buffer;
}

Status Session::call(energy_kernel_fn kernel, const std::string &symbol,
                     int64_t step, double *result) {
  const Manifest &manifest = owner.manifest();
  for (const ManifestIndexCheck &check : manifest.indexChecks)
    if (check.usesStep()) {
      auto dims = [&](const std::string &name) -> std::optional<int64_t> {
        return dimValues[*manifest.findDim(name)];
      };
      if (Status status = check.check(dims, step); !status)
        return status;
    }
  if (deviceMemory && owner.state->setStream) {
    // The kernel's host code waits for what was queued before it, where
    // it reads what that work may write.
    owner.state->setStream(stream, stream != nullptr || queuedCopies);
    queuedCopies = false;
  } else if (deviceMemory && (stream || queuedCopies)) {
    // An artifact without the setter: its host code waits for nothing
    // queued before the call, so the runtime does, first.
    queuedCopies = false;
    if (Status status = waitForStream(stream); !status)
      return status.withContext(symbol);
  }
  std::vector<void *> pointers;
  bool tracing = deviceMemory && cudaTracing();
  auto start = std::chrono::steady_clock::now();
  size_t bytes = 0, moved = 0;
  for (size_t i = 0; i < buffers.size(); ++i) {
    Tensor &buffer = buffers[i];
    pointers.push_back(buffer.data());
    // Moving what is there already costs the driver a walk of its pages.
    if (deviceMemory && !residentOnDevice[i]) {
      prefetchManaged(buffer.data(), buffer.byteSize(), /*toDevice=*/true,
                      stream);
      residentOnDevice[i] = true;
      bytes += buffer.byteSize();
      ++moved;
    }
  }
  for (auto [index, data] : readElsewhere)
    pointers[index] = data;
  if (tracing) {
    synchronizeDevice();
    trace("energy-cuda: the buffers to the device: %zu of %zu buffers, %zu "
          "bytes, %.3f ms",
          moved, buffers.size(), bytes, millisecondsSince(start));
    start = std::chrono::steady_clock::now();
  }
  double ignored = 0;
  int32_t code = ENERGY_KERNEL_OK;
  bool reportingWaits = deviceMemory && cudaReportingWaits();
  if (reportingWaits)
    trace("energy-cuda: call %s begins", symbol.c_str());
  if (deviceArguments) {
    // The same arrays, in memory the GPU reaches.
    std::byte *arguments = deviceArguments->data();
    auto append = [&](const void *data, size_t count) {
      std::memcpy(arguments, data, count * 8);
      return std::exchange(arguments, arguments + count * 8);
    };
    static_assert(sizeof(void *) == 8 && sizeof(double) == 8);
    void *devicePointers = append(pointers.data(), pointers.size());
    void *deviceDims = append(dimValues.data(), dimValues.size());
    void *deviceConsts = append(consts.data(), consts.size());
    auto *deviceResult = reinterpret_cast<double *>(arguments);
    *deviceResult = 0;
    code =
        kernel(static_cast<void **>(devicePointers),
               static_cast<const int64_t *>(deviceDims),
               static_cast<const double *>(deviceConsts), step, deviceResult);
    (result ? *result : ignored) = *deviceResult;
  } else {
    code = kernel(pointers.data(), dimValues.data(), consts.data(), step,
                  result ? result : &ignored);
  }
  if (tracing)
    trace("energy-cuda: %s, the whole call: %.3f ms", symbol.c_str(),
          millisecondsSince(start));
  if (reportingWaits)
    trace("energy-cuda: call %s ends", symbol.c_str());
  if (code == ENERGY_KERNEL_DEVICE_ERROR && owner.state->deviceError)
    return Status::error("kernel " + symbol +
                         ": the GPU failed: " + owner.state->deviceError());
  if (code != ENERGY_KERNEL_OK)
    return Status::error("kernel " + symbol + ": " + kernelFailure(code));
  return Status::success();
}

Session::CallScope::CallScope(Session &session, bool backward)
    : session(session) {
  // A failure to prepare is the method's to report, when it prepares.
  if (session.callDepth++ > 0 || !session.prepare())
    return;
  const Manifest &manifest = session.owner.manifest();
  for (size_t i = 0; i < manifest.buffers.size(); ++i) {
    if (!manifest.buffers[i].flagOf)
      continue;
    // 0: compute and keep; -1: compute, keep nothing (a row per step, in a
    // call that runs no backward step to read it).
    bool perStep = !manifest.buffers[i].shape.empty();
    Tensor &flags = session.buffers[i];
    for (int64_t slot = 0; slot < flags.elementCount(); ++slot)
      flags.set(slot, perStep && !backward ? -1.0 : 0.0);
  }
}

Status Session::setDim(const std::string &name, int64_t value) {
  if (Status status = prepare(); !status)
    return status;
  const Manifest &manifest = owner.manifest();
  std::optional<size_t> index = manifest.findDim(name);
  if (!index)
    return Status::error("model " + owner.name() + " has no dim '" + name +
                         "'");
  auto uses = [&](const DimExpr &expr) {
    for (const std::string &used : expr.dimNames())
      if (used == name)
        return true;
    return false;
  };
  bool sizes = manifest.dims[*index].derived.has_value();
  for (const ManifestDim &dim : manifest.dims)
    sizes = sizes || (dim.derived && uses(*dim.derived));
  for (const ManifestBuffer &buffer : manifest.buffers)
    for (const DimExpr &axis : buffer.shape)
      sizes = sizes || uses(axis);
  if (sizes)
    return Status::error("dim '" + name + "' of model " + owner.name() +
                         " sizes tensors or other dims; it is set when the "
                         "session is created");
  dimValues[*index] = value;
  return Status::success();
}

uint64_t Session::bufferBytes() const {
  uint64_t total = 0;
  for (const Tensor &buffer : buffers)
    total += buffer.byteSize();
  return total;
}

Expected<std::vector<int64_t>> Session::shapeOf(const std::string &name) const {
  const Manifest &manifest = owner.manifest();
  std::optional<size_t> index = manifest.findBuffer(name);
  if (!index)
    return Status::error("model " + owner.name() + " has no tensor '" + name +
                         "'");
  if (prepared)
    return shapes[*index];
  std::vector<int64_t> values;
  if (Status status = resolveDims(values); !status)
    return status;
  std::vector<int64_t> shape;
  for (const DimExpr &axis : manifest.buffers[*index].shape) {
    Expected<int64_t> size =
        axis.evaluate([&](const std::string &dim) -> std::optional<int64_t> {
          if (std::optional<size_t> at = manifest.findDim(dim))
            return values[*at];
          return std::nullopt;
        });
    if (!size)
      return size.status();
    shape.push_back(*size);
  }
  return shape;
}

Expected<std::map<std::string, int64_t>> Session::dims() {
  if (Status status = prepare(); !status)
    return status;
  std::map<std::string, int64_t> values;
  for (size_t i = 0; i < dimValues.size(); ++i)
    values[owner.manifest().dims[i].name] = dimValues[i];
  return values;
}

Status Session::evaluate(const detail::Kernel &kernel, double *result) {
  if (Status status = prepare(); !status)
    return status;
  return call(kernel.function, kernel.symbol, evaluationStep(), result);
}

Expected<double> Session::energy() {
  CallScope scope(*this);
  double result = 0;
  if (Status status = evaluate(owner.state->energy, &result); !status)
    return status;
  return result;
}

Expected<double> Session::termEnergy(const std::string &term) {
  auto kernel = owner.state->terms.find(term);
  if (kernel == owner.state->terms.end())
    return Status::error("model " + owner.name() + " has no energy term '" +
                         term + "' (its terms: " + nameList(owner.termNames()) +
                         ")");
  CallScope scope(*this);
  double result = 0;
  if (Status status = evaluate(kernel->second, &result); !status)
    return status;
  return result;
}

Expected<Tensor> Session::gradient(const std::string &tensor) {
  Expected<const Tensor *> computed = computeGradient(tensor);
  if (!computed)
    return computed.status();
  return readBuffer(*owner.manifest().findGradientBuffer(tensor));
}

/// The joint gradient kernel that writes every tensor of `tensors` (two or
/// more) and the fewest others; null for none.
static const detail::Kernel *
coveringJointGradient(const detail::ModelState &state,
                      const std::vector<std::string> &tensors) {
  if (tensors.size() < 2)
    return nullptr;
  const detail::Kernel *best = nullptr;
  size_t bestSize = 0;
  for (const auto &[written, kernel] : state.jointGradients) {
    bool covers = std::all_of(tensors.begin(), tensors.end(),
                              [&](const std::string &tensor) {
                                return std::find(written.begin(), written.end(),
                                                 tensor) != written.end();
                              });
    if (covers && (!best || written.size() < bestSize)) {
      best = &kernel;
      bestSize = written.size();
    }
  }
  return best;
}

Expected<std::vector<Tensor>>
Session::gradients(const std::vector<std::string> &tensors) {
  std::vector<Tensor> values;
  const detail::Kernel *joint = coveringJointGradient(*owner.state, tensors);
  if (!joint) {
    for (const std::string &tensor : tensors) {
      Expected<Tensor> value = gradient(tensor);
      if (!value)
        return value.status();
      values.push_back(std::move(*value));
    }
    return values;
  }
  CallScope scope(*this);
  if (Status status = evaluate(*joint); !status)
    return status;
  for (const std::string &tensor : tensors)
    values.push_back(readBuffer(*owner.manifest().findGradientBuffer(tensor)));
  return values;
}

Expected<const Tensor *> Session::computeGradient(const std::string &tensor) {
  auto kernel = owner.state->gradients.find(tensor);
  if (kernel == owner.state->gradients.end())
    return Status::error(
        "model " + owner.name() + " has no gradient of '" + tensor +
        "' (it has gradients of: " + nameList(owner.gradientNames()) + ")");
  CallScope scope(*this);
  if (Status status = evaluate(kernel->second); !status)
    return status;
  size_t index = *owner.manifest().findGradientBuffer(tensor);
  // Handed out: where it is read next is the caller's choice.
  if (deviceMemory)
    residentOnDevice[index] = false;
  return &buffers[index];
}

Expected<size_t> Session::valueBuffer(const std::string &name) {
  const Manifest &manifest = owner.manifest();
  std::optional<size_t> index = manifest.findBuffer(name);
  if (!index || manifest.buffers[*index].kind == BufferKind::Gradient)
    return Status::error(
        "'" + name + "' is not a tensor or output of model " + manifest.model +
        " (its tensors: " + nameList(owner.tensorNames()) +
        "; its outputs: " + nameList(owner.outputNames()) + ")");
  if (manifest.buffers[*index].kind != BufferKind::Output) {
    if (Status status = prepare(); !status)
      return status;
    return *index;
  }
  CallScope scope(*this);
  if (Status status = evaluate(owner.state->outputs.at(name)); !status)
    return status;
  return *index;
}

Expected<Tensor> Session::get(const std::string &name) {
  Expected<size_t> index = valueBuffer(name);
  if (!index)
    return index.status();
  return readBuffer(*index);
}

Expected<Tensor *> Session::deviceBuffer(const std::string &name) {
  if (!deviceMemory)
    return Status::error("deviceBuffer('" + name + "'): model " +
                         owner.manifest().model +
                         " runs on the CPU; its tensors are host arrays (get)");
  Expected<size_t> index = valueBuffer(name);
  if (!index)
    return index.status();
  Tensor &buffer = buffers[*index];
  prefetchManaged(buffer.data(), buffer.byteSize(), /*toDevice=*/true, stream);
  residentOnDevice[*index] = false;
  return &buffer;
}

Expected<const Tensor *> Session::deviceGradient(const std::string &tensor) {
  if (!deviceMemory)
    return Status::error("deviceGradient('" + tensor + "'): model " +
                         owner.manifest().model +
                         " runs on the CPU; its gradients are host arrays "
                         "(gradient)");
  return computeGradient(tensor);
}

Status Session::setStream(void *applicationStream) {
  if (!deviceMemory)
    return Status::error("setStream: model " + owner.manifest().model +
                         " runs on the CPU, not on a CUDA stream");
  stream = applicationStream;
  return Status::success();
}

Expected<std::map<std::string, Tensor>> Session::stateTensors() {
  if (Status status = prepare(); !status)
    return status;
  std::map<std::string, Tensor> values;
  const Manifest &manifest = owner.manifest();
  for (size_t i = 0; i < manifest.buffers.size(); ++i)
    if (isModelTensor(manifest.buffers[i]) &&
        manifest.buffers[i].role == TensorRole::State)
      values[manifest.buffers[i].name] = readBuffer(i);
  return values;
}
