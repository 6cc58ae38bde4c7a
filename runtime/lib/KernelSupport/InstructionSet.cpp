//===- InstructionSet.cpp - Choosing the vector code path at run time -----===//
//
// Detects which of the kernels' instruction-set paths the CPU supports (the
// cpuid bits and the operating system's saving of the wider registers, as
// __builtin_cpu_supports checks them), and keeps the choice, which tests and
// benchmarks may force. Compiled without instruction-set flags, so that it
// runs on any CPU.
//
//===----------------------------------------------------------------------===//

#include "IsaKernels.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

using namespace energy;

namespace {

int32_t detectSupportedIsa() {
#if ENERGY_KERNELS_X86
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2 && __builtin_cpu_supports("avx512f"))
    return ENERGY_ISA_AVX512;
  if (avx2)
    return ENERGY_ISA_AVX2;
#endif
  return ENERGY_ISA_SCALAR;
}

int32_t supportedIsa() {
  static const int32_t supported = detectSupportedIsa();
  return supported;
}

/// The supported path, lowered by ENERGY_ISA when it names a lower one.
int32_t automaticIsa() {
  int32_t isa = supportedIsa();
  if (const char *name = std::getenv("ENERGY_ISA")) {
    int32_t requested = isa;
    if (!std::strcmp(name, "scalar"))
      requested = ENERGY_ISA_SCALAR;
    else if (!std::strcmp(name, "avx2"))
      requested = ENERGY_ISA_AVX2;
    if (requested < isa)
      isa = requested;
  }
  return isa;
}

std::atomic<int32_t> &activeIsa() {
  static std::atomic<int32_t> active{automaticIsa()};
  return active;
}

} // namespace

int32_t kernels::activeInstructionSet() {
  return activeIsa().load(std::memory_order_relaxed);
}

extern "C" {
int32_t energy_support_supported_isa(void) { return supportedIsa(); }

int32_t energy_support_active_isa(void) {
  return kernels::activeInstructionSet();
}

int32_t energy_support_force_isa(int32_t isa) {
  if (isa == ENERGY_ISA_AUTOMATIC) {
    activeIsa().store(automaticIsa());
    return 0;
  }
  if (isa < ENERGY_ISA_SCALAR || isa > supportedIsa())
    return 1;
  activeIsa().store(isa);
  return 0;
}
}
