//===- Status.h - Success or an error message -------------------*- C++ -*-===//
//
// The runtime library reports errors by value: a function that can fail
// returns a `Status` (success, or an error message) or an `Expected<T>` (a
// value, or an error message). The library never throws and never prints;
// the caller decides whether to print the message and which exit status to
// use. Messages are meant for a user and name the file and the object
// concerned, e.g.
// "w.safetensors: tensor 'w': unsupported dtype 'F16'".
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_STATUS_H
#define ENERGY_RUNTIME_STATUS_H

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace energy {

/// Success, or failure with a message. A failure always has a non-empty
/// message.
/// What kind of error a Status is, for callers that react differently (the
/// Python package raises energy.ShapeError for Shape).
enum class ErrorKind {
  Other,
  /// A tensor's shape does not fit its declaration or the other tensors'
  /// (a rank, a size, a dim two tensors give different values).
  Shape,
};

class [[nodiscard]] Status {
public:
  /// Success.
  Status() = default;
  static Status success() { return Status(); }
  /// Failure with `message` (which must not be empty).
  static Status error(std::string message, ErrorKind kind = ErrorKind::Other) {
    assert(!message.empty() && "an error needs a message");
    Status status;
    status.errorMessage = std::move(message);
    status.errorKind = kind;
    return status;
  }

  bool ok() const { return errorMessage.empty(); }
  explicit operator bool() const { return ok(); }
  /// The error message; empty on success.
  const std::string &message() const { return errorMessage; }
  ErrorKind kind() const { return errorKind; }

  /// This error with `context` and ": " in front of its message (success
  /// stays success; the kind stays): builds "file: tensor 'w': bad dtype"
  /// from the inside out.
  Status withContext(const std::string &context) const {
    return ok() ? *this : error(context + ": " + errorMessage, errorKind);
  }

private:
  std::string errorMessage;
  ErrorKind errorKind = ErrorKind::Other;
};

/// A value of type T, or an error message.
template <typename T> class [[nodiscard]] Expected {
public:
  /// Success with `value`.
  Expected(T value) : storedValue(std::move(value)) {}
  /// Failure; `error` must not be a success.
  Expected(Status error) : storedError(std::move(error)) {
    assert(!storedError.ok() && "an Expected built from a Status must fail");
  }

  bool ok() const { return storedValue.has_value(); }
  explicit operator bool() const { return ok(); }
  /// The error (success if there is a value).
  const Status &status() const { return storedError; }
  /// The error message; empty on success.
  const std::string &message() const { return storedError.message(); }

  /// The value; only on success.
  T &value() {
    assert(ok() && "value() of a failed Expected");
    return *storedValue;
  }
  const T &value() const {
    assert(ok() && "value() of a failed Expected");
    return *storedValue;
  }
  T &operator*() { return value(); }
  const T &operator*() const { return value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }

private:
  std::optional<T> storedValue;
  Status storedError;
};

} // namespace energy

#endif // ENERGY_RUNTIME_STATUS_H
