// What the binding files of the Python module share: the conversions between Python objects and
// mixprec values (arrays, dtypes, policies, shapes) and the registration function of each file.
// The module calls only the public API (include/mixprec/); python/mixprec/ is the package around
// it.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"

namespace mixprec::python {

namespace py = pybind11;

// ---- registration, one per file ----
void bind_errors(py::module_& m);           // errors.cpp
void bind_tensor(py::module_& m);           // tensor.cpp
void bind_dlpack(py::module_& m);           // dlpack.cpp
void bind_mixed_precision(py::module_& m);  // mixed_precision.cpp
void bind_layers(py::module_& m);           // layers.cpp
void bind_training(py::module_& m);         // training.cpp: optimizers, losses, metrics, tape
void bind_callbacks(py::module_& m);        // callbacks.cpp
void bind_models(py::module_& m);           // models.cpp
void bind_extras(py::module_& m);  // extras.cpp: applications, data, distributed, devices, info

// ---- pipelines ----
// Windows of a data.TokenDataset as a pipeline (TokenDataset.train_windows, validation_windows):
// the C++ data::Pipeline, which reads each batch's tokens from the mapped file when fit gets to
// it, with the batch size and steps per epoch the windows were drawn for (fit's defaults).
// fit/evaluate/predict take it as x, fit as validation_data (models.cpp).
struct TokenWindows {
  data::Pipeline pipeline;
  std::int64_t context = 0;
  std::optional<std::int64_t> batch_size;       // train_windows': fit's default batch size
  std::optional<std::int64_t> steps_per_epoch;  // train_windows': fit's default
};

// ---- arrays ----
// A Tensor from a Tensor, a NumPy array (viewed in place when its dtype is one of mixprec's and its
// strides are non-negative multiples of the item size; the array stays alive while the tensor
// does), any object with __dlpack__, or anything numpy.asarray accepts (Python floats become
// float32, as Keras makes them). `dtype`, when given, converts (a copy unless it is the array's).
Tensor to_tensor(py::handle obj, std::optional<DType> dtype = std::nullopt);
// Same for an optional argument: None gives an undefined Tensor.
Tensor to_tensor_or_none(py::handle obj);
// The NumPy dtype of a mixprec dtype (bfloat16: none; ValueError).
py::dtype numpy_dtype(DType dtype);
// Tensor -> NumPy array. CPU tensors of a NumPy dtype are viewed in place (the array keeps the
// storage alive); bfloat16 comes out as float32 values, or as its raw uint16 bits with
// raw_bfloat16; CUDA tensors are copied to the host first.
py::array to_numpy(const Tensor& t, bool raw_bfloat16 = false);

// A mixprec DType from "float16", a DType, or a NumPy dtype / type (numpy.float16).
DType to_dtype(py::handle obj);
// A Policy from a name or a Policy; None gives nullopt (the global policy).
std::optional<mixed_precision::Policy> to_policy(py::handle obj);
// Keras shapes: a tuple/list of ints where None is an unknown extent (-1).
std::vector<std::int64_t> to_partial_shape(py::handle obj);
py::tuple partial_shape_to_tuple(const std::vector<std::int64_t>& shape);

// Whether a `with GradientTape()` block is open in this thread (training.cpp). Layers called
// outside every such block record no autograd graph, as in TensorFlow.
bool tape_active();

// "" for None (Keras's activation=None is linear).
inline std::string str_or_empty(py::handle obj) {
  return obj.is_none() ? std::string() : py::cast<std::string>(obj);
}

// Layers come back to Python as their own class when it is bound (model.layers[1] is a Dense with
// its .kernel), otherwise as the base Layer.
py::object wrap_layer(const layers::Layer& layer);
// A Model handle as the Python class it is (Sequential or Model).
py::object wrap_model(const Model& model);

}  // namespace mixprec::python
