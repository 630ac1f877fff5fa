// mixprec.Tensor, dtypes, and the conversions between NumPy arrays and tensors. A NumPy array
// becomes a tensor without a copy when its dtype is one of mixprec's and its layout is a strided
// view mixprec can describe (mixprec::from_blob); the tensor's storage then holds a reference to
// the array, dropped (with the GIL taken) when the last tensor viewing it goes away.
#include <Python.h>

#include <cstring>
#include <memory>
#include <sstream>

#include "bindings.h"

namespace mixprec::python {

Tensor tensor_from_dlpack(py::handle obj);  // dlpack.cpp

namespace {

// A strong reference to a Python object that may be dropped from any thread: the storage of a
// tensor viewing a NumPy array can die inside fit(), where the GIL is released.
class PyReference {
 public:
  explicit PyReference(py::object obj) : obj_(obj.release().ptr()) {}
  PyReference(const PyReference&) = delete;
  PyReference& operator=(const PyReference&) = delete;
  ~PyReference() {
    if (!Py_IsInitialized()) return;  // at exit: nothing left to free it into
    const PyGILState_STATE state = PyGILState_Ensure();
    Py_DECREF(obj_);
    PyGILState_Release(state);
  }

 private:
  PyObject* obj_;
};

// mixprec's dtype of a NumPy dtype, or nullopt for those it lacks (int8, uint16, complex...).
std::optional<DType> from_numpy_dtype(const py::dtype& dt) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'f' && size == 4) return DType::float32;
  if (kind == 'f' && size == 2) return DType::float16;
  if (kind == 'f' && size == 8) return DType::float64;
  if (kind == 'i' && size == 4) return DType::int32;
  if (kind == 'i' && size == 8) return DType::int64;
  if (kind == 'u' && size == 1) return DType::uint8;
  if (kind == 'b') return DType::bool_;
  return std::nullopt;
}

// The array viewed as a tensor of `dtype` (its own, or bfloat16 for raw uint16 bits), or an
// undefined tensor when its layout does not allow a view.
Tensor view_array(const py::array& arr, DType dtype) {
  const auto flags = py::detail::array_proxy(arr.ptr())->flags;
  const bool aligned = (flags & py::detail::npy_api::NPY_ARRAY_ALIGNED_) != 0;
  const bool writeable = (flags & py::detail::npy_api::NPY_ARRAY_WRITEABLE_) != 0;
  // A read-only array (np.frombuffer of bytes) is copied: Tensor.assign may write into a tensor.
  if (!aligned || !writeable) return Tensor();
  if (arr.dtype().byteorder() == '>') return Tensor();
  const auto itemsize = static_cast<py::ssize_t>(dtype_size(dtype));
  std::vector<std::int64_t> shape(static_cast<std::size_t>(arr.ndim()));
  std::vector<std::int64_t> strides(shape.size());
  for (py::ssize_t i = 0; i < arr.ndim(); ++i) {
    const py::ssize_t stride = arr.strides(i);
    shape[static_cast<std::size_t>(i)] = arr.shape(i);
    if (arr.shape(i) <= 1) {  // any stride serves an extent of 0 or 1
      strides[static_cast<std::size_t>(i)] = 0;
      continue;
    }
    if (stride < 0 || stride % itemsize != 0) return Tensor();
    strides[static_cast<std::size_t>(i)] = stride / itemsize;
  }
  // Extent-1 axes get the row-major stride they would have, so is_contiguous() sees through them.
  std::int64_t running = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] <= 1) strides[i] = running;
    running = strides[i] * std::max<std::int64_t>(shape[i], 1);
  }
  auto keep = std::make_shared<PyReference>(py::reinterpret_borrow<py::object>(arr));
  return from_blob(const_cast<void*>(arr.data()), dtype, Shape(shape), std::move(strides),
                   [keep] {});
}

py::object numpy() { return py::module_::import("numpy"); }

}  // namespace

py::dtype numpy_dtype(DType dtype) {
  switch (dtype) {
    case DType::float32: return py::dtype("float32");
    case DType::float16: return py::dtype("float16");
    case DType::float64: return py::dtype("float64");
    case DType::int32: return py::dtype("int32");
    case DType::int64: return py::dtype("int64");
    case DType::uint8: return py::dtype("uint8");
    case DType::bool_: return py::dtype("bool");
    case DType::bfloat16: break;
  }
  throw ValueError(
      "NumPy has no bfloat16; read such a tensor as float32 (tensor.numpy()) or as "
      "its raw bits (tensor.numpy(raw_bfloat16=True))");
}

DType to_dtype(py::handle obj) {
  if (py::isinstance<DType>(obj)) return obj.cast<DType>();
  if (py::isinstance<py::str>(obj)) {
    const auto name = obj.cast<std::string>();
    if (name == "bool") return DType::bool_;
    return parse_dtype(name);
  }
  // A NumPy dtype or scalar type (np.float16, np.dtype('int64')).
  py::dtype dt = py::dtype::from_args(py::reinterpret_borrow<py::object>(obj));
  if (auto d = from_numpy_dtype(dt)) return *d;
  throw DTypeError("mixprec has no dtype for NumPy's " + py::str(dt).cast<std::string>() +
                   "; use float32, float16, bfloat16, float64, int32, int64, uint8 or bool");
}

Tensor to_tensor(py::handle obj, std::optional<DType> dtype) {
  if (py::isinstance<Tensor>(obj)) {
    const auto& t = obj.cast<const Tensor&>();
    return dtype && *dtype != t.dtype() ? t.to(*dtype) : t;
  }
  if (py::isinstance<layers::Layer>(obj) || py::isinstance<KerasTensor>(obj)) {
    throw py::type_error("expected an array or a Tensor, got a " +
                         py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
  }
  const bool is_array = py::isinstance<py::array>(obj);
  if (!is_array && py::hasattr(obj, "__dlpack__")) {
    Tensor t = tensor_from_dlpack(obj);
    return dtype && *dtype != t.dtype() ? t.to(*dtype) : t;
  }
  py::array arr;
  if (is_array) {
    arr = py::reinterpret_borrow<py::array>(obj);
  } else {
    arr = numpy().attr("asarray")(obj);
    // Python floats become float32 tensors, as Keras makes them (NumPy would say float64).
    if (!dtype && arr.dtype().kind() == 'f' && arr.dtype().itemsize() == 8) {
      arr = arr.attr("astype")("float32");
    }
  }
  // Raw bfloat16 bits: a uint16 array read as bfloat16.
  if (dtype == DType::bfloat16 && arr.dtype().kind() == 'u' && arr.dtype().itemsize() == 2) {
    Tensor t = view_array(arr, DType::bfloat16);
    if (t.defined()) return t;
    return view_array(numpy().attr("ascontiguousarray")(arr), DType::bfloat16);
  }
  auto own = from_numpy_dtype(arr.dtype());
  if (!own) {
    const char kind = arr.dtype().kind();
    if (kind == 'i' || kind == 'u') {  // int8, int16, uint16, uint32, uint64
      arr = arr.attr("astype")("int64");
      own = DType::int64;
    } else {
      throw DTypeError("cannot make a tensor of NumPy dtype " +
                       py::str(arr.dtype()).cast<std::string>() +
                       " (mixprec has float32, float16, bfloat16, float64, int32, int64, "
                       "uint8, bool)");
    }
  }
  Tensor t = view_array(arr, *own);
  if (!t.defined()) {
    py::array copy = numpy().attr("array")(arr, py::arg("order") = "C", py::arg("copy") = true);
    t = view_array(copy, *own);
  }
  return dtype && *dtype != t.dtype() ? t.to(*dtype) : t;
}

Tensor to_tensor_or_none(py::handle obj) { return obj.is_none() ? Tensor() : to_tensor(obj); }

py::array to_numpy(const Tensor& tensor, bool raw_bfloat16) {
  if (!tensor.defined()) throw ValueError("this Tensor is undefined (it has no values)");
  Tensor t = tensor.detach();
  if (!t.device().is_cpu()) t = t.to(Device::cpu());
  py::dtype dt;
  if (t.dtype() == DType::bfloat16) {
    if (raw_bfloat16) {
      dt = py::dtype("uint16");
    } else {
      t = t.to(DType::float32);
      dt = py::dtype("float32");
    }
  } else {
    dt = numpy_dtype(t.dtype());
  }
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  std::vector<py::ssize_t> strides;
  const auto itemsize = static_cast<py::ssize_t>(dtype_size(t.dtype()));
  for (auto s : t.strides()) strides.push_back(static_cast<py::ssize_t>(s) * itemsize);
  // The array's base owns a handle to the tensor, so the storage outlives the view.
  auto* owner = new Tensor(t);
  py::capsule base(owner, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(dt, shape, strides, t.numel() == 0 ? nullptr : t.data_ptr(), base);
}

std::optional<mixed_precision::Policy> to_policy(py::handle obj) {
  if (obj.is_none()) return std::nullopt;
  if (py::isinstance<mixed_precision::Policy>(obj)) return obj.cast<mixed_precision::Policy>();
  if (py::isinstance<py::str>(obj)) return mixed_precision::Policy(obj.cast<std::string>());
  if (py::isinstance<DType>(obj)) {
    return mixed_precision::Policy(std::string(dtype_name(obj.cast<DType>())));
  }
  throw py::type_error("dtype must be a policy name ('mixed_float16'), a Policy or None");
}

std::vector<std::int64_t> to_partial_shape(py::handle obj) {
  std::vector<std::int64_t> shape;
  if (py::isinstance<py::int_>(obj)) return {obj.cast<std::int64_t>()};
  for (auto item : obj) shape.push_back(item.is_none() ? -1 : item.cast<std::int64_t>());
  return shape;
}

py::tuple partial_shape_to_tuple(const std::vector<std::int64_t>& shape) {
  py::tuple out(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) {
    out[i] = shape[i] < 0 ? py::none() : py::object(py::int_(shape[i]));
  }
  return out;
}

namespace {

py::tuple shape_tuple(const Tensor& t) {
  py::tuple out(static_cast<std::size_t>(t.rank()));
  for (int i = 0; i < t.rank(); ++i) out[static_cast<std::size_t>(i)] = py::int_(t.shape()[i]);
  return out;
}

std::vector<int> to_axes(py::handle axis) {
  if (axis.is_none()) return {};
  if (py::isinstance<py::int_>(axis)) return {axis.cast<int>()};
  return axis.cast<std::vector<int>>();
}

// Binary operators take a Tensor, a Python number, or an array on the other side.
template <typename Op>
void def_binary(py::class_<Tensor>& cls, const char* name, const char* rname, Op op) {
  cls.def(name, [op](const Tensor& a, const Tensor& b) { return op(a, b); });
  cls.def(name, [op](const Tensor& a, py::object b) { return op(a, to_tensor(b, a.dtype())); });
  cls.def(rname, [op](const Tensor& a, py::object b) { return op(to_tensor(b, a.dtype()), a); });
}

}  // namespace

void bind_tensor(py::module_& m) {
  py::enum_<DType>(m, "DType", "A tensor's element type; `.name` is its name ('float16').")
      .value("float32", DType::float32)
      .value("float16", DType::float16)
      .value("bfloat16", DType::bfloat16)
      .value("float64", DType::float64)
      .value("int32", DType::int32)
      .value("int64", DType::int64)
      .value("uint8", DType::uint8)
      .value("bool", DType::bool_)
      .def("__str__", [](DType d) { return std::string(dtype_name(d)); })
      .def_property_readonly("name", [](DType d) { return std::string(dtype_name(d)); })
      .def_property_readonly("is_floating", [](DType d) { return is_floating(d); })
      .def_property_readonly("itemsize", [](DType d) { return dtype_size(d); });
  m.def(
      "as_dtype", [](py::object obj) { return to_dtype(obj); }, py::arg("dtype"),
      "The DType of a name ('float16'), a DType or a NumPy dtype.");

  py::class_<Tensor> cls(m, "Tensor", R"doc(
A tensor: a strided view of storage on a device, with a dtype, and its autograd state.

Tensor(data, dtype=None) takes a NumPy array without copying it when the array's dtype is one of
mixprec's (float32, float16, float64, int32, int64, uint8, bool) and its strides are
non-negative; the array is kept alive as long as the tensor views it. Other inputs (lists, other
dtypes, reversed views) are copied. dtype='bfloat16' with a uint16 array reads its raw bits.
Objects with __dlpack__ (PyTorch tensors) are viewed in place too.

numpy() and __array__ give the values as a NumPy array: a view of the tensor's memory for CPU
tensors of NumPy's dtypes; bfloat16, which NumPy lacks, comes out as float32 by default and as its
raw uint16 bits with numpy(raw_bfloat16=True).)doc");
  cls.def(py::init([](py::object data, py::object dtype) {
            return to_tensor(
                data, dtype.is_none() ? std::nullopt : std::optional<DType>(to_dtype(dtype)));
          }),
          py::arg("data"), py::arg("dtype") = py::none())
      .def_property_readonly("shape", &shape_tuple, "The shape as a tuple of ints.")
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("device", [](const Tensor& t) { return t.device().to_string(); })
      .def_property_readonly("ndim", &Tensor::rank)
      .def_property_readonly("size", &Tensor::numel)
      .def_property_readonly(
          "strides", [](const Tensor& t) { return t.strides(); }, "Strides in elements.")
      .def("is_contiguous", &Tensor::is_contiguous)
      .def(
          "data_ptr",
          [](const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data_ptr()); },
          "The address of the first element, as an int (compare with a NumPy array's "
          "`__array_interface__['data'][0]` to see that no copy was made).")
      .def("numpy", &to_numpy, py::arg("raw_bfloat16") = false,
           "The values as a NumPy array (a view of CPU memory where the dtype allows). bfloat16 "
           "comes out as float32, or as raw uint16 bits with raw_bfloat16=True.")
      .def(
          "__array__",
          [](const Tensor& t, py::object dtype) {
            py::array a = to_numpy(t);
            return dtype.is_none() ? a : py::array(a.attr("astype")(dtype));
          },
          py::arg("dtype") = py::none())
      .def(
          "item", [](const Tensor& t) { return t.item(); },
          "The value of a one-element tensor as a Python float.")
      .def("__float__", [](const Tensor& t) { return t.item(); })
      .def("__int__", [](const Tensor& t) { return static_cast<std::int64_t>(t.item()); })
      .def("__len__",
           [](const Tensor& t) {
             if (t.rank() == 0) throw py::type_error("len() of a 0-d tensor");
             return t.shape()[0];
           })
      .def("__repr__", &Tensor::to_string)
      .def("__bool__",
           [](const Tensor& t) {
             if (t.numel() != 1) {
               throw ValueError("the truth value of a tensor with " + std::to_string(t.numel()) +
                                " elements is ambiguous");
             }
             return t.item() != 0.0;
           })
      .def(
          "astype", [](const Tensor& t, py::object dtype) { return t.to(to_dtype(dtype)); },
          py::arg("dtype"), "A copy converted to `dtype` (differentiable); itself if the same.")
      .def(
          "to",
          [](const Tensor& t, const std::string& device) { return t.to(Device::parse(device)); },
          py::arg("device"), "The tensor on 'cpu' or 'cuda:N'.")
      .def("contiguous", &Tensor::contiguous)
      .def(
          "reshape",
          [](const Tensor& t, py::args shape) {
            std::vector<std::int64_t> dims;
            if (shape.size() == 1 && !py::isinstance<py::int_>(shape[0])) {
              dims = shape[0].cast<std::vector<std::int64_t>>();
            } else {
              dims = shape.cast<std::vector<std::int64_t>>();
            }
            return t.reshape(Shape(dims));
          },
          "A view (or copy) with another shape; one extent may be -1.")
      .def("transpose", &Tensor::transpose, py::arg("axis0"), py::arg("axis1"))
      .def("permute", &Tensor::permute, py::arg("axes"))
      .def_property_readonly("T",
                             [](const Tensor& t) {
                               if (t.rank() < 2) return t;
                               return t.transpose(-2, -1);
                             })
      .def_property("requires_grad", &Tensor::requires_grad,
                    [](Tensor& t, bool on) { t.set_requires_grad(on); })
      .def_property_readonly("grad",
                             [](const Tensor& t) -> py::object {
                               Tensor g = t.grad();
                               if (!g.defined()) return py::none();
                               return py::cast(g);
                             })
      .def("zero_grad", &Tensor::zero_grad)
      .def(
          "backward",
          [](const Tensor& t, py::object gradient, bool retain_graph) {
            Tensor g = to_tensor_or_none(gradient);
            py::gil_scoped_release release;
            t.backward(g, retain_graph);
          },
          py::arg("gradient") = py::none(), py::arg("retain_graph") = false)
      .def("detach", &Tensor::detach)
      .def(
          "assign",
          [](const Tensor& t, py::object value) {
            t.assign(to_tensor(value, t.dtype()));
            return t;
          },
          py::arg("value"), "Writes `value` into this tensor's storage in place.")
      .def("__neg__", [](const Tensor& t) { return -t; });
  def_binary(cls, "__add__", "__radd__", [](const Tensor& a, const Tensor& b) { return a + b; });
  def_binary(cls, "__sub__", "__rsub__", [](const Tensor& a, const Tensor& b) { return a - b; });
  def_binary(cls, "__mul__", "__rmul__", [](const Tensor& a, const Tensor& b) { return a * b; });
  def_binary(cls, "__truediv__", "__rtruediv__",
             [](const Tensor& a, const Tensor& b) { return a / b; });
  def_binary(cls, "__matmul__", "__rmatmul__", [](const Tensor& a, const Tensor& b) {
    py::gil_scoped_release release;
    return matmul(a, b);
  });
  def_binary(cls, "__pow__", "__rpow__",
             [](const Tensor& a, const Tensor& b) { return pow(a, b); });
  cls.def(
      "__getitem__",
      [](const Tensor& t, py::object index) {
        py::array a = to_numpy(t);
        return to_tensor(numpy().attr("ascontiguousarray")(a[index]), t.dtype());
      },
      "NumPy indexing (t[0], t[1:3], t[mask]) into a new tensor: a copy, not differentiable.");

  // ---- functions ----
  m.def(
      "tensor",
      [](py::object data, py::object dtype) {
        return to_tensor(data,
                         dtype.is_none() ? std::nullopt : std::optional<DType>(to_dtype(dtype)));
      },
      py::arg("data"), py::arg("dtype") = py::none(),
      "A Tensor from an array, a DLPack object or a nested list (see Tensor).");
  m.def(
      "convert_to_tensor",
      [](py::object data, py::object dtype) {
        return to_tensor(data,
                         dtype.is_none() ? std::nullopt : std::optional<DType>(to_dtype(dtype)));
      },
      py::arg("value"), py::arg("dtype") = py::none());
  auto creator = [&m](const char* name, auto fn) {
    m.def(
        name,
        [fn](py::object shape, py::object dtype) {
          return fn(Shape(to_partial_shape(shape)),
                    TensorOptions{.dtype = dtype.is_none() ? DType::float32 : to_dtype(dtype)});
        },
        py::arg("shape"), py::arg("dtype") = py::none());
  };
  creator("zeros", [](const Shape& s, TensorOptions o) { return zeros(s, o); });
  creator("ones", [](const Shape& s, TensorOptions o) { return ones(s, o); });
  m.def(
      "constant",
      [](py::object value, py::object dtype) {
        return to_tensor(value,
                         dtype.is_none() ? std::nullopt : std::optional<DType>(to_dtype(dtype)));
      },
      py::arg("value"), py::arg("dtype") = py::none());

  py::module_ ops = m.def_submodule("ops", "Differentiable operations on tensors.");
  auto binary = [&ops](const char* name, Tensor (*fn)(const Tensor&, const Tensor&)) {
    ops.def(
        name, [fn](const Tensor& a, const Tensor& b) { return fn(a, b); }, py::arg("x1"),
        py::arg("x2"));
    ops.def(
        name,
        [fn](py::object a, py::object b) {
          Tensor ta = to_tensor(a);
          return fn(ta, to_tensor(b, ta.dtype()));
        },
        py::arg("x1"), py::arg("x2"));
  };
  binary("add", &add);
  binary("subtract", &sub);
  binary("multiply", &mul);
  binary("divide", &div);
  binary("maximum", &maximum);
  binary("minimum", &minimum);
  ops.def(
      "matmul",
      [](py::object a, py::object b) {
        Tensor ta = to_tensor(a), tb = to_tensor(b);
        py::gil_scoped_release release;
        return matmul(ta, tb);
      },
      py::arg("x1"), py::arg("x2"));
  auto unary = [&ops](const char* name, Tensor (*fn)(const Tensor&)) {
    ops.def(
        name, [fn](py::object x) { return fn(to_tensor(x)); }, py::arg("x"));
  };
  unary("exp", &exp);
  unary("log", &log);
  unary("sqrt", &sqrt);
  unary("abs", &abs);
  unary("negative", &neg);
  unary("relu", &relu);
  unary("relu6", &relu6);
  unary("sigmoid", &sigmoid);
  unary("tanh", &tanh);
  ops.def(
      "gelu", [](py::object x) { return gelu(to_tensor(x)); }, py::arg("x"));
  unary("silu", &silu);
  ops.def(
      "softmax", [](py::object x, int axis) { return softmax(to_tensor(x), axis); }, py::arg("x"),
      py::arg("axis") = -1);
  ops.def(
      "cast", [](py::object x, py::object dtype) { return cast(to_tensor(x), to_dtype(dtype)); },
      py::arg("x"), py::arg("dtype"));
  auto reduction = [&ops](const char* name,
                          Tensor (*fn)(const Tensor&, const std::vector<int>&, KeepDims)) {
    ops.def(
        name,
        [fn](py::object x, py::object axis, bool keepdims) {
          return fn(to_tensor(x), to_axes(axis), keepdims ? KeepDims::yes : KeepDims::no);
        },
        py::arg("x"), py::arg("axis") = py::none(), py::arg("keepdims") = false);
  };
  reduction("sum", &sum);
  reduction("mean", &mean);
  reduction("max", &max);
  ops.def(
      "argmax", [](py::object x, int axis) { return argmax(to_tensor(x), axis); }, py::arg("x"),
      py::arg("axis") = -1);
  ops.def(
      "reshape",
      [](py::object x, py::object shape) {
        return reshape(to_tensor(x), Shape(to_partial_shape(shape)));
      },
      py::arg("x"), py::arg("newshape"));
  ops.def(
      "concatenate",
      [](py::list xs, int axis) {
        std::vector<Tensor> ts;
        for (auto x : xs) ts.push_back(to_tensor(x));
        return concat(ts, axis);
      },
      py::arg("xs"), py::arg("axis") = 0);
  ops.def(
      "one_hot",
      [](py::object x, std::int64_t depth, py::object dtype) {
        return one_hot(to_tensor(x), depth, dtype.is_none() ? DType::float32 : to_dtype(dtype));
      },
      py::arg("x"), py::arg("num_classes"), py::arg("dtype") = py::none());
  ops.def(
      "all_finite", [](py::object x) { return all_finite(to_tensor(x)); }, py::arg("x"));
}

}  // namespace mixprec::python
