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

#include <cstdint>
#include <string>

namespace energy::python {

/// Where the elements of a tensor handed over from Python are.
enum class TensorPlace { Host, Cuda };

/// `value` as a tensor: a DLPack producer (float32 or float64, any strides
/// on the host) or anything numpy.asarray takes, as float32 when it is
/// float32 and float64 otherwise. A row-major float32 or float64 array or
/// DLPack tensor is borrowed (Tensor::borrow: the tensor is a view of its
/// memory, which it keeps alive); anything else is copied. With `place`, a
/// row-major tensor on CUDA device 0 is borrowed too, and `place` says so
/// (its producer is asked to have it ready on `stream`, a CUstream, the
/// legacy default stream for 0: where the session's copies go). Raises
/// energy.Error (naming `what`) for a device tensor otherwise, or an
/// element type that is not a real number.
Tensor tensorFromPython(pybind11::handle value, const std::string &what,
                        TensorPlace *place = nullptr, uintptr_t stream = 0);

/// A numpy array holding a copy of `tensor`.
pybind11::array arrayFromTensor(const Tensor &tensor);

/// A DLPack capsule ("dltensor") owning `tensor`, whose elements are on the
/// host or, for `TensorPlace::Cuda`, GPU memory of device 0.
pybind11::capsule dlpackFromTensor(Tensor tensor,
                                   TensorPlace place = TensorPlace::Host);

} // namespace energy::python

#endif // ENERGY_PYTHON_ARRAYS_H
