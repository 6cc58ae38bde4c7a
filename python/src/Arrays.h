//===- Arrays.h - Tensors to and from numpy arrays and DLPack ---*- C++ -*-===//
//
// What the Python package hands the runtime and takes back: numpy arrays,
// any DLPack producer (torch tensors, ...), nested sequences and scalars
// in; numpy arrays and DLPack capsules out.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_PYTHON_ARRAYS_H
#define ENERGY_PYTHON_ARRAYS_H

#include "energy/Runtime/Tensor.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

namespace energy::python {

/// `value` as a tensor: a DLPack producer on the CPU (float32 or float64,
/// any strides) or anything numpy.asarray takes, as float32 when it is
/// float32 and float64 otherwise. A row-major float32 or float64 array or
/// DLPack tensor is borrowed (Tensor::borrow: the tensor is a view of its
/// memory, which it keeps alive); anything else is copied. Raises
/// energy.Error (naming `what`) for a device tensor or an element type that
/// is not a real number.
Tensor tensorFromPython(pybind11::handle value, const std::string &what);

/// A numpy array holding a copy of `tensor`.
pybind11::array arrayFromTensor(const Tensor &tensor);

/// A DLPack capsule ("dltensor") owning `tensor`.
pybind11::capsule dlpackFromTensor(Tensor tensor);

} // namespace energy::python

#endif // ENERGY_PYTHON_ARRAYS_H
