//===- Model.cpp - A loaded artifact: manifest and kernels ----------------===//
//
// load() opens the library with dlopen and hands dlsym to fromSymbols, so
// artifacts on disk and code compiled in the process are checked by the
// same code: the manifest, the CPU its target names against the running one
// (before any kernel is called), and every kernel it names.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Model.h"

#include "ModelState.h"

#include "energy/Runtime/CpuFeatures.h"
#include "energy/Runtime/Log.h"
#include "energy/Runtime/Session.h"

#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <sys/stat.h>
#include <tuple>

using namespace energy;
using detail::Kernel;
using detail::ModelState;

Expected<Model> Model::load(const std::string &path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0)
    return Status::error(path + ": cannot open: " + std::strerror(errno));
  if (!S_ISREG(info.st_mode))
    return Status::error(path + ": not a regular file");
  // Without a slash dlopen would search the library path instead.
  std::string openPath =
      path.find('/') == std::string::npos ? "./" + path : path;
  dlerror();
  void *handle = dlopen(openPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *reason = dlerror();
    return Status::error(path + ": not a shared library that can be loaded: " +
                         (reason ? reason : "unknown reason"));
  }
  std::shared_ptr<void> keepAlive(handle,
                                  [](void *handle) { dlclose(handle); });
  // The artifact's calls of its support code bind to the process's own copy
  // where the process exports one (the tools do): its messages go to the
  // runtime's handler too. fromSymbols sets the artifact's.
  if (auto setLogHandler = reinterpret_cast<energy_set_log_handler_fn>(
          dlsym(RTLD_DEFAULT, ENERGY_ARTIFACT_SET_LOG_HANDLER_SYMBOL)))
    setLogHandler(&detail::logFromArtifact);
  return fromSymbols(
      path,
      [handle](const std::string &symbol) {
        // The artifact's calls of its CUDA support code bind to the
        // definition in the global scope (the executable's, the tools
        // export one) before its own, and so must the runtime's.
        if (symbol == ENERGY_ARTIFACT_DEVICE_ERROR_SYMBOL ||
            symbol == ENERGY_ARTIFACT_SET_STREAM_SYMBOL) {
          static void *globalScope = dlopen(nullptr, RTLD_NOW);
          if (void *global = dlsym(globalScope, symbol.c_str()))
            return global;
        }
        return dlsym(handle, symbol.c_str());
      },
      std::move(keepAlive));
}

Expected<Model> Model::fromSymbols(std::string label, SymbolLookup lookup,
                                   std::shared_ptr<void> keepAlive) {
  auto manifestFunction = reinterpret_cast<energy_manifest_fn>(
      lookup(ENERGY_ARTIFACT_MANIFEST_SYMBOL));
  if (!manifestFunction)
    return Status::error(label + " is not an energy artifact: it does not "
                                 "export " ENERGY_ARTIFACT_MANIFEST_SYMBOL);
  const char *text = manifestFunction();
  if (!text)
    return Status::error(label + ": " ENERGY_ARTIFACT_MANIFEST_SYMBOL
                                 " returned no manifest");
  Expected<Manifest> manifest = Manifest::parse(text);
  if (!manifest)
    return manifest.status().withContext(label + ": manifest");
  // Before any kernel can run: code for a CPU this one is not would die on
  // an illegal instruction.
  if (manifest->target)
    if (Status status = checkTargetRuns(*manifest->target, HostCpu::running());
        !status)
      return status.withContext(label);

  // Before any kernel can run: the plugins' code the kernels call.
  if (Status status = detail::bindPluginCode(*manifest, lookup, label); !status)
    return status;

  auto state = std::make_shared<ModelState>();
  state->label = std::move(label);
  state->keepAlive = std::move(keepAlive);
  state->manifest = std::move(*manifest);
  state->manifestText = text;
  // Resolves `symbol`, the kernel that computes `what`.
  auto resolve = [&](const std::string &symbol, const std::string &what,
                     Kernel &out) -> Status {
    out.symbol = symbol;
    out.function = reinterpret_cast<energy_kernel_fn>(lookup(symbol));
    if (!out.function)
      return Status::error(state->label + ": the manifest names kernel " +
                           symbol + " (" + what +
                           "), which the artifact does not export");
    return Status::success();
  };
  const ManifestKernels &kernels = state->manifest.kernels;
  if (Status status = resolve(kernels.energy, "the energy", state->energy);
      !status)
    return status;
  for (const auto &[term, symbol] : kernels.terms)
    if (Status status = resolve(symbol, "the energy of term '" + term + "'",
                                state->terms[term]);
        !status)
      return status;
  for (const auto &[tensor, symbol] : kernels.gradients)
    if (Status status = resolve(symbol, "the gradient of '" + tensor + "'",
                                state->gradients[tensor]);
        !status)
      return status;
  for (const ManifestKernels::JointGradient &joint : kernels.jointGradients)
    if (Status status = resolve(joint.kernel, "a joint gradient",
                                state->jointGradients[joint.tensors]);
        !status)
      return status;
  for (const auto &[output, symbol] : kernels.outputs)
    if (Status status =
            resolve(symbol, "output '" + output + "'", state->outputs[output]);
        !status)
      return status;
  if (kernels.step)
    if (Status status = resolve(*kernels.step, "the step", state->step);
        !status)
      return status;
  if (kernels.until)
    if (Status status =
            resolve(*kernels.until, "the stopping rule", state->until);
        !status)
      return status;
  for (auto [symbol, what, kernel] :
       {std::tuple{&kernels.runBegin, "the start of a run", &state->runBegin},
        std::tuple{&kernels.runFinish, "the end of a run", &state->runFinish}})
    if (*symbol)
      if (Status status = resolve(**symbol, what, *kernel); !status)
        return status;
  for (const auto &[loss, symbol] : kernels.losses)
    if (Status status =
            resolve(symbol, "loss '" + loss + "'", state->losses[loss]);
        !status)
      return status;
  if (kernels.backward) {
    const ManifestKernels::Backward &parts = *kernels.backward;
    for (auto [symbol, what, out] :
         {std::tuple{&parts.seed, "the loss's gradient", &state->backwardSeed},
          std::tuple{&parts.step, "the backward step", &state->backwardStep},
          std::tuple{&parts.finish, "the backward finish",
                     &state->backwardFinish}})
      if (Status status = resolve(*symbol, what, *out); !status)
        return status;
    if (parts.cotangents)
      if (Status status =
              resolve(*parts.cotangents, "the backward step's cotangents",
                      state->backwardCotangents);
          !status)
        return status;
  }
  if (auto setLogHandler = reinterpret_cast<energy_set_log_handler_fn>(
          lookup(ENERGY_ARTIFACT_SET_LOG_HANDLER_SYMBOL)))
    setLogHandler(&detail::logFromArtifact);
  state->setThreads = reinterpret_cast<energy_set_threads_fn>(
      lookup(ENERGY_ARTIFACT_SET_THREADS_SYMBOL));
  if (state->manifest.target && state->manifest.target->device == "cuda") {
    state->deviceError = reinterpret_cast<energy_device_error_fn>(
        lookup(ENERGY_ARTIFACT_DEVICE_ERROR_SYMBOL));
    state->setStream = reinterpret_cast<energy_set_stream_fn>(
        lookup(ENERGY_ARTIFACT_SET_STREAM_SYMBOL));
  }
  return Model(std::move(state));
}

const std::string &Model::label() const { return state->label; }

const Manifest &Model::manifest() const { return state->manifest; }

const std::string &Model::manifestText() const { return state->manifestText; }

std::vector<std::string> Model::tensorNames() const {
  std::vector<std::string> names;
  for (const ManifestBuffer &buffer : manifest().buffers)
    if (isModelTensor(buffer))
      names.push_back(buffer.name);
  return names;
}

std::vector<std::string> Model::outputNames() const {
  return manifest().bufferNames(BufferKind::Output);
}

std::vector<std::string> Model::termNames() const {
  std::vector<std::string> names;
  for (const auto &[term, symbol] : manifest().kernels.terms)
    names.push_back(term);
  return names;
}

std::vector<std::string> Model::lossNames() const {
  std::vector<std::string> names;
  for (const auto &[loss, symbol] : manifest().kernels.losses)
    names.push_back(loss);
  return names;
}

std::vector<std::string> Model::adjointNames() const {
  std::vector<std::string> names;
  for (const ManifestBuffer &buffer : manifest().buffers) {
    if (!buffer.adjointOf)
      continue;
    std::optional<size_t> of = manifest().findBuffer(*buffer.adjointOf);
    if (of && isModelTensor(manifest().buffers[*of]))
      names.push_back(*buffer.adjointOf);
  }
  return names;
}

std::vector<std::string> Model::gradientNames() const {
  std::vector<std::string> names;
  for (const ManifestBuffer &buffer : manifest().buffers)
    if (buffer.kind == BufferKind::Tensor &&
        manifest().kernels.gradients.count(buffer.name))
      names.push_back(buffer.name);
  return names;
}

bool Model::hasThreads() const { return state->setThreads != nullptr; }

bool Model::setThreads(int threads) const {
  if (!state->setThreads)
    return false;
  state->setThreads(threads);
  return true;
}

Expected<Session> Model::session() const { return session(SessionOptions()); }

Expected<Session> Model::session(const SessionOptions &options) const {
  return Session::create(*this, options);
}
