//===- Log.cpp - The runtime's messages to the application ----------------===//
//
// One process-wide handler, read under a lock and called outside it.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Log.h"
#include "energy/Runtime/ArtifactABI.h"

#include <cstdio>
#include <mutex>

using namespace energy;

namespace {
struct Handler {
  std::mutex lock;
  LogHandler function;
};

Handler &handler() {
  static Handler instance;
  return instance;
}
} // namespace

void energy::setLogHandler(LogHandler function) {
  Handler &current = handler();
  std::lock_guard<std::mutex> guard(current.lock);
  current.function = std::move(function);
}

void energy::logMessage(LogLevel level, const std::string &message) {
  Handler &current = handler();
  LogHandler function;
  {
    std::lock_guard<std::mutex> guard(current.lock);
    function = current.function;
  }
  if (function)
    function(level, message.c_str());
}

void energy::printLogToStderr(LogLevel, const char *message) {
  std::fprintf(stderr, "%s\n", message);
}

static_assert(ENERGY_ARTIFACT_LOG_NOTE == static_cast<int>(LogLevel::Note) &&
              ENERGY_ARTIFACT_LOG_TRACE == static_cast<int>(LogLevel::Trace));

void energy::detail::logFromArtifact(int32_t level, const char *message) {
  logMessage(level == ENERGY_ARTIFACT_LOG_TRACE ? LogLevel::Trace
                                                : LogLevel::Note,
             message ? message : "");
}
