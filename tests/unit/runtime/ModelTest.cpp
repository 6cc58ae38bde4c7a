//===- ModelTest.cpp - Loading artifacts ----------------------------------===//
//
// Unit tests of energy::Model on the fake artifacts of fake_artifact.c:
// what a loaded model reports, in-process symbols, threads, the errors for
// files that are not usable artifacts, and artifacts for another CPU.
//
//===----------------------------------------------------------------------===//

#include "FakeArtifacts.h"

#include "energy/Runtime/ArtifactABI.h"
#include "energy/Runtime/CpuFeatures.h"
#include "energy/Runtime/Model.h"
#include "energy/Runtime/Session.h"

#include <doctest/doctest.h>

#include <algorithm>

#include <dlfcn.h>
#include <fstream>
#include <string>

using energy::DType;
using energy::Expected;
using energy::Model;
using energy::Session;

TEST_CASE("a loaded model reports its manifest") {
  Expected<Model> model = Model::load(fakeF64);
  REQUIRE_MESSAGE(model.ok(), model.message());
  CHECK(model->label() == fakeF64);
  CHECK(model->name() == "quadratic");
  CHECK(model->dtype() == DType::F64);
  CHECK(model->source() == "model quadratic { }");
  CHECK(model->sourceName() == "quadratic.energy");
  CHECK(model->hasDynamics());
  CHECK(model->tensorNames() ==
        std::vector<std::string>{"x", "c", "w", "u", "e", "x.previous"});
  CHECK(model->outputNames() == std::vector<std::string>{"stacked"});
  CHECK(model->gradientNames() == std::vector<std::string>{"x"});

  Expected<Model> f32 = Model::load(fakeF32);
  REQUIRE_MESSAGE(f32.ok(), f32.message());
  CHECK(f32->dtype() == DType::F32);
}

TEST_CASE("threads are set through the artifact's optional symbol") {
  Expected<Model> model = Model::load(fakeF64);
  REQUIRE(model.ok());
  CHECK(model->hasThreads());
  CHECK(model->setThreads(3));
  // The same library, opened again, shows what the runtime set.
  void *handle = dlopen(fakeF64, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(handle);
  auto threads =
      reinterpret_cast<int32_t (*)()>(dlsym(handle, "fake_artifact_threads"));
  REQUIRE(reinterpret_cast<void *>(threads) != nullptr);
  CHECK(threads() == 3);
  dlclose(handle);

  Expected<Model> single = Model::load(fakeF32);
  REQUIRE(single.ok());
  CHECK_FALSE(single->hasThreads());
  CHECK_FALSE(single->setThreads(3));
}

TEST_CASE("code in the process is used through a symbol lookup") {
  void *handle = dlopen(fakeF64, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(handle);
  std::shared_ptr<void> keepAlive(handle, [](void *h) { dlclose(h); });
  std::vector<std::string> lookups;
  Expected<Model> model = Model::fromSymbols(
      "jit:quadratic",
      [&](const std::string &symbol) {
        lookups.push_back(symbol);
        return dlsym(handle, symbol.c_str());
      },
      keepAlive);
  REQUIRE_MESSAGE(model.ok(), model.message());
  CHECK(model->label() == "jit:quadratic");
  // The manifest, the five kernels fake_artifact.c's manifest names, the
  // log handler's setter and the threads symbol, each once.
  auto looked = [&](const char *symbol) {
    return std::count(lookups.begin(), lookups.end(), symbol);
  };
  CHECK(lookups.size() == 8);
  CHECK(looked(ENERGY_ARTIFACT_MANIFEST_SYMBOL) == 1);
  CHECK(looked(ENERGY_ARTIFACT_SET_LOG_HANDLER_SYMBOL) == 1);
  CHECK(looked(ENERGY_ARTIFACT_SET_THREADS_SYMBOL) == 1);
  CHECK(looked("fake_grad_x") == 1);
  keepAlive.reset(); // The model keeps the library loaded.
  Expected<Session> session = model->session({{{"N", 2}}, {}, 1});
  REQUIRE(session.ok());
  Expected<double> energy = session->energy();
  CHECK(energy.ok());

  Expected<Model> empty = Model::fromSymbols(
      "jit:nothing", [](const std::string &) { return nullptr; }, nullptr);
  CHECK(empty.message() == "jit:nothing is not an energy artifact: it does "
                           "not export energy_artifact_manifest");
}

TEST_CASE("files that are not usable artifacts are refused, naming the "
          "file") {
  CHECK(Model::load("/nonexistent/model.so").message() ==
        "/nonexistent/model.so: cannot open: No such file or directory");
  CHECK(Model::load("/").message() == "/: not a regular file");

  std::string text = std::string(ENERGY_TEST_TMPDIR) + "/not-a-library.so";
  std::ofstream(text) << "hello\n";
  std::string message = Model::load(text).message();
  CHECK_MESSAGE(message.rfind(text + ": not a shared library that can be "
                                     "loaded: ",
                              0) == 0,
                message);

  CHECK(Model::load(fakeNotArtifact).message() ==
        std::string(fakeNotArtifact) +
            " is not an energy artifact: it does not export "
            "energy_artifact_manifest");
  CHECK(Model::load(fakeOtherVersion).message() ==
        std::string(fakeOtherVersion) +
            ": manifest: artifact format version 5, this runtime reads "
            "version 6 (compile the model again with this release's "
            "energyc)");
  CHECK(Model::load(fakeMissingKernel).message() ==
        std::string(fakeMissingKernel) +
            ": the manifest names kernel fake_stacked (output 'stacked'), "
            "which the artifact does not export");
}

namespace {
/// The manifest the fake artifact's code is given under, by
/// loadWithTarget.
std::string replacedManifest;
const char *replacedManifestFunction() { return replacedManifest.c_str(); }

/// The fake f64 artifact's code with its manifest's target replaced by
/// `target` (JSON), through fromSymbols.
Expected<Model> loadWithTarget(const std::string &target) {
  void *handle = dlopen(fakeF64, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(handle);
  std::shared_ptr<void> keepAlive(handle, [](void *h) { dlclose(h); });
  auto manifest = reinterpret_cast<const char *(*)()>(
      dlsym(handle, "energy_artifact_manifest"));
  REQUIRE(reinterpret_cast<void *>(manifest) != nullptr);
  replacedManifest = manifest();
  std::string old = "\"target\": \"test\"";
  size_t at = replacedManifest.find(old);
  REQUIRE(at != std::string::npos);
  replacedManifest.replace(at, old.size(), "\"target\": " + target);
  return Model::fromSymbols(
      "fake.so",
      [handle](const std::string &symbol) -> void * {
        if (symbol == "energy_artifact_manifest")
          return reinterpret_cast<void *>(&replacedManifestFunction);
        return dlsym(handle, symbol.c_str());
      },
      keepAlive);
}

/// The manifest's JSON list of `features`.
std::string featureList(const std::vector<std::string> &features) {
  std::string list = "[";
  for (const std::string &feature : features)
    list += (list.size() > 1 ? ", \"" : "\"") + feature + "\"";
  return list + "]";
}
} // namespace

TEST_CASE("an artifact for a CPU this one is not is refused before any "
          "kernel runs") {
  const energy::HostCpu &host = energy::HostCpu::running();
  std::vector<std::string> present(host.features.begin(), host.features.end());
  std::string arch = "\"arch\": \"" + host.arch + "\"";
  // Code that needs only what this CPU has loads.
  Expected<Model> runs = loadWithTarget("{" + arch +
                                        ", \"cpu\": \"native\", "
                                        "\"features\": " +
                                        featureList(present) + "}");
  CHECK_MESSAGE(runs.ok(), runs.message());
  CHECK(runs->manifest().target->features == present);

  // Code that needs a feature this CPU lacks is refused, naming it.
  std::vector<std::string> absent;
  for (const std::string &feature : energy::knownCpuFeatures())
    if (!host.features.count(feature))
      absent.push_back(feature);
  if (absent.empty()) {
    MESSAGE("this CPU has every feature the runtime knows; nothing to refuse");
    return;
  }
  Expected<Model> refused =
      loadWithTarget("{" + arch + ", \"cpu\": \"x86-64-v9\", \"features\": " +
                     featureList({absent.front()}) + "}");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.message() ==
        "fake.so: compiled for CPU x86-64-v9, and this CPU lacks " +
            absent.front() +
            "; recompile it here with energyc --cpu=native, or with an "
            "x86-64 level this CPU has");

  // An unknown feature is refused as a manifest error.
  Expected<Model> unknown = loadWithTarget(
      "{" + arch + ", \"cpu\": \"native\", \"features\": [\"avx9000\"]}");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.message().rfind("fake.so: manifest: target: features: "
                                "unknown CPU feature \"avx9000\"",
                                0) == 0);
}

TEST_CASE("sessions check the dims and consts they are given") {
  Expected<Model> model = Model::load(fakeF64);
  REQUIRE(model.ok());
  CHECK(model->session({{{"Q", 2}}, {}, {}}).message() ==
        "model quadratic has no dim Q (its dims: N, K, M)");
  CHECK(model->session({{{"M", 2}}, {}, {}}).message() ==
        "dim M is derived (N * 2); it cannot be given");
  CHECK(model->session({{{"N", -1}}, {}, {}}).message() ==
        "dim N cannot be negative (-1)");
  CHECK(model->session({{}, {{"beta", 1.0}}, {}}).message() ==
        "model quadratic has no const beta (its consts: lr, tol)");
}
