//===- SupportLog.cpp - Where the support code's messages go --------------===//
//
// The handler the runtime sets when it loads an artifact (ArtifactABI.h);
// until it does, or without a runtime, messages are dropped.
//
//===----------------------------------------------------------------------===//

#include "SupportLog.h"
#include "energy/KernelSupport/KernelSupport.h"

#include <atomic>

namespace {
std::atomic<energy_artifact_log_fn> logHandler{nullptr};
} // namespace

extern "C" void energy_support_set_log_handler(energy_artifact_log_fn handler) {
  logHandler.store(handler, std::memory_order_release);
}

void energy::support::report(int32_t level, const char *message) {
  if (energy_artifact_log_fn handler =
          logHandler.load(std::memory_order_acquire))
    handler(level, message);
}
