// mixprec's exceptions as Python exceptions of the matching built-in kinds, carrying the C++
// message: each class derives from mixprec.Error and from the built-in a Python user catches
// (ValueError, TypeError, OSError, RuntimeError), so `except ValueError` works as with Keras.
#include <exception>

#include "bindings.h"

namespace mixprec::python {

namespace {

struct ErrorClasses {
  py::object error, shape, dtype, value, data, device, autograd, io_error, distributed;
};

ErrorClasses& classes() {
  static ErrorClasses* c = new ErrorClasses();  // lives as long as the interpreter needs it
  return *c;
}

py::object make_class(py::module_& m, const char* name, py::tuple bases, const char* doc) {
  py::dict attrs;
  attrs["__module__"] = "mixprec";
  attrs["__doc__"] = doc;
  py::object cls = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(&PyType_Type))(
      name, bases, attrs);
  m.attr(name) = cls;
  return cls;
}

}  // namespace

void bind_errors(py::module_& m) {
  auto builtin = [](const char* name) {
    return py::reinterpret_borrow<py::object>(py::module_::import("builtins").attr(name));
  };
  ErrorClasses& c = classes();
  c.error = make_class(m, "Error", py::make_tuple(builtin("RuntimeError")),
                       "Base of every error mixprec raises (mixprec::Error in C++).");
  c.shape = make_class(m, "ShapeError", py::make_tuple(c.error, builtin("ValueError")),
                       "Incompatible or wrong shapes (a ValueError).");
  c.dtype = make_class(m, "DTypeError", py::make_tuple(c.error, builtin("TypeError")),
                       "Wrong or mismatched dtypes (a TypeError).");
  c.value = make_class(m, "ValueError", py::make_tuple(c.error, builtin("ValueError")),
                       "Bad argument values (a ValueError).");
  c.data = make_class(m, "DataError", py::make_tuple(c.value),
                      "Malformed data files: IDX, CIFAR, token files (a ValueError).");
  c.device = make_class(m, "DeviceError", py::make_tuple(c.error),
                        "A device that is not available, mixed devices, out of memory.");
  c.autograd =
      make_class(m, "AutogradError", py::make_tuple(c.error), "Misuse of the autograd machinery.");
  c.io_error = make_class(m, "IOError", py::make_tuple(c.error, builtin("OSError")),
                          "Files that cannot be read or written, or are malformed (an OSError).");
  c.distributed = make_class(m, "DistributedError", py::make_tuple(c.error),
                             "Failures of the process group (MPI, NCCL).");

  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    const ErrorClasses& k = classes();
    try {
      std::rethrow_exception(p);
    } catch (const data::DataError& e) {
      PyErr_SetString(k.data.ptr(), e.what());
    } catch (const ShapeError& e) {
      PyErr_SetString(k.shape.ptr(), e.what());
    } catch (const DTypeError& e) {
      PyErr_SetString(k.dtype.ptr(), e.what());
    } catch (const ValueError& e) {
      PyErr_SetString(k.value.ptr(), e.what());
    } catch (const DeviceError& e) {
      PyErr_SetString(k.device.ptr(), e.what());
    } catch (const AutogradError& e) {
      PyErr_SetString(k.autograd.ptr(), e.what());
    } catch (const IOError& e) {
      PyErr_SetString(k.io_error.ptr(), e.what());
    } catch (const distributed::DistributedError& e) {
      PyErr_SetString(k.distributed.ptr(), e.what());
    } catch (const Error& e) {
      PyErr_SetString(k.error.ptr(), e.what());
    }
  });
}

}  // namespace mixprec::python
