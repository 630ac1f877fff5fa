// DLPack both ways (Debian's libdlpack-dev, <dlpack/dlpack.h>): Tensor.__dlpack__ and
// __dlpack_device__ export a tensor without a copy (numpy.from_dlpack, torch.from_dlpack read it),
// mixprec.from_dlpack imports any object with __dlpack__ (or a legacy "dltensor" capsule) without
// a copy. The capsule protocol: the consumer renames a capsule it takes to "used_dltensor" and
// calls the tensor's deleter when done; an unconsumed capsule's destructor calls it.
#include <dlpack/dlpack.h>

#include <memory>

#include "bindings.h"

namespace mixprec::python {

namespace {

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";

DLDataType to_dl_dtype(DType dtype) {
  DLDataType dt{};
  dt.lanes = 1;
  dt.bits = static_cast<std::uint8_t>(dtype_size(dtype) * 8);
  switch (dtype) {
    case DType::float32:
    case DType::float16:
    case DType::float64: dt.code = kDLFloat; break;
    case DType::bfloat16: dt.code = kDLBfloat; break;
    case DType::int32:
    case DType::int64: dt.code = kDLInt; break;
    case DType::uint8:
    case DType::bool_: dt.code = kDLUInt; break;  // DLPack 0.6 has no bool code
  }
  return dt;
}

DType from_dl_dtype(DLDataType dt) {
  if (dt.lanes != 1) {
    throw DTypeError("from_dlpack: vector dtypes (" + std::to_string(dt.lanes) +
                     " lanes) are not supported");
  }
  if (dt.code == kDLFloat && dt.bits == 32) return DType::float32;
  if (dt.code == kDLFloat && dt.bits == 16) return DType::float16;
  if (dt.code == kDLFloat && dt.bits == 64) return DType::float64;
  if (dt.code == kDLBfloat && dt.bits == 16) return DType::bfloat16;
  if (dt.code == kDLInt && dt.bits == 32) return DType::int32;
  if (dt.code == kDLInt && dt.bits == 64) return DType::int64;
  if (dt.code == kDLUInt && dt.bits == 8) return DType::uint8;
  if (dt.code == 6 && dt.bits == 8) return DType::bool_;  // kDLBool in DLPack >= 0.8
  throw DTypeError("from_dlpack: no mixprec dtype for DLPack type code " + std::to_string(dt.code) +
                   " with " + std::to_string(dt.bits) + " bits");
}

// What an exported DLManagedTensor owns: a handle to the tensor (its storage stays alive) and the
// shape and strides arrays the DLTensor points into.
struct Exported {
  Tensor tensor;
  std::vector<std::int64_t> shape, strides;
  DLManagedTensor managed{};
};

void delete_exported(DLManagedTensor* managed) {
  delete static_cast<Exported*>(managed->manager_ctx);
}

void capsule_destructor(PyObject* capsule) {
  // Consumed capsules were renamed; their consumer calls the deleter.
  if (PyCapsule_IsValid(capsule, kUsedCapsuleName)) return;
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (managed == nullptr) {
    PyErr_Clear();
    return;
  }
  if (managed->deleter != nullptr) managed->deleter(managed);
}

py::capsule to_dlpack(const Tensor& tensor) {
  if (!tensor.defined()) throw ValueError("__dlpack__: this Tensor is undefined");
  auto* e = new Exported{tensor.detach(), {}, {}, {}};
  e->shape.assign(tensor.shape().begin(), tensor.shape().end());
  e->strides = tensor.strides();
  DLTensor& dl = e->managed.dl_tensor;
  const Device device = tensor.device();
  dl.data = e->tensor.numel() == 0 ? nullptr : e->tensor.data_ptr();
  dl.device = {device.is_cuda() ? kDLCUDA : kDLCPU, device.index};
  dl.ndim = tensor.rank();
  dl.dtype = to_dl_dtype(tensor.dtype());
  dl.shape = e->shape.data();
  dl.strides = e->strides.data();
  dl.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = &delete_exported;
  PyObject* capsule = PyCapsule_New(&e->managed, kCapsuleName, &capsule_destructor);
  if (capsule == nullptr) {
    delete e;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}

// Calls an imported tensor's deleter once, with the GIL (the producer's deleter may drop Python
// references, NumPy's does), from whatever thread drops the last view.
class ImportedTensor {
 public:
  explicit ImportedTensor(DLManagedTensor* managed) : managed_(managed) {}
  ImportedTensor(const ImportedTensor&) = delete;
  ImportedTensor& operator=(const ImportedTensor&) = delete;
  ~ImportedTensor() {
    if (managed_->deleter == nullptr || !Py_IsInitialized()) return;
    const PyGILState_STATE state = PyGILState_Ensure();
    managed_->deleter(managed_);
    PyGILState_Release(state);
  }

 private:
  DLManagedTensor* managed_;
};

}  // namespace

Tensor tensor_from_dlpack(py::handle obj) {
  py::object capsule;
  if (PyCapsule_CheckExact(obj.ptr())) {
    capsule = py::reinterpret_borrow<py::object>(obj);
  } else if (py::hasattr(obj, "__dlpack__")) {
    capsule = obj.attr("__dlpack__")();
  } else {
    throw py::type_error("from_dlpack: expected an object with __dlpack__ or a DLPack capsule");
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kCapsuleName));
  if (managed == nullptr) {
    PyErr_Clear();
    throw ValueError(
        "from_dlpack: the capsule is not an unused \"dltensor\" (each __dlpack__() "
        "capsule can be consumed once)");
  }
  if (PyCapsule_SetName(capsule.ptr(), kUsedCapsuleName) != 0) throw py::error_already_set();
  auto owner = std::make_shared<ImportedTensor>(managed);  // the deleter runs however this ends
  const DLTensor& dl = managed->dl_tensor;
  Device device;
  switch (dl.device.device_type) {
    case kDLCPU:
    case kDLCUDAHost: device = Device::cpu(); break;
    case kDLCUDA: device = Device::cuda(dl.device.device_id); break;
    default:
      throw DeviceError("from_dlpack: DLPack device type " +
                        std::to_string(static_cast<int>(dl.device.device_type)) +
                        " is not a CPU or CUDA device");
  }
  const DType dtype = from_dl_dtype(dl.dtype);
  std::vector<std::int64_t> shape(dl.shape, dl.shape + dl.ndim);
  std::vector<std::int64_t> strides;
  if (dl.strides != nullptr) strides.assign(dl.strides, dl.strides + dl.ndim);
  void* data = dl.data == nullptr ? nullptr : static_cast<char*>(dl.data) + dl.byte_offset;
  return from_blob(
      data, dtype, Shape(shape), std::move(strides), [owner] {}, device);
}

void bind_dlpack(py::module_& m) {
  auto tensor = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  tensor.def(
      "__dlpack__",
      [](const Tensor& t, py::object stream) {
        // The consumer's stream is not ordered after mixprec's: a CUDA tensor's pending work is
        // finished before it is handed over (`stream` is accepted for the protocol).
        (void)stream;
        if (t.defined() && t.device().is_cuda()) {
          py::gil_scoped_release release;
          cuda::synchronize(t.device());
        }
        return to_dlpack(t);
      },
      py::arg("stream") = py::none(), "A DLPack capsule viewing this tensor's memory (no copy).");
  tensor.def("__dlpack_device__", [](const Tensor& t) {
    const Device d = t.device();
    return py::make_tuple(static_cast<int>(d.is_cuda() ? kDLCUDA : kDLCPU), d.index);
  });
  m.def(
      "from_dlpack", [](py::object obj) { return tensor_from_dlpack(obj); }, py::arg("x"),
      "A Tensor viewing the memory of a DLPack producer (a PyTorch tensor, a NumPy array, a "
      "legacy capsule) without a copy; the producer's memory stays alive while the tensor does.");
}

}  // namespace mixprec::python
