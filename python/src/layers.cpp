// mixprec.layers: every layer class of include/mixprec/layers/ with Keras's keyword arguments and
// defaults (activation=None is linear, dtype=None is the global policy, name=None is automatic).
// Calling a layer on KerasTensors records the functional graph; on arrays or Tensors it computes,
// with the GIL released.
#include "bindings.h"

namespace mixprec::python {

namespace {

using namespace layers;

initializers::Initializer to_initializer(py::handle obj) {
  if (py::isinstance<initializers::Initializer>(obj)) {
    return obj.cast<initializers::Initializer>();
  }
  return initializers::Initializer(obj.cast<std::string>());
}

Size2d to_size2d(py::handle obj) {
  if (py::isinstance<py::int_>(obj)) return Size2d(obj.cast<int>());
  const auto v = obj.cast<std::vector<int>>();
  if (v.size() != 2) {
    throw ValueError("expected an int or a pair of ints, got " + std::to_string(v.size()) +
                     " values");
  }
  return Size2d(v[0], v[1]);
}

py::tuple size2d_tuple(Size2d s) { return py::make_tuple(s.height, s.width); }

// The three options every layer ends with.
template <typename Options>
Options common(py::object dtype, py::object name, bool trainable) {
  Options o{};
  o.dtype = to_policy(dtype);
  o.name = str_or_empty(name);
  o.trainable = trainable;
  return o;
}

py::list weights_as_numpy(const std::vector<Tensor>& tensors) {
  py::list out;
  for (const auto& t : tensors) out.append(to_numpy(t));
  return out;
}

py::object optional_tensor(const Tensor& t) {
  return t.defined() ? py::cast(t) : py::object(py::none());
}

// layer(inputs, training=False): symbolic on KerasTensors, eager on anything else.
py::object call_layer(const Layer& layer, py::handle inputs, bool training) {
  if (py::isinstance<KerasTensor>(inputs)) return py::cast(layer(inputs.cast<KerasTensor>()));
  if (py::isinstance<py::list>(inputs) || py::isinstance<py::tuple>(inputs)) {
    auto seq = py::reinterpret_borrow<py::sequence>(inputs);
    if (seq.size() > 0 && py::isinstance<KerasTensor>(seq[0])) {
      auto outputs = layer.call_symbolic(seq.cast<std::vector<KerasTensor>>());
      if (outputs.size() == 1) return py::cast(outputs[0]);
      return py::cast(outputs);
    }
    std::vector<Tensor> xs;
    for (auto item : seq) xs.push_back(to_tensor(item));
    std::vector<Tensor> ys;
    {
      const bool record = tape_active();
      py::gil_scoped_release release;
      std::optional<NoGradScope> no_grad;
      if (!record) no_grad.emplace();
      ys = layer(xs, CallOptions{.training = training});
    }
    if (ys.size() == 1) return py::cast(ys[0]);
    return py::cast(ys);
  }
  Tensor x = to_tensor(inputs);
  Tensor y;
  {
    const bool record = tape_active();
    py::gil_scoped_release release;
    std::optional<NoGradScope> no_grad;
    if (!record) no_grad.emplace();
    y = layer(x, CallOptions{.training = training});
  }
  return py::cast(y);
}

template <typename L>
using LayerClass = py::class_<L, Layer>;

}  // namespace

void bind_layers(py::module_& m) {
  py::class_<initializers::Initializer>(m, "Initializer",
                                        "A weight initializer, by name ('glorot_uniform').")
      .def(py::init([](const std::string& name) { return initializers::Initializer(name); }),
           py::arg("name"))
      .def_property_readonly("name", &initializers::Initializer::name)
      .def(
          "__call__",
          [](const initializers::Initializer& init, py::object shape, py::object dtype) {
            return init(Shape(to_partial_shape(shape)),
                        dtype.is_none() ? DType::float32 : to_dtype(dtype));
          },
          py::arg("shape"), py::arg("dtype") = py::none());
  py::implicitly_convertible<std::string, initializers::Initializer>();

  py::class_<KerasTensor>(m, "KerasTensor",
                          "A symbolic tensor of the functional API: a shape with None for the "
                          "batch axis, a dtype, and the layer call that produced it.")
      .def_property_readonly("shape",
                             [](const KerasTensor& k) { return partial_shape_to_tuple(k.shape()); })
      .def_property_readonly("dtype", &KerasTensor::dtype)
      .def_property_readonly("ndim", &KerasTensor::rank)
      .def_property_readonly("name", &KerasTensor::name)
      .def("__repr__", &KerasTensor::to_string);

  py::class_<Layer>(m, "Layer", "Base of every layer: a handle; copies share the layer.")
      .def("__call__", &call_layer, py::arg("inputs"), py::arg("training") = false)
      .def_property_readonly("name", &Layer::name)
      .def_property_readonly("class_name", &Layer::class_name)
      .def_property_readonly("dtype_policy", &Layer::dtype_policy)
      .def_property_readonly(
          "dtype", [](const Layer& l) { return std::string(dtype_name(l.variable_dtype())); })
      .def_property_readonly(
          "compute_dtype",
          [](const Layer& l) { return std::string(dtype_name(l.compute_dtype())); })
      .def_property_readonly(
          "variable_dtype",
          [](const Layer& l) { return std::string(dtype_name(l.variable_dtype())); })
      .def_property_readonly(
          "accumulation_dtype",
          [](const Layer& l) { return std::string(dtype_name(l.accumulation_dtype())); })
      .def_property_readonly("built", &Layer::built)
      .def_property("trainable", &Layer::trainable, &Layer::set_trainable)
      .def_property_readonly("variables", &Layer::variables)
      .def_property_readonly("weights", &Layer::variables)
      .def_property_readonly("trainable_variables", &Layer::trainable_variables)
      .def_property_readonly("trainable_weights", &Layer::trainable_variables)
      .def_property_readonly("non_trainable_variables", &Layer::non_trainable_variables)
      .def_property_readonly("non_trainable_weights", &Layer::non_trainable_variables)
      .def("count_params", &Layer::count_params)
      .def(
          "get_weights", [](const Layer& l) { return weights_as_numpy(l.get_weights()); },
          "Copies of the variables as NumPy arrays, in creation order.")
      .def(
          "set_weights",
          [](const Layer& l, py::sequence weights) {
            std::vector<Tensor> ts;
            for (auto w : weights) ts.push_back(to_tensor(w));
            l.set_weights(ts);
          },
          py::arg("weights"),
          "Writes arrays (in get_weights() order) into the variables; shapes are checked first.")
      .def("__repr__", [](const Layer& l) {
        return "<" + l.class_name() + " name=" + l.name() + ", policy=" + l.dtype_policy().name() +
               ">";
      });

  LayerClass<InputLayer>(
      m, "InputLayer",
      "The input of a Sequential model: InputLayer(shape=(784,)) (the batch axis excluded).")
      .def(py::init([](py::object shape, py::object batch_size, py::object dtype, py::object name) {
             InputOptions o;
             o.dtype = dtype.is_none() ? DType::float32 : to_dtype(dtype);
             o.name = str_or_empty(name);
             o.batch_size = batch_size.is_none() ? -1 : batch_size.cast<std::int64_t>();
             return InputLayer(to_partial_shape(shape), o);
           }),
           py::arg("shape"), py::arg("batch_size") = py::none(), py::arg("dtype") = py::none(),
           py::arg("name") = py::none())
      .def_property_readonly("output", &InputLayer::output);

  LayerClass<Dense>(m, "Dense", "Densely connected layer: activation(x @ kernel + bias).")
      .def(py::init([](std::int64_t units, py::object activation, bool use_bias,
                       py::object kernel_initializer, py::object bias_initializer, py::object dtype,
                       py::object name, bool trainable) {
             auto o = common<DenseOptions>(dtype, name, trainable);
             o.activation = str_or_empty(activation);
             o.use_bias = use_bias;
             o.kernel_initializer = to_initializer(kernel_initializer);
             o.bias_initializer = to_initializer(bias_initializer);
             return Dense(units, o);
           }),
           py::arg("units"), py::arg("activation") = py::none(), py::arg("use_bias") = true,
           py::arg("kernel_initializer") = "glorot_uniform", py::arg("bias_initializer") = "zeros",
           py::arg("dtype") = py::none(), py::arg("name") = py::none(), py::arg("trainable") = true)
      .def_property_readonly("units", &Dense::units)
      .def_property_readonly("use_bias", &Dense::use_bias)
      .def_property_readonly("kernel", &Dense::kernel)
      .def_property_readonly("bias", [](const Dense& d) { return optional_tensor(d.bias()); });

  LayerClass<Activation>(m, "Activation",
                         "An activation by name ('relu', 'softmax', 'linear', ...); "
                         "dtype='float32' makes a float32 island (the guide's softmax).")
      .def(py::init([](const std::string& activation, py::object dtype, py::object name,
                       bool trainable) {
             return Activation(activation, common<ActivationOptions>(dtype, name, trainable));
           }),
           py::arg("activation"), py::arg("dtype") = py::none(), py::arg("name") = py::none(),
           py::arg("trainable") = true);

  auto plain = [](py::object dtype, py::object name, bool trainable) {
    return common<LayerOptions>(dtype, name, trainable);
  };
#define MIXPREC_PY_COMMON_ARGS \
  py::arg("dtype") = py::none(), py::arg("name") = py::none(), py::arg("trainable") = true

  LayerClass<Softmax>(m, "Softmax", "Softmax over an axis, computed in float32.")
      .def(py::init([plain](int axis, py::object dtype, py::object name, bool trainable) {
             return Softmax(axis, plain(dtype, name, trainable));
           }),
           py::arg("axis") = -1, MIXPREC_PY_COMMON_ARGS);
  LayerClass<Flatten>(m, "Flatten", "Flattens every axis but the batch axis.")
      .def(py::init([plain](py::object dtype, py::object name, bool trainable) {
             return Flatten(plain(dtype, name, trainable));
           }),
           MIXPREC_PY_COMMON_ARGS);
  LayerClass<Reshape>(
      m, "Reshape",
      "Reshapes every axis but the batch axis to target_shape (one extent may be -1).")
      .def(py::init(
               [plain](py::object target_shape, py::object dtype, py::object name, bool trainable) {
                 return Reshape(to_partial_shape(target_shape), plain(dtype, name, trainable));
               }),
           py::arg("target_shape"), MIXPREC_PY_COMMON_ARGS);
  LayerClass<Add>(m, "Add", "Sum of its inputs (same shapes).")
      .def(py::init([plain](py::object dtype, py::object name, bool trainable) {
             return Add(plain(dtype, name, trainable));
           }),
           MIXPREC_PY_COMMON_ARGS);
  LayerClass<Multiply>(m, "Multiply", "Product of its inputs (same shapes).")
      .def(py::init([plain](py::object dtype, py::object name, bool trainable) {
             return Multiply(plain(dtype, name, trainable));
           }),
           MIXPREC_PY_COMMON_ARGS);
  LayerClass<Concatenate>(m, "Concatenate", "Concatenation of its inputs along an axis.")
      .def(py::init([plain](int axis, py::object dtype, py::object name, bool trainable) {
             return Concatenate(axis, plain(dtype, name, trainable));
           }),
           py::arg("axis") = -1, MIXPREC_PY_COMMON_ARGS);
  LayerClass<Dropout>(m, "Dropout",
                      "Drops a fraction `rate` of the values while training (training=True or "
                      "fit), scaling the rest.")
      .def(py::init([](double rate, std::optional<std::uint64_t> seed, py::object dtype,
                       py::object name, bool trainable) {
             auto o = common<DropoutOptions>(dtype, name, trainable);
             o.seed = seed;
             return Dropout(rate, o);
           }),
           py::arg("rate"), py::arg("seed") = py::none(), MIXPREC_PY_COMMON_ARGS)
      .def_property_readonly("rate", &Dropout::rate);

  LayerClass<Conv2D>(m, "Conv2D", "2-D convolution over NHWC images.")
      .def(py::init([](std::int64_t filters, py::object kernel_size, py::object strides,
                       const std::string& padding, py::object dilation_rate, int groups,
                       py::object activation, bool use_bias, py::object kernel_initializer,
                       py::object bias_initializer, py::object dtype, py::object name,
                       bool trainable) {
             auto o = common<Conv2DOptions>(dtype, name, trainable);
             o.strides = to_size2d(strides);
             o.padding = PaddingMode(padding);
             o.dilation_rate = to_size2d(dilation_rate);
             o.groups = groups;
             o.activation = str_or_empty(activation);
             o.use_bias = use_bias;
             o.kernel_initializer = to_initializer(kernel_initializer);
             o.bias_initializer = to_initializer(bias_initializer);
             return Conv2D(filters, to_size2d(kernel_size), o);
           }),
           py::arg("filters"), py::arg("kernel_size"), py::arg("strides") = 1,
           py::arg("padding") = "valid", py::arg("dilation_rate") = 1, py::arg("groups") = 1,
           py::arg("activation") = py::none(), py::arg("use_bias") = true,
           py::arg("kernel_initializer") = "glorot_uniform", py::arg("bias_initializer") = "zeros",
           MIXPREC_PY_COMMON_ARGS)
      .def_property_readonly("filters", &Conv2D::filters)
      .def_property_readonly("kernel_size",
                             [](const Conv2D& c) { return size2d_tuple(c.kernel_size()); })
      .def_property_readonly("strides", [](const Conv2D& c) { return size2d_tuple(c.strides()); })
      .def_property_readonly("padding",
                             [](const Conv2D& c) { return std::string(c.padding().name()); })
      .def_property_readonly("kernel", &Conv2D::kernel)
      .def_property_readonly("bias", [](const Conv2D& c) { return optional_tensor(c.bias()); });

  LayerClass<DepthwiseConv2D>(m, "DepthwiseConv2D",
                              "Depthwise 2-D convolution over NHWC images (one filter per input "
                              "channel times depth_multiplier).")
      .def(py::init([](py::object kernel_size, py::object strides, const std::string& padding,
                       int depth_multiplier, py::object dilation_rate, py::object activation,
                       bool use_bias, py::object depthwise_initializer, py::object bias_initializer,
                       py::object dtype, py::object name, bool trainable) {
             auto o = common<DepthwiseConv2DOptions>(dtype, name, trainable);
             o.strides = to_size2d(strides);
             o.padding = PaddingMode(padding);
             o.depth_multiplier = depth_multiplier;
             o.dilation_rate = to_size2d(dilation_rate);
             o.activation = str_or_empty(activation);
             o.use_bias = use_bias;
             o.depthwise_initializer = to_initializer(depthwise_initializer);
             o.bias_initializer = to_initializer(bias_initializer);
             return DepthwiseConv2D(to_size2d(kernel_size), o);
           }),
           py::arg("kernel_size"), py::arg("strides") = 1, py::arg("padding") = "valid",
           py::arg("depth_multiplier") = 1, py::arg("dilation_rate") = 1,
           py::arg("activation") = py::none(), py::arg("use_bias") = true,
           py::arg("depthwise_initializer") = "glorot_uniform",
           py::arg("bias_initializer") = "zeros", MIXPREC_PY_COMMON_ARGS)
      .def_property_readonly("depthwise_kernel", &DepthwiseConv2D::depthwise_kernel)
      .def_property_readonly("bias",
                             [](const DepthwiseConv2D& c) { return optional_tensor(c.bias()); });

  auto batch_norm_init = [](int axis, double momentum, double epsilon, bool center, bool scale,
                            py::object beta_initializer, py::object gamma_initializer,
                            py::object moving_mean_initializer,
                            py::object moving_variance_initializer, bool synchronized,
                            py::object dtype, py::object name, bool trainable) {
    auto o = common<BatchNormalizationOptions>(dtype, name, trainable);
    o.axis = axis;
    o.momentum = momentum;
    o.epsilon = epsilon;
    o.center = center;
    o.scale = scale;
    o.beta_initializer = to_initializer(beta_initializer);
    o.gamma_initializer = to_initializer(gamma_initializer);
    o.moving_mean_initializer = to_initializer(moving_mean_initializer);
    o.moving_variance_initializer = to_initializer(moving_variance_initializer);
    o.synchronized = synchronized;
    return o;
  };
#define MIXPREC_PY_BN_ARGS                                                                  \
  py::arg("axis") = -1, py::arg("momentum") = 0.99, py::arg("epsilon") = 1e-3,              \
  py::arg("center") = true, py::arg("scale") = true, py::arg("beta_initializer") = "zeros", \
  py::arg("gamma_initializer") = "ones", py::arg("moving_mean_initializer") = "zeros",      \
  py::arg("moving_variance_initializer") = "ones", py::arg("synchronized") = false,         \
  MIXPREC_PY_COMMON_ARGS
  LayerClass<BatchNormalization>(m, "BatchNormalization",
                                 "Batch normalization over the last axis; statistics and "
                                 "parameters stay float32 under every policy.")
      .def(py::init([batch_norm_init](int axis, double momentum, double epsilon, bool center,
                                      bool scale, py::object bi, py::object gi, py::object mmi,
                                      py::object mvi, bool synchronized, py::object dtype,
                                      py::object name, bool trainable) {
             return BatchNormalization(batch_norm_init(axis, momentum, epsilon, center, scale, bi,
                                                       gi, mmi, mvi, synchronized, dtype, name,
                                                       trainable));
           }),
           MIXPREC_PY_BN_ARGS)
      .def_property_readonly("momentum", &BatchNormalization::momentum)
      .def_property_readonly("epsilon", &BatchNormalization::epsilon)
      .def_property_readonly("gamma",
                             [](const BatchNormalization& b) { return optional_tensor(b.gamma()); })
      .def_property_readonly("beta",
                             [](const BatchNormalization& b) { return optional_tensor(b.beta()); })
      .def_property_readonly("moving_mean", &BatchNormalization::moving_mean)
      .def_property_readonly("moving_variance", &BatchNormalization::moving_variance);
  py::class_<SyncBatchNormalization, BatchNormalization>(
      m, "SyncBatchNormalization",
      "BatchNormalization whose batch statistics are summed over the ranks of a data-parallel fit.")
      .def(py::init([batch_norm_init](int axis, double momentum, double epsilon, bool center,
                                      bool scale, py::object bi, py::object gi, py::object mmi,
                                      py::object mvi, bool synchronized, py::object dtype,
                                      py::object name, bool trainable) {
             return SyncBatchNormalization(batch_norm_init(axis, momentum, epsilon, center, scale,
                                                           bi, gi, mmi, mvi, synchronized, dtype,
                                                           name, trainable));
           }),
           MIXPREC_PY_BN_ARGS);

  LayerClass<LayerNormalization>(
      m, "LayerNormalization",
      "Normalization over the last axis (float32 statistics and parameters).")
      .def(py::init([](int axis, double epsilon, bool center, bool scale,
                       py::object beta_initializer, py::object gamma_initializer, py::object dtype,
                       py::object name, bool trainable) {
             auto o = common<LayerNormalizationOptions>(dtype, name, trainable);
             o.axis = axis;
             o.epsilon = epsilon;
             o.center = center;
             o.scale = scale;
             o.beta_initializer = to_initializer(beta_initializer);
             o.gamma_initializer = to_initializer(gamma_initializer);
             return LayerNormalization(o);
           }),
           py::arg("axis") = -1, py::arg("epsilon") = 1e-3, py::arg("center") = true,
           py::arg("scale") = true, py::arg("beta_initializer") = "zeros",
           py::arg("gamma_initializer") = "ones", MIXPREC_PY_COMMON_ARGS)
      .def_property_readonly("epsilon", &LayerNormalization::epsilon)
      .def_property_readonly("gamma",
                             [](const LayerNormalization& l) { return optional_tensor(l.gamma()); })
      .def_property_readonly("beta",
                             [](const LayerNormalization& l) { return optional_tensor(l.beta()); });
  LayerClass<RMSNormalization>(
      m, "RMSNormalization",
      "Root-mean-square normalization over the last axis (float32 parameters).")
      .def(py::init([](int axis, double epsilon, py::object scale_initializer, py::object dtype,
                       py::object name, bool trainable) {
             auto o = common<RMSNormalizationOptions>(dtype, name, trainable);
             o.axis = axis;
             o.epsilon = epsilon;
             o.scale_initializer = to_initializer(scale_initializer);
             return RMSNormalization(o);
           }),
           py::arg("axis") = -1, py::arg("epsilon") = 1e-6, py::arg("scale_initializer") = "ones",
           MIXPREC_PY_COMMON_ARGS)
      .def_property_readonly("scale", &RMSNormalization::scale);

  auto pooling = [](py::object pool_size, py::object strides, const std::string& padding,
                    py::object dtype, py::object name, bool trainable) {
    auto o = common<Pooling2DOptions>(dtype, name, trainable);
    o.strides = strides.is_none() ? Size2d(0) : to_size2d(strides);
    o.padding = PaddingMode(padding);
    return std::make_pair(to_size2d(pool_size), o);
  };
  LayerClass<MaxPooling2D>(m, "MaxPooling2D",
                           "Max pooling over NHWC images; strides=None is pool_size.")
      .def(py::init([pooling](py::object pool_size, py::object strides, const std::string& padding,
                              py::object dtype, py::object name, bool trainable) {
             auto [size, o] = pooling(pool_size, strides, padding, dtype, name, trainable);
             return MaxPooling2D(size, o);
           }),
           py::arg("pool_size") = 2, py::arg("strides") = py::none(), py::arg("padding") = "valid",
           MIXPREC_PY_COMMON_ARGS);
  LayerClass<AveragePooling2D>(m, "AveragePooling2D",
                               "Average pooling over NHWC images; strides=None is pool_size.")
      .def(py::init([pooling](py::object pool_size, py::object strides, const std::string& padding,
                              py::object dtype, py::object name, bool trainable) {
             auto [size, o] = pooling(pool_size, strides, padding, dtype, name, trainable);
             return AveragePooling2D(size, o);
           }),
           py::arg("pool_size") = 2, py::arg("strides") = py::none(), py::arg("padding") = "valid",
           MIXPREC_PY_COMMON_ARGS);
  LayerClass<GlobalAveragePooling2D>(m, "GlobalAveragePooling2D",
                                     "Mean over the spatial axes of NHWC images.")
      .def(py::init([](bool keepdims, py::object dtype, py::object name, bool trainable) {
             auto o = common<GlobalPooling2DOptions>(dtype, name, trainable);
             o.keepdims = keepdims;
             return GlobalAveragePooling2D(o);
           }),
           py::arg("keepdims") = false, MIXPREC_PY_COMMON_ARGS);
  LayerClass<ZeroPadding2D>(
      m, "ZeroPadding2D",
      "Zero padding of NHWC images: an int, (rows, cols) or ((top, bottom), (left, right)).")
      .def(py::init([plain](py::object padding, py::object dtype, py::object name, bool trainable) {
             auto o = plain(dtype, name, trainable);
             if (py::isinstance<py::int_>(padding)) return ZeroPadding2D(padding.cast<int>(), o);
             auto seq = padding.cast<py::sequence>();
             if (seq.size() == 2 && py::isinstance<py::int_>(seq[0])) {
               return ZeroPadding2D(seq[0].cast<int>(), seq[1].cast<int>(), o);
             }
             return ZeroPadding2D(seq[0].cast<std::array<int, 2>>(),
                                  seq[1].cast<std::array<int, 2>>(), o);
           }),
           py::arg("padding") = 1, MIXPREC_PY_COMMON_ARGS);
  LayerClass<Resizing>(m, "Resizing", "Bilinear resizing of NHWC images to (height, width).")
      .def(py::init([](std::int64_t height, std::int64_t width, const std::string& interpolation,
                       py::object dtype, py::object name, bool trainable) {
             auto o = common<ResizingOptions>(dtype, name, trainable);
             o.interpolation = interpolation;
             return Resizing(height, width, o);
           }),
           py::arg("height"), py::arg("width"), py::arg("interpolation") = "bilinear",
           MIXPREC_PY_COMMON_ARGS);
  LayerClass<Cropping1D>(m, "Cropping1D",
                         "Crops (left, right) steps off the time axis of (batch, time, features).")
      .def(
          py::init([plain](py::object cropping, py::object dtype, py::object name, bool trainable) {
            Cropping1DAmounts amounts;
            if (py::isinstance<py::int_>(cropping)) {
              amounts.left = amounts.right = cropping.cast<std::int64_t>();
            } else {
              auto v = cropping.cast<std::vector<std::int64_t>>();
              if (v.size() != 2) throw ValueError("Cropping1D: cropping must be an int or a pair");
              amounts.left = v[0];
              amounts.right = v[1];
            }
            return Cropping1D(amounts, plain(dtype, name, trainable));
          }),
          py::arg("cropping") = py::make_tuple(1, 1), MIXPREC_PY_COMMON_ARGS);

  LayerClass<Embedding>(m, "Embedding",
                        "Rows of a (input_dim, output_dim) table looked up by integer ids.")
      .def(py::init([](std::int64_t input_dim, std::int64_t output_dim,
                       py::object embeddings_initializer, py::object dtype, py::object name,
                       bool trainable) {
             auto o = common<EmbeddingOptions>(dtype, name, trainable);
             o.embeddings_initializer = to_initializer(embeddings_initializer);
             return Embedding(input_dim, output_dim, o);
           }),
           py::arg("input_dim"), py::arg("output_dim"),
           py::arg("embeddings_initializer") = "random_uniform", MIXPREC_PY_COMMON_ARGS)
      .def_property_readonly("input_dim", &Embedding::input_dim)
      .def_property_readonly("output_dim", &Embedding::output_dim)
      .def_property_readonly("embeddings", &Embedding::embeddings);
  py::class_<ReversibleEmbedding, Embedding>(m, "ReversibleEmbedding",
                                             "An Embedding that also maps features back to logits "
                                             "(x @ table^T), for tied language-model heads.")
      .def(py::init([](std::int64_t input_dim, std::int64_t output_dim,
                       py::object embeddings_initializer, py::object dtype, py::object name,
                       bool trainable) {
             auto o = common<EmbeddingOptions>(dtype, name, trainable);
             o.embeddings_initializer = to_initializer(embeddings_initializer);
             return ReversibleEmbedding(input_dim, output_dim, o);
           }),
           py::arg("input_dim"), py::arg("output_dim"),
           py::arg("embeddings_initializer") = "random_uniform", MIXPREC_PY_COMMON_ARGS);
  LayerClass<PositionEmbedding>(m, "PositionEmbedding",
                                "A learned (sequence_length, features) table added to a sequence "
                                "(keras_hub's PositionEmbedding).")
      .def(py::init([](std::int64_t sequence_length, py::object initializer, py::object dtype,
                       py::object name, bool trainable) {
             auto o = common<PositionEmbeddingOptions>(dtype, name, trainable);
             o.initializer = to_initializer(initializer);
             return PositionEmbedding(sequence_length, o);
           }),
           py::arg("sequence_length"), py::arg("initializer") = "glorot_uniform",
           MIXPREC_PY_COMMON_ARGS)
      .def_property_readonly("embeddings", &PositionEmbedding::embeddings);
  LayerClass<ClassToken>(m, "ClassToken",
                         "Prepends a learned token to a sequence (ViT's class token).")
      .def(py::init([](py::object initializer, py::object dtype, py::object name, bool trainable) {
             auto o = common<ClassTokenOptions>(dtype, name, trainable);
             o.initializer = to_initializer(initializer);
             return ClassToken(o);
           }),
           py::arg("initializer") = "zeros", MIXPREC_PY_COMMON_ARGS)
      .def_property_readonly("token", &ClassToken::token);

  LayerClass<MultiHeadAttention>(m, "MultiHeadAttention",
                                 "Multi-head attention (keras.layers.MultiHeadAttention), called "
                                 "as Keras calls it.")
      .def(py::init([](std::int64_t num_heads, std::int64_t key_dim,
                       std::optional<std::int64_t> value_dim, double dropout, bool use_bias,
                       std::optional<std::int64_t> output_shape, py::object kernel_initializer,
                       py::object bias_initializer, std::optional<std::uint64_t> seed,
                       py::object dtype, py::object name, bool trainable) {
             auto o = common<MultiHeadAttentionOptions>(dtype, name, trainable);
             o.value_dim = value_dim;
             o.dropout = dropout;
             o.use_bias = use_bias;
             o.output_shape = output_shape;
             o.kernel_initializer = to_initializer(kernel_initializer);
             o.bias_initializer = to_initializer(bias_initializer);
             o.seed = seed;
             return MultiHeadAttention(num_heads, key_dim, o);
           }),
           py::arg("num_heads"), py::arg("key_dim"), py::arg("value_dim") = py::none(),
           py::arg("dropout") = 0.0, py::arg("use_bias") = true,
           py::arg("output_shape") = py::none(), py::arg("kernel_initializer") = "glorot_uniform",
           py::arg("bias_initializer") = "zeros", py::arg("seed") = py::none(),
           MIXPREC_PY_COMMON_ARGS)
      .def(
          "__call__",
          [](const MultiHeadAttention& mha, py::object query, py::object value, py::object key,
             py::object attention_mask, bool return_attention_scores, bool training,
             bool use_causal_mask) -> py::object {
            if (py::isinstance<KerasTensor>(query)) {
              if (return_attention_scores) {
                throw ValueError(
                    "MultiHeadAttention: return_attention_scores=True is for eager calls; in a "
                    "functional model the layer returns its output only");
              }
              SymbolicAttentionArgs a;
              if (!key.is_none()) a.key = key.cast<KerasTensor>();
              if (!attention_mask.is_none()) a.attention_mask = attention_mask.cast<KerasTensor>();
              a.use_causal_mask = use_causal_mask;
              return py::cast(mha(query.cast<KerasTensor>(), value.cast<KerasTensor>(), a));
            }
            AttentionArgs a;
            a.key = to_tensor_or_none(key);
            a.attention_mask = to_tensor_or_none(attention_mask);
            a.use_causal_mask = use_causal_mask;
            a.training = training;
            const Tensor q = to_tensor(query), v = to_tensor(value);
            layers::AttentionWithScores r;
            {
              const bool record = tape_active();
              py::gil_scoped_release release;
              std::optional<NoGradScope> no_grad;
              if (!record) no_grad.emplace();
              if (return_attention_scores) {
                r = mha.call_with_scores(q, v, a);
              } else {
                r.output = mha(q, v, a);
              }
            }
            if (return_attention_scores) return py::make_tuple(r.output, r.scores);
            return py::cast(r.output);
          },
          py::arg("query"), py::arg("value"), py::arg("key") = py::none(),
          py::arg("attention_mask") = py::none(), py::arg("return_attention_scores") = false,
          py::arg("training") = false, py::arg("use_causal_mask") = false,
          "Keras' call: (query, value, key=None, attention_mask=None (bool (B, Tq, Tv), True = "
          "attend), return_attention_scores=False, training=False, use_causal_mask=False). With "
          "return_attention_scores (eager only): (output, scores), the scores (B, H, Tq, Tv) "
          "float32 softmax probabilities before dropout.")
      .def_property_readonly("num_heads", &MultiHeadAttention::num_heads)
      .def_property_readonly("key_dim", &MultiHeadAttention::key_dim)
      .def_property_readonly("value_dim", &MultiHeadAttention::value_dim);
#undef MIXPREC_PY_BN_ARGS
#undef MIXPREC_PY_COMMON_ARGS
}

py::object wrap_layer(const Layer& layer) {
  const std::string& kind = layer.class_name();
  if (kind == "Dense") return py::cast(Dense(layer));
  if (kind == "Conv2D") return py::cast(Conv2D(layer));
  if (kind == "DepthwiseConv2D") return py::cast(DepthwiseConv2D(layer));
  if (kind == "BatchNormalization") return py::cast(BatchNormalization(layer));
  if (kind == "LayerNormalization") return py::cast(LayerNormalization(layer));
  if (kind == "RMSNormalization") return py::cast(RMSNormalization(layer));
  if (kind == "Embedding") return py::cast(Embedding(layer));
  if (kind == "ReversibleEmbedding") return py::cast(ReversibleEmbedding(layer));
  if (kind == "PositionEmbedding") return py::cast(PositionEmbedding(layer));
  if (kind == "ClassToken") return py::cast(ClassToken(layer));
  if (kind == "MultiHeadAttention") return py::cast(MultiHeadAttention(layer));
  if (kind == "Functional" || kind == "Sequential" || kind == "Model") {
    return wrap_model(Model(layer));
  }
  return py::cast(layer);
}

}  // namespace mixprec::python
