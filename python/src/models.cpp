// mixprec.Model, mixprec.Sequential, mixprec.Input, load_model: compile/fit/evaluate/predict with
// Keras's keyword arguments. fit, evaluate and predict take NumPy arrays (viewed, not copied) or
// Tensors, and run with the GIL released; Ctrl-C stops them between steps (callbacks.h).
#include <chrono>
#include <iostream>
#include <sstream>

#include "callbacks.h"

namespace mixprec::python {

namespace {

Verbosity to_verbosity(py::handle v) {
  if (py::isinstance<py::str>(v)) return Verbosity(v.cast<std::string>());
  return Verbosity(v.cast<int>());
}

// x given as a mixprec.data.Dataset (the package's tf.data stand-in): its arrays, batch size and
// shuffling, as Keras's fit(dataset) takes them; or as data.TokenWindows: its pipeline, batch size
// and steps per epoch.
struct FitData {
  Tensor x, y;
  std::optional<data::Pipeline> pipeline;
  std::optional<std::int64_t> batch_size, steps_per_epoch;
  std::optional<bool> shuffle;
};

FitData fit_data(py::handle x, py::handle y) {
  FitData d;
  if (py::isinstance<TokenWindows>(x)) {
    if (!y.is_none()) {
      throw ValueError("y must be None when x is TokenWindows (they hold the targets)");
    }
    const auto& w = x.cast<const TokenWindows&>();
    d.pipeline = w.pipeline;
    d.batch_size = w.batch_size;
    d.steps_per_epoch = w.steps_per_epoch;
    return d;
  }
  if (py::hasattr(x, "_fit_arguments")) {
    if (!y.is_none()) throw ValueError("y must be None when x is a Dataset (it holds the targets)");
    py::tuple args = x.attr("_fit_arguments")();
    d.x = to_tensor(args[0]);
    d.y = to_tensor_or_none(args[1]);
    if (!args[2].is_none()) d.batch_size = args[2].cast<std::int64_t>();
    d.shuffle = args[3].cast<bool>();
    return d;
  }
  if (x.is_none()) {
    throw ValueError("x is required (an array, a Tensor, a Dataset or TokenWindows)");
  }
  d.x = to_tensor(x);
  d.y = to_tensor_or_none(y);
  return d;
}

CompileOptions compile_options(py::handle optimizer, py::handle loss, py::handle metrics) {
  CompileOptions o;
  if (py::isinstance<py::str>(optimizer)) {
    o.optimizer = optimizers::get(optimizer.cast<std::string>());
  } else if (!optimizer.is_none()) {
    o.optimizer = optimizer.cast<optimizers::Optimizer>();
  }
  if (py::isinstance<losses::Loss>(loss)) {
    o.loss = loss.cast<losses::Loss>();
  } else if (!loss.is_none()) {
    o.loss = loss.cast<std::string>();
  }
  if (!metrics.is_none()) {
    for (auto item : py::iter(metrics)) {
      if (py::isinstance<metrics::Metric>(item)) {
        o.metrics.emplace_back(item.cast<metrics::Metric>());
      } else {
        o.metrics.emplace_back(item.cast<std::string>());
      }
    }
  }
  return o;
}

py::object scores_to_python(const Scores& scores, bool return_dict) {
  if (return_dict) {
    py::dict d;
    for (const auto& [name, value] : scores.values) d[py::str(name)] = value;
    return d;
  }
  if (scores.values.size() == 1) return py::float_(scores.values[0].second);
  py::list out;
  for (const auto& nv : scores.values) out.append(nv.second);
  return out;
}

History fit(py::object self, py::object x, py::object y, py::object batch_size, int epochs,
            py::object verbose, py::object callbacks, double validation_split,
            py::object validation_data, bool shuffle, int initial_epoch,
            std::optional<std::int64_t> steps_per_epoch, std::optional<std::uint64_t> seed,
            py::object distribute) {
  Model& model = self.cast<Model&>();
  FitData data = fit_data(x, y);
  FitOptions o;
  o.batch_size =
      batch_size.is_none() ? data.batch_size.value_or(32) : batch_size.cast<std::int64_t>();
  o.epochs = epochs;
  o.verbose = to_verbosity(verbose);
  o.validation_split = validation_split;
  if (!validation_data.is_none()) {
    if (py::isinstance<TokenWindows>(validation_data)) {
      o.validation_data = validation_data.cast<const TokenWindows&>().pipeline;
    } else if (py::hasattr(validation_data, "_fit_arguments")) {
      py::tuple args = validation_data.attr("_fit_arguments")();
      o.validation_data = std::make_pair(to_tensor(args[0]), to_tensor(args[1]));
    } else {
      auto seq = validation_data.cast<py::sequence>();
      if (seq.size() != 2) throw ValueError("validation_data must be (x_val, y_val)");
      o.validation_data = std::make_pair(to_tensor(seq[0]), to_tensor(seq[1]));
    }
  }
  o.shuffle = data.shuffle.value_or(shuffle);
  o.seed = seed;
  o.initial_epoch = initial_epoch;
  o.steps_per_epoch = steps_per_epoch ? steps_per_epoch : data.steps_per_epoch;
  if (!distribute.is_none()) o.distribute = distribute.cast<distributed::DataParallel>();
  o.callbacks = to_callbacks(callbacks, self);
  auto interrupt = std::make_shared<InterruptCheck>();
  o.callbacks.emplace_back(interrupt);
  History history;
  {
    py::gil_scoped_release release;
    history = data.pipeline ? model.fit(*data.pipeline, std::move(o))
                            : model.fit(data.x, data.y, std::move(o));
  }
  interrupt->rethrow();
  py::setattr(self, "history", py::cast(history));  // Keras's model.history
  return history;
}

py::object evaluate(py::object self, py::object x, py::object y, py::object batch_size,
                    py::object verbose, py::object callbacks, bool return_dict,
                    py::object distribute) {
  Model& model = self.cast<Model&>();
  FitData data = fit_data(x, y);
  EvaluateOptions o;
  o.batch_size =
      batch_size.is_none() ? data.batch_size.value_or(32) : batch_size.cast<std::int64_t>();
  o.verbose = to_verbosity(verbose);
  if (!distribute.is_none()) o.distribute = distribute.cast<distributed::DataParallel>();
  o.callbacks = to_callbacks(callbacks, self);
  auto interrupt = std::make_shared<InterruptCheck>();
  o.callbacks.emplace_back(interrupt);
  Scores scores;
  {
    py::gil_scoped_release release;
    scores = data.pipeline ? model.evaluate(*data.pipeline, std::move(o))
                           : model.evaluate(data.x, data.y, std::move(o));
  }
  interrupt->rethrow();
  return scores_to_python(scores, return_dict);
}

py::array predict(Model& model, py::object x, py::object batch_size, py::object verbose) {
  const FitData data = fit_data(x, py::none());  // the targets of a Dataset go unused
  PredictOptions o;
  o.batch_size =
      batch_size.is_none() ? data.batch_size.value_or(32) : batch_size.cast<std::int64_t>();
  o.verbose = to_verbosity(verbose);
  Tensor out;
  {
    py::gil_scoped_release release;
    out = data.pipeline ? model.predict(*data.pipeline, o) : model.predict(data.x, o);
  }
  return to_numpy(out);
}

void print_summary(const Model& model) {
  std::ostringstream os;
  model.summary(os);
  py::print(os.str(), py::arg("end") = "");
}

template <typename T>
std::vector<T> one_or_many(py::handle obj) {
  if (py::isinstance<T>(obj)) return {obj.cast<T>()};
  return obj.cast<std::vector<T>>();
}

}  // namespace

py::object wrap_model(const Model& model) { return py::cast(model); }

void bind_models(py::module_& m) {
  py::class_<EpochLog>(m, "EpochLog", "One epoch of fit(): metrics, time, loss-scaling state.")
      .def_readonly("epoch", &EpochLog::epoch)
      .def_readonly("metrics", &EpochLog::metrics)
      .def_readonly("seconds", &EpochLog::seconds)
      .def_readonly("loss_scale", &EpochLog::loss_scale)
      .def_readonly("skipped_steps", &EpochLog::skipped_steps)
      .def_readonly("step_ms", &EpochLog::step_ms);
  py::class_<History>(m, "History",
                      "What fit() returns: history (metric name -> one value per epoch), epoch "
                      "(the epoch indices) and epochs (an EpochLog each, with timings and loss "
                      "scale).")
      .def_readonly("history", &History::history)
      .def_readonly("epochs", &History::epochs)
      .def_property_readonly("epoch", [](const History& h) {
        std::vector<int> e;
        for (const auto& log : h.epochs) e.push_back(log.epoch - 1);
        return e;
      });

  m.def(
      "Input",
      [](py::object shape, py::object batch_size, py::object dtype, py::object name) {
        InputOptions o;
        o.dtype = dtype.is_none() ? DType::float32 : to_dtype(dtype);
        o.name = str_or_empty(name);
        o.batch_size = batch_size.is_none() ? -1 : batch_size.cast<std::int64_t>();
        return Input(to_partial_shape(shape), o);
      },
      py::arg("shape"), py::arg("batch_size") = py::none(), py::arg("dtype") = py::none(),
      py::arg("name") = py::none(),
      "A symbolic input of shape (None, *shape) (keras.Input); None in shape is an unknown "
      "extent.");

  py::class_<Model, layers::Layer>(m, "Model", py::dynamic_attr(), R"doc(
A functional model (keras.Model(inputs, outputs)): the graph of layer calls between Input()s and
outputs. compile/fit/evaluate/predict/summary/save/get_weights/set_weights as in Keras; fit,
evaluate and predict take NumPy arrays (viewed in place) or Tensors and release the GIL.)doc")
      .def(py::init([](py::object inputs, py::object outputs, py::object name, bool trainable) {
             ModelOptions o{str_or_empty(name), trainable};
             return Model(one_or_many<KerasTensor>(inputs), one_or_many<KerasTensor>(outputs), o);
           }),
           py::arg("inputs"), py::arg("outputs"), py::arg("name") = py::none(),
           py::arg("trainable") = true)
      .def_property_readonly("inputs", &Model::inputs)
      .def_property_readonly("outputs", &Model::outputs)
      .def_property_readonly("input_names", &Model::input_names)
      .def_property_readonly("output_names", &Model::output_names)
      .def_property_readonly("layers",
                             [](const Model& model) {
                               py::list out;
                               for (const auto& l : model.layers()) out.append(wrap_layer(l));
                               return out;
                             })
      .def(
          "get_layer",
          [](const Model& model, py::object name, py::object index) {
            if (!name.is_none()) return wrap_layer(model.get_layer(name.cast<std::string>()));
            if (!index.is_none()) return wrap_layer(model.get_layer(index.cast<int>()));
            throw ValueError("get_layer needs a name or an index");
          },
          py::arg("name") = py::none(), py::arg("index") = py::none())
      .def("summary", &print_summary)
      .def(
          "compile",
          [](Model& model, py::object optimizer, py::object loss, py::object metrics,
             std::int64_t steps_per_execution) {
            CompileOptions o = compile_options(optimizer, loss, metrics);
            o.steps_per_execution = steps_per_execution;
            model.compile(std::move(o));
          },
          py::arg("optimizer") = "rmsprop", py::arg("loss") = py::none(),
          py::arg("metrics") = py::none(), py::arg("steps_per_execution") = 1,
          "optimizer: a name or an Optimizer (wrapped in a LossScaleOptimizer under "
          "mixed_float16); loss: a name or a Loss (default sparse_categorical_crossentropy); "
          "metrics: names or Metric objects; steps_per_execution: batches per execution of "
          "fit/evaluate/predict (callbacks see one batch event per execution; the training is "
          "the same).")
      .def("fit", &fit, py::arg("x") = py::none(), py::arg("y") = py::none(),
           py::arg("batch_size") = py::none(), py::arg("epochs") = 1, py::arg("verbose") = "auto",
           py::arg("callbacks") = py::none(), py::arg("validation_split") = 0.0,
           py::arg("validation_data") = py::none(), py::arg("shuffle") = true,
           py::arg("initial_epoch") = 0, py::arg("steps_per_epoch") = py::none(),
           py::arg("seed") = py::none(), py::arg("distribute") = py::none(),
           "Trains (keras.Model.fit); returns a History. The GIL is released while it runs; "
           "Ctrl-C stops it after the current step with KeyboardInterrupt.")
      .def("evaluate", &evaluate, py::arg("x") = py::none(), py::arg("y") = py::none(),
           py::arg("batch_size") = py::none(), py::arg("verbose") = "auto",
           py::arg("callbacks") = py::none(), py::arg("return_dict") = false,
           py::arg("distribute") = py::none(),
           "The loss then the metrics (a float when there is only the loss), or a dict.")
      .def("predict", &predict, py::arg("x"), py::arg("batch_size") = py::none(),
           py::arg("verbose") = 0, "The outputs for every row of x, as a NumPy array.")
      .def(
          "train_on_batch",
          [](Model& model, py::object x, py::object y) {
            Tensor tx = to_tensor(x), ty = to_tensor(y);
            Scores s;
            {
              py::gil_scoped_release release;
              s = model.train_on_batch(tx, ty);
            }
            return scores_to_python(s, false);
          },
          py::arg("x"), py::arg("y"))
      .def_property_readonly("optimizer",
                             [](const Model& model) -> py::object {
                               auto opt = model.optimizer();
                               if (!opt.defined()) return py::none();
                               if (auto lso = mixed_precision::as_loss_scale_optimizer(opt)) {
                                 return py::cast(*lso);
                               }
                               return py::cast(opt);
                             })
      .def_property("stop_training", &Model::stop_training, &Model::set_stop_training)
      .def(
          "save", [](const Model& model, const std::string& path) { model.save(path); },
          py::arg("filepath"), "Writes a directory: the architecture as JSON and the weights.")
      .def(
          "save_weights",
          [](const Model& model, const std::string& path) { model.save_weights(path); },
          py::arg("filepath"))
      .def(
          "load_weights",
          [](Model& model, const std::string& path, bool allow_nonfinite) {
            model.load_weights(path, LoadOptions{.allow_nonfinite = allow_nonfinite});
          },
          py::arg("filepath"), py::arg("allow_nonfinite") = false)
      .def("to_json", &Model::to_json);

  py::class_<Sequential, Model>(m, "Sequential", py::dynamic_attr(),
                                "A linear stack of layers (keras.Sequential).")
      .def(py::init([](py::object layers, py::object name, bool trainable) {
             SequentialOptions o{str_or_empty(name), trainable};
             if (layers.is_none()) return Sequential(o);
             return Sequential(layers.cast<std::vector<layers::Layer>>(), o);
           }),
           py::arg("layers") = py::none(), py::arg("name") = py::none(),
           py::arg("trainable") = true)
      .def("add", &Sequential::add, py::arg("layer"))
      .def("pop", &Sequential::pop);

  // For scripts/python-overhead.py: the same fit as Model.fit, called as a C++ program calls it
  // (no Python callbacks, no interrupt check, no History conversion), timed in C++ around fit.
  m.def(
      "_fit_as_cpp",
      [](Model& model, py::object x, py::object y, std::int64_t batch_size, int epochs,
         std::uint64_t seed) {
        Tensor tx = to_tensor(x), ty = to_tensor(y);
        py::gil_scoped_release release;
        const auto start = std::chrono::steady_clock::now();
        FitOptions o;
        o.batch_size = batch_size;
        o.epochs = epochs;
        o.verbose = Verbosity::silent;
        o.seed = seed;
        model.fit(tx, ty, std::move(o));
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      },
      py::arg("model"), py::arg("x"), py::arg("y"), py::arg("batch_size"), py::arg("epochs"),
      py::arg("seed"));

  m.def(
      "load_model",
      [](const std::string& path, bool allow_nonfinite) {
        return load_model(path, LoadOptions{.allow_nonfinite = allow_nonfinite});
      },
      py::arg("filepath"), py::arg("allow_nonfinite") = false,
      "A model saved with Model.save (a directory) or a training checkpoint.");
  m.def(
      "model_from_json", [](const std::string& json) { return model_from_json(json); },
      py::arg("json_string"));
}

}  // namespace mixprec::python
