//===- Errors.h - Raising the package's exceptions --------------*- C++ -*-===//
//
// The exception classes live in energy/errors.py (plain Python, so that
// their attributes are ordinary ones); the bindings raise them by name.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_PYTHON_ERRORS_H
#define ENERGY_PYTHON_ERRORS_H

#include "energy/Runtime/Status.h"

#include <pybind11/pybind11.h>

#include <string>

namespace energy::python {

/// The exception class `name` of energy.errors.
inline pybind11::object errorClass(const char *name) {
  return pybind11::module_::import("energy.errors").attr(name);
}

/// Raises energy.errors.`name`(`message`).
[[noreturn]] inline void raise(const char *name, const std::string &message) {
  pybind11::object error = errorClass(name)(message);
  PyErr_SetObject(error.get_type().ptr(), error.ptr());
  throw pybind11::error_already_set();
}

/// Raises the runtime's error `status`: ShapeError for shapes, else
/// `otherwise`.
[[noreturn]] inline void raise(const Status &status,
                               const char *otherwise = "RuntimeError") {
  raise(status.kind() == ErrorKind::Shape ? "ShapeError" : otherwise,
        status.message());
}

} // namespace energy::python

#endif // ENERGY_PYTHON_ERRORS_H
