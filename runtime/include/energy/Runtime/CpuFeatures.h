//===- CpuFeatures.h - Whether this CPU can run an artifact -----*- C++ -*-===//
//
// An artifact's kernels are compiled for a CPU (energyc --cpu), and its
// manifest lists the x86 features the code may use. Before a kernel runs,
// the runtime checks that the running CPU has every one of them, so that an
// artifact built for a newer CPU is refused with a message naming what is
// missing instead of dying on an illegal instruction. The CPU the check
// compares against is a value, so tests can give it a CPU that lacks
// features.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_CPUFEATURES_H
#define ENERGY_RUNTIME_CPUFEATURES_H

#include "energy/Runtime/Manifest.h"
#include "energy/Runtime/Status.h"

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace energy {

/// The x86 features a manifest's target may list (ArtifactABI.h's
/// ENERGY_X86_CPU_FEATURES, LLVM's names), in the order manifests list them.
const std::vector<std::string> &knownCpuFeatures();
/// Whether the runtime can check feature `name`.
bool isKnownCpuFeature(std::string_view name);

/// A CPU as the check sees it: its architecture and which of the known
/// features it has.
struct HostCpu {
  /// As in LLVM's triples: "x86_64", "aarch64".
  std::string arch;
  std::set<std::string> features;

  /// The CPU this process runs on (cpuid, through __builtin_cpu_supports;
  /// detected once).
  static const HostCpu &running();
};

/// Whether code compiled for `target` can run on `host`. Errors: another
/// architecture ("compiled for x86_64 CPUs, this one is aarch64"), or the
/// features `host` lacks, in manifest order, with the CPU the code was
/// compiled for ("compiled for CPU x86-64-v4, and this CPU lacks avx512f,
/// avx512bw; ...").
Status checkTargetRuns(const ManifestTarget &target, const HostCpu &host);

} // namespace energy

#endif // ENERGY_RUNTIME_CPUFEATURES_H
