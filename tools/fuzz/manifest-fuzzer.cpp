//===- manifest-fuzzer.cpp - libFuzzer target of artifact manifests -------===//
//
// Feeds each input, as the JSON text of an artifact's manifest, to the
// runtime's reader (Manifest::parse, on the strict JSON reader). A manifest
// that parses is then loaded as a model whose every kernel is a stub that
// succeeds (Model::fromSymbols, as the JIT does) and run through a session:
// free dims 3 (or their defaults), a 1 MB memory limit, the energy, every
// gradient and output, two steps. So every dim expression, shape and
// initialiser the reader lets through is evaluated and allocated (except in
// manifests that name plugins, whose libraries loading would open). Findings
// are crashes, sanitizer reports, hangs (a copy cycle the reader missed)
// and errors without a message.
//
// Build and run: make fuzz (see docs/tools.md).
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/ArtifactABI.h"
#include "energy/Runtime/Manifest.h"
#include "energy/Runtime/Model.h"
#include "energy/Runtime/Session.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>

using namespace energy;

/// Reports a broken contract and stops, so that libFuzzer keeps the input.
static void fail(const char *what) {
  std::fprintf(stderr, "manifest-fuzzer: %s\n", what);
  std::abort();
}

/// An error must say something.
template <typename T> static bool check(const T &result) {
  if (!result.ok() && result.message().empty())
    fail("an error without a message");
  return result.ok();
}

/// The manifest the stub artifact gives (what the current input holds).
static const char *currentManifest = "";

static const char *stubManifest() { return currentManifest; }

static int32_t stubKernel(void **buffers, const int64_t *dims,
                          const double *consts, int64_t step, double *result) {
  *result = 0;
  return ENERGY_KERNEL_OK;
}

static void stubSetThreads(int32_t threads) {}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  Expected<Manifest> manifest = Manifest::parse(text);
  if (!check(manifest))
    return 0;
  for (const ManifestBuffer &buffer : manifest->buffers)
    (void)buffer.shapeText();
  for (const ManifestDim &dim : manifest->dims)
    if (dim.derived)
      (void)dim.derived->text();
  // Loading a model opens the run-time libraries of the plugins its
  // manifest names (dlopen, running their constructors): not for paths
  // that come from fuzz input.
  if (!manifest->plugins.empty())
    return 0;

  // The stub exports the manifest, the threads setter and the kernels the
  // manifest names, nothing else.
  const ManifestKernels &kernels = manifest->kernels;
  std::set<std::string> symbols = {kernels.energy};
  for (const auto &named :
       {kernels.terms, kernels.gradients, kernels.outputs})
    for (const auto &[name, symbol] : named)
      symbols.insert(symbol);
  for (const std::optional<std::string> &symbol : {kernels.step, kernels.until})
    if (symbol)
      symbols.insert(*symbol);
  currentManifest = text.c_str();
  Expected<Model> model = Model::fromSymbols(
      "fuzz.so",
      [&](const std::string &symbol) -> void * {
        if (symbol == ENERGY_ARTIFACT_MANIFEST_SYMBOL)
          return reinterpret_cast<void *>(&stubManifest);
        if (symbol == ENERGY_ARTIFACT_SET_THREADS_SYMBOL)
          return reinterpret_cast<void *>(&stubSetThreads);
        if (symbols.count(symbol))
          return reinterpret_cast<void *>(&stubKernel);
        return nullptr;
      },
      nullptr);
  if (!check(model))
    return 0;

  SessionOptions options;
  for (const ManifestDim &dim : manifest->dims)
    if (!dim.derived && !dim.defaultValue)
      options.dims[dim.name] = 3;
  options.seed = 1;
  options.memoryLimit = 1 << 20;
  Expected<Session> created = model->session(options);
  if (!check(created))
    return 0;
  Session &session = *created;
  if (!check(session.dims()))
    return 0;
  (void)check(session.energy());
  for (const std::string &term : model->termNames())
    (void)check(session.termEnergy(term));
  for (const std::string &tensor : model->gradientNames())
    (void)check(session.gradient(tensor));
  for (const std::string &output : model->outputNames())
    (void)check(session.get(output));
  (void)check(session.stateTensors());
  if (model->hasDynamics()) {
    RunOptions run;
    run.steps = 2;
    (void)check(session.run(run));
  }
  return 0;
}
