//===- CpuFeatures.cpp - Whether this CPU can run an artifact -------------===//
//
// The running CPU's features come from __builtin_cpu_supports, which reads
// cpuid (and, for AVX and AVX-512, whether the operating system saves their
// registers). It takes only literal names, so ArtifactABI.h's table expands
// into one call per feature.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/CpuFeatures.h"

#include "energy/Runtime/ArtifactABI.h"

#include <algorithm>

using namespace energy;

const std::vector<std::string> &energy::knownCpuFeatures() {
#define ENERGY_FEATURE_NAME(llvmName, checkName) llvmName,
  static const std::vector<std::string> names = {
      ENERGY_X86_CPU_FEATURES(ENERGY_FEATURE_NAME)};
#undef ENERGY_FEATURE_NAME
  return names;
}

bool energy::isKnownCpuFeature(std::string_view name) {
  const std::vector<std::string> &names = knownCpuFeatures();
  return std::find(names.begin(), names.end(), name) != names.end();
}

/// The architecture this runtime was compiled for, named as LLVM's triples
/// name it.
static const char *runtimeArch() {
#if defined(__x86_64__) || defined(_M_X64)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#elif defined(__i386__)
  return "i386";
#else
  return "unknown";
#endif
}

/// The known features the running CPU has.
static std::set<std::string> detectFeatures() {
  std::set<std::string> features;
#if (defined(__x86_64__) || defined(__i386__)) &&                              \
    (defined(__clang__) || defined(__GNUC__))
  __builtin_cpu_init();
#define ENERGY_CHECK_FEATURE(llvmName, checkName)                              \
  if (__builtin_cpu_supports(checkName))                                       \
    features.insert(llvmName);
  ENERGY_X86_CPU_FEATURES(ENERGY_CHECK_FEATURE)
#undef ENERGY_CHECK_FEATURE
#endif
  return features;
}

const HostCpu &HostCpu::running() {
  static const HostCpu cpu = {runtimeArch(), detectFeatures()};
  return cpu;
}

Status energy::checkTargetRuns(const ManifestTarget &target,
                               const HostCpu &host) {
  if (target.arch != host.arch)
    return Status::error("compiled for " + target.arch +
                         " CPUs, and this one is " + host.arch);
  std::string missing;
  for (const std::string &feature : target.features)
    if (!host.features.count(feature))
      missing += (missing.empty() ? "" : ", ") + feature;
  if (missing.empty())
    return Status::success();
  std::string cpu = target.cpu == "native"
                        ? "native (the CPU of the machine that compiled it)"
                        : target.cpu;
  return Status::error("compiled for CPU " + cpu + ", and this CPU lacks " +
                       missing +
                       "; recompile it here with energyc --cpu=native, or "
                       "with an x86-64 level this CPU has");
}
