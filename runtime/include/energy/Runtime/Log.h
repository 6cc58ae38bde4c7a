//===- Log.h - The runtime's messages to the application --------*- C++ -*-===//
//
// Notes (a fallback taken) and traces (ENERGY_CUDA_TRACE's timings) reach
// the application through one handler it sets; the library prints nothing.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_LOG_H
#define ENERGY_RUNTIME_LOG_H

#include <cstdint>
#include <functional>
#include <string>

namespace energy {

enum class LogLevel : int32_t {
  /// Something the runtime chose that the user may want to know: a kernel
  /// that fell back to another engine, once per reason.
  Note = 0,
  /// Timings asked for with ENERGY_CUDA_TRACE.
  Trace = 1,
};

/// Receives a message, valid during the call, from any thread.
using LogHandler = std::function<void(LogLevel level, const char *message)>;

/// Sets the handler of every message of the runtime and of the artifacts
/// it loads, for the whole process; an empty one (the default) drops them.
void setLogHandler(LogHandler handler);
/// Passes `message` to the handler, if one is set.
void logMessage(LogLevel level, const std::string &message);
/// A handler that writes each message as a line on stderr: what the
/// command-line tools set.
void printLogToStderr(LogLevel level, const char *message);

namespace detail {
/// What artifacts' support code reports through (ArtifactABI.h's
/// ENERGY_ARTIFACT_SET_LOG_HANDLER_SYMBOL): the runtime's handler.
void logFromArtifact(int32_t level, const char *message);
} // namespace detail

} // namespace energy

#endif // ENERGY_RUNTIME_LOG_H
