//===- Arrays.cpp - Tensors to and from numpy arrays and DLPack -----------===//
//
// Arrays and DLPack tensors in: row-major ones borrowed (on CUDA device 0
// too, where the caller takes them), the others read through their strides;
// a DLPack tensor is released as the protocol says (the capsule renamed
// "used_dltensor") when the copy is made or the last view of it is gone.
// DLPack out: a DLManagedTensor whose manager owns the tensor.
//
//===----------------------------------------------------------------------===//

#include "Arrays.h"
#include "Errors.h"

#include <dlpack/dlpack.h>

#include <cstring>

namespace py = pybind11;
using namespace energy;
using namespace energy::python;

namespace {
/// Copies `source`'s elements, laid out by `strides` (in elements; row-major
/// when null), into the row-major `target`.
template <typename Element>
void copyStrided(const DLTensor &source, Element *target) {
  const auto *base = reinterpret_cast<const Element *>(
      static_cast<const char *>(source.data) + source.byte_offset);
  int64_t count = 1;
  for (int axis = 0; axis < source.ndim; ++axis)
    count *= source.shape[axis];
  if (!source.strides) {
    std::memcpy(target, base, count * sizeof(Element));
    return;
  }
  std::vector<int64_t> index(source.ndim, 0);
  for (int64_t flat = 0; flat < count; ++flat) {
    int64_t offset = 0;
    for (int axis = 0; axis < source.ndim; ++axis)
      offset += index[axis] * source.strides[axis];
    target[flat] = base[offset];
    for (int axis = source.ndim - 1; axis >= 0; --axis) {
      if (++index[axis] < source.shape[axis])
        break;
      index[axis] = 0;
    }
  }
}

bool isCudaDevice(int32_t deviceType) {
  return deviceType == kDLCUDA || deviceType == kDLCUDAManaged;
}

Tensor tensorFromDLPack(py::handle producer, const std::string &what,
                        TensorPlace *place, uintptr_t stream) {
  // The producer orders its pending work on the tensor before what is
  // queued on the consumer's stream (DLPack's 1: the legacy default one).
  bool cudaProducer = place && py::hasattr(producer, "__dlpack_device__") &&
                      isCudaDevice(py::cast<int32_t>(
                          py::tuple(producer.attr("__dlpack_device__")())[0]));
  py::capsule capsule =
      cudaProducer ? producer.attr("__dlpack__")(
                         py::arg("stream") = stream ? stream : uintptr_t(1))
                   : producer.attr("__dlpack__")();
  auto *managed = static_cast<DLManagedTensor *>(
      PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (!managed)
    throw py::error_already_set();
  // Released however the copy ends.
  struct Release {
    DLManagedTensor *managed;
    PyObject *capsule;
    ~Release() {
      if (!managed)
        return;
      if (managed->deleter)
        managed->deleter(managed);
      PyCapsule_SetName(capsule, "used_dltensor");
    }
  } release{managed, capsule.ptr()};
  const DLTensor &source = managed->dl_tensor;
  bool onCuda = isCudaDevice(source.device.device_type);
  if (source.device.device_type != kDLCPU && (!onCuda || !place))
    raise("Error", what + ": the tensor is on a device (DLPack device type " +
                       std::to_string(source.device.device_type) +
                       "); a CPU session takes CPU tensors");
  if (onCuda && source.device.device_id != 0)
    raise("Error", what + ": the tensor is on CUDA device " +
                       std::to_string(source.device.device_id) +
                       "; the runtime runs on device 0");
  if (source.dtype.code != kDLFloat || source.dtype.lanes != 1 ||
      (source.dtype.bits != 32 && source.dtype.bits != 64))
    raise("Error", what + ": DLPack element type (code " +
                       std::to_string(source.dtype.code) + ", " +
                       std::to_string(source.dtype.bits) +
                       " bits) is not float32 or float64");
  std::vector<int64_t> shape(source.shape, source.shape + source.ndim);
  bool rowMajor = true;
  for (int64_t axis = source.ndim - 1, stride = 1; axis >= 0; --axis) {
    if (source.strides && source.shape[axis] != 1 &&
        source.strides[axis] != stride)
      rowMajor = false;
    stride *= source.shape[axis];
  }
  if (onCuda && !rowMajor)
    raise("Error", what + ": the CUDA tensor is not contiguous and row-major "
                          "(call .contiguous() first)");
  if (place)
    *place = onCuda && source.data ? TensorPlace::Cuda : TensorPlace::Host;
  if (rowMajor && source.data) {
    // In place: the lender releases the producer's tensor when the session
    // is done with it.
    void *data = static_cast<char *>(source.data) + source.byte_offset;
    DLManagedTensor *owned = release.managed;
    release.managed = nullptr;
    PyCapsule_SetName(capsule.ptr(), "used_dltensor");
    std::shared_ptr<void> lender(owned, [](void *held) {
      auto *managed = static_cast<DLManagedTensor *>(held);
      if (managed->deleter) {
        py::gil_scoped_acquire locked;
        managed->deleter(managed);
      }
    });
    return Tensor::borrow(source.dtype.bits == 32 ? DType::F32 : DType::F64,
                          std::move(shape), data, std::move(lender));
  }
  if (source.dtype.bits == 32) {
    Tensor tensor(DType::F32, shape);
    copyStrided(source, reinterpret_cast<float *>(tensor.data()));
    return tensor;
  }
  Tensor tensor(DType::F64, shape);
  copyStrided(source, reinterpret_cast<double *>(tensor.data()));
  return tensor;
}

/// Holds a Python object for a borrowed tensor, letting it go under the GIL.
std::shared_ptr<void> lenderOf(py::object object) {
  return std::shared_ptr<void>(new py::object(std::move(object)),
                               [](void *held) {
                                 py::gil_scoped_acquire locked;
                                 delete static_cast<py::object *>(held);
                               });
}

template <typename Element>
Tensor tensorFromArray(const py::array_t<Element, py::array::c_style> &array,
                       DType dtype) {
  std::vector<int64_t> shape(array.shape(), array.shape() + array.ndim());
  Tensor tensor(dtype, shape);
  std::memcpy(tensor.data(), array.data(), tensor.byteSize());
  return tensor;
}
} // namespace

Tensor python::tensorFromPython(py::handle value, const std::string &what,
                                TensorPlace *place, uintptr_t stream) {
  if (place)
    *place = TensorPlace::Host;
  if (!py::isinstance<py::array>(value) && py::hasattr(value, "__dlpack__"))
    return tensorFromDLPack(value, what, place, stream);
  py::array array = py::array::ensure(value);
  if (!array)
    raise("Error", what + ": expected an array, a DLPack tensor, a sequence "
                          "or a number");
  char kind = array.dtype().kind();
  if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'b')
    raise("Error", what + ": elements of numpy kind '" + std::string(1, kind) +
                       "' are not real numbers");
  bool inPlace = (array.flags() & py::array::c_style) &&
                 (array.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_) &&
                 array.data() != nullptr &&
                 (array.dtype().is(py::dtype::of<float>()) ||
                  array.dtype().is(py::dtype::of<double>()));
  if (inPlace) {
    std::vector<int64_t> shape(array.shape(), array.shape() + array.ndim());
    void *data = const_cast<void *>(array.data());
    return Tensor::borrow(array.dtype().is(py::dtype::of<float>()) ? DType::F32
                                                                   : DType::F64,
                          std::move(shape), data, lenderOf(array));
  }
  if (array.dtype().is(py::dtype::of<float>()))
    return tensorFromArray<float>(
        py::array_t<float, py::array::c_style | py::array::forcecast>(array),
        DType::F32);
  return tensorFromArray<double>(
      py::array_t<double, py::array::c_style | py::array::forcecast>(array),
      DType::F64);
}

py::array python::arrayFromTensor(const Tensor &tensor) {
  std::vector<py::ssize_t> shape(tensor.shape().begin(), tensor.shape().end());
  py::array array = tensor.dtype() == DType::F32
                        ? py::array(py::dtype::of<float>(), shape)
                        : py::array(py::dtype::of<double>(), shape);
  std::memcpy(array.mutable_data(), tensor.data(), tensor.byteSize());
  return array;
}

py::capsule python::dlpackFromTensor(Tensor tensor, TensorPlace place) {
  struct Owner {
    DLManagedTensor managed;
    Tensor tensor;
    std::vector<int64_t> shape;
  };
  auto *owner = new Owner{{}, std::move(tensor), {}};
  owner->shape = owner->tensor.shape();
  DLTensor &view = owner->managed.dl_tensor;
  view.data = owner->tensor.data();
  view.device = {place == TensorPlace::Cuda ? kDLCUDA : kDLCPU, 0};
  view.ndim = static_cast<int>(owner->shape.size());
  view.dtype = {
      kDLFloat,
      static_cast<uint8_t>(owner->tensor.dtype() == DType::F32 ? 32 : 64), 1};
  view.shape = owner->shape.data();
  view.strides = nullptr;
  view.byte_offset = 0;
  owner->managed.manager_ctx = owner;
  owner->managed.deleter = [](DLManagedTensor *managed) {
    delete static_cast<Owner *>(managed->manager_ctx);
  };
  // A capsule nobody consumed still owns the tensor.
  PyObject *capsule =
      PyCapsule_New(&owner->managed, "dltensor", [](PyObject *capsule) {
        if (!PyCapsule_IsValid(capsule, "dltensor"))
          return;
        auto *managed = static_cast<DLManagedTensor *>(
            PyCapsule_GetPointer(capsule, "dltensor"));
        managed->deleter(managed);
      });
  if (!capsule) {
    delete owner;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}
