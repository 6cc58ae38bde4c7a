//===- CpuFeaturesTest.cpp - Whether this CPU can run an artifact ---------===//
//
// Unit tests of the CPU check: the features the runtime knows, the running
// CPU as it detects it, and checkTargetRuns against made-up CPUs, so that
// refusal is tested without a machine that lacks the features.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/CpuFeatures.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

using energy::checkTargetRuns;
using energy::HostCpu;
using energy::ManifestTarget;
using energy::Status;

namespace {
/// What x86-64-v4 lets code use (as energyc --cpu=x86-64-v4 lists it).
const std::vector<std::string> levelFour = {
    "cmov",    "mmx",      "sse",      "sse2",     "sse3",    "ssse3", "sse4.1",
    "sse4.2",  "crc32",    "popcnt",   "cx16",     "sahf",    "avx",   "avx2",
    "bmi",     "bmi2",     "f16c",     "fma",      "lzcnt",   "movbe", "xsave",
    "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"};

ManifestTarget target(const std::string &cpu,
                      std::vector<std::string> features) {
  return ManifestTarget{"x86_64", cpu, std::move(features), "", {}};
}

/// An x86-64 CPU with `features`.
HostCpu cpuWith(std::vector<std::string> features) {
  return HostCpu{"x86_64", {features.begin(), features.end()}};
}

/// `features` without those for which `drop` holds.
template <typename Predicate>
std::vector<std::string> without(std::vector<std::string> features,
                                 Predicate drop) {
  features.erase(std::remove_if(features.begin(), features.end(), drop),
                 features.end());
  return features;
}
} // namespace

TEST_CASE("the known features are ArtifactABI.h's table") {
  const std::vector<std::string> &known = energy::knownCpuFeatures();
  for (const std::string &feature : levelFour)
    CHECK_MESSAGE(energy::isKnownCpuFeature(feature), feature);
  CHECK(energy::isKnownCpuFeature("avx512fp16"));
  CHECK_FALSE(energy::isKnownCpuFeature("avx9000"));
  CHECK_FALSE(energy::isKnownCpuFeature("AVX2"));
  // Baseline features cpuid checks cannot name are left out.
  CHECK_FALSE(energy::isKnownCpuFeature("x87"));
  CHECK(known.front() == "cmov");
  CHECK(std::set<std::string>(known.begin(), known.end()).size() ==
        known.size());
}

TEST_CASE("code for a level runs on a CPU that has all its features") {
  CHECK(
      checkTargetRuns(target("x86-64-v4", levelFour), cpuWith(levelFour)).ok());
  // More features than needed are fine.
  std::vector<std::string> more = levelFour;
  more.push_back("avx512fp16");
  CHECK(checkTargetRuns(target("x86-64-v4", levelFour), cpuWith(more)).ok());
  // So is code that needs nothing.
  CHECK(checkTargetRuns(target("x86-64-v2", {}), cpuWith({})).ok());
}

TEST_CASE("a CPU without AVX-512 refuses x86-64-v4 code, naming what it "
          "lacks") {
  HostCpu noAvx512 = cpuWith(without(levelFour, [](const std::string &name) {
    return name.rfind("avx512", 0) == 0;
  }));
  Status status = checkTargetRuns(target("x86-64-v4", levelFour), noAvx512);
  REQUIRE_FALSE(status.ok());
  CHECK(status.message() ==
        "compiled for CPU x86-64-v4, and this CPU lacks avx512f, avx512bw, "
        "avx512cd, avx512dq, avx512vl; recompile it here with energyc "
        "--cpu=native, or with an x86-64 level this CPU has");

  // Only avx512f missing: just that one is named.
  HostCpu noF = cpuWith(without(
      levelFour, [](const std::string &name) { return name == "avx512f"; }));
  status = checkTargetRuns(target("x86-64-v4", levelFour), noF);
  REQUIRE_FALSE(status.ok());
  CHECK(status.message().find("lacks avx512f;") != std::string::npos);

  // x86-64-v3 code still runs there.
  std::vector<std::string> levelThree =
      without(levelFour, [](const std::string &name) {
        return name.rfind("avx512", 0) == 0;
      });
  CHECK(checkTargetRuns(target("x86-64-v3", levelThree), noAvx512).ok());
}

TEST_CASE("native code and other architectures are described") {
  Status status =
      checkTargetRuns(target("native", {"avx2", "fma"}), cpuWith({"avx2"}));
  REQUIRE_FALSE(status.ok());
  CHECK(status.message().rfind(
            "compiled for CPU native (the CPU of the machine that compiled "
            "it), and this CPU lacks fma;",
            0) == 0);
  status = checkTargetRuns(target("x86-64-v2", {}), HostCpu{"aarch64", {}});
  REQUIRE_FALSE(status.ok());
  CHECK(status.message() ==
        "compiled for x86_64 CPUs, and this one is aarch64");
}

TEST_CASE("the running CPU is detected") {
  const HostCpu &cpu = HostCpu::running();
  CHECK(&cpu == &HostCpu::running());
  for (const std::string &feature : cpu.features)
    CHECK_MESSAGE(energy::isKnownCpuFeature(feature), feature);
#if defined(__x86_64__)
  CHECK(cpu.arch == "x86_64");
  // Every x86-64 CPU has these.
  CHECK(cpu.features.count("sse2"));
  CHECK(cpu.features.count("cmov"));
  CHECK(checkTargetRuns(target("x86-64", {"cmov", "mmx", "sse", "sse2"}), cpu)
            .ok());
#endif
}
