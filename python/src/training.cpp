// mixprec.optimizers (with LossScaleOptimizer, also mixprec.mixed_precision.LossScaleOptimizer),
// mixprec.losses, mixprec.metrics and GradientTape, with Keras's spellings.
#include "bindings.h"

namespace mixprec::python {

namespace {

using mixed_precision::LossScaleOptimizer;
using mixed_precision::UnscaledGradients;
using optimizers::Optimizer;

// Layers called eagerly outside every `with GradientTape()` block record no autograd graph
// (TensorFlow records only under a tape): see tape_active() in bindings.h.
thread_local int active_tapes = 0;

optimizers::LearningRate to_learning_rate(py::handle obj) {
  if (py::isinstance<optimizers::schedules::ExponentialDecay>(obj)) {
    return obj.cast<optimizers::schedules::ExponentialDecay>();
  }
  if (py::isinstance<optimizers::schedules::CosineDecay>(obj)) {
    return obj.cast<optimizers::schedules::CosineDecay>();
  }
  if (PyCallable_Check(obj.ptr()) && !py::isinstance<py::float_>(obj) &&
      !py::isinstance<py::int_>(obj)) {
    // A Python schedule lr(step), called with the GIL taken (fit runs without it).
    auto fn = std::make_shared<py::object>(py::reinterpret_borrow<py::object>(obj));
    auto schedule = [fn](std::int64_t step) {
      py::gil_scoped_acquire gil;
      return (*fn)(step).cast<double>();
    };
    return optimizers::LearningRate(schedule);
  }
  return optimizers::LearningRate(obj.cast<double>());
}

// Keras's apply_gradients(grads_and_vars): an iterable of (gradient, variable) pairs (zip(...));
// a None gradient leaves its variable alone.
std::pair<std::vector<Tensor>, std::vector<Tensor>> unzip(py::handle grads_and_vars) {
  std::vector<Tensor> grads, vars;
  for (auto pair : py::iter(grads_and_vars)) {
    auto seq = py::reinterpret_borrow<py::sequence>(pair);
    if (seq.size() != 2) throw ValueError("apply_gradients expects (gradient, variable) pairs");
    grads.push_back(to_tensor_or_none(seq[0]));
    vars.push_back(seq[1].cast<Tensor>());
  }
  return {grads, vars};
}

// get_unscaled_gradients keeps the record of its check on the optimizer object; apply_gradients
// given the same gradients (through zip) reuses the verdict instead of checking them again.
constexpr const char* kLastUnscaled = "_last_unscaled_gradients";

void apply_loss_scaled(py::object self, py::handle grads_and_vars) {
  auto& opt = self.cast<LossScaleOptimizer&>();
  auto [grads, vars] = unzip(grads_and_vars);
  if (py::hasattr(self, kLastUnscaled)) {
    py::object last = self.attr(kLastUnscaled);
    py::delattr(self, kLastUnscaled);
    const auto& token = last.cast<const UnscaledGradients&>();
    bool same = token.size() == grads.size();
    for (std::size_t i = 0; same && i < grads.size(); ++i) {
      same = token[i].defined() == grads[i].defined() &&
             (!grads[i].defined() || token[i].same(grads[i]));
    }
    if (same) {
      py::gil_scoped_release release;
      opt.apply_gradients(token, vars);
      return;
    }
  }
  py::gil_scoped_release release;
  opt.optimizers::Optimizer::apply_gradients(grads, vars);
}

template <typename Options>
void clip_options(Options& o, std::optional<double> clipnorm, std::optional<double> clipvalue,
                  std::optional<double> global_clipnorm) {
  o.clipnorm = clipnorm;
  o.clipvalue = clipvalue;
  o.global_clipnorm = global_clipnorm;
}

#define MIXPREC_PY_CLIP_ARGS                                           \
  py::arg("clipnorm") = py::none(), py::arg("clipvalue") = py::none(), \
  py::arg("global_clipnorm") = py::none()

void bind_optimizers(py::module_& m) {
  using namespace optimizers;
  py::module_ sched = m.def_submodule("schedules", "Learning-rate schedules.");
  py::class_<schedules::ExponentialDecay>(sched, "ExponentialDecay")
      .def(py::init([](double initial_learning_rate, std::int64_t decay_steps, double decay_rate,
                       bool staircase) {
             return schedules::ExponentialDecay{initial_learning_rate, decay_steps, decay_rate,
                                                staircase};
           }),
           py::arg("initial_learning_rate"), py::arg("decay_steps"), py::arg("decay_rate"),
           py::arg("staircase") = false)
      .def("__call__", &schedules::ExponentialDecay::operator(), py::arg("step"));
  py::class_<schedules::CosineDecay>(sched, "CosineDecay")
      .def(py::init([](double initial_learning_rate, std::int64_t decay_steps, double alpha,
                       std::optional<double> warmup_target, std::int64_t warmup_steps) {
             return schedules::CosineDecay{initial_learning_rate, decay_steps, alpha, warmup_target,
                                           warmup_steps};
           }),
           py::arg("initial_learning_rate"), py::arg("decay_steps"), py::arg("alpha") = 0.0,
           py::arg("warmup_target") = py::none(), py::arg("warmup_steps") = 0)
      .def("__call__", &schedules::CosineDecay::operator(), py::arg("step"));

  py::class_<Optimizer>(m, "Optimizer", py::dynamic_attr(),
                        "Base of the optimizers: a handle; copies share the state.")
      .def_property_readonly("name", &Optimizer::name)
      .def_property_readonly("iterations", &Optimizer::iterations)
      .def_property("learning_rate", &Optimizer::learning_rate,
                    [](Optimizer& o, py::object lr) { o.set_learning_rate(to_learning_rate(lr)); })
      .def(
          "apply_gradients",
          [](Optimizer& o, py::object grads_and_vars) {
            auto [grads, vars] = unzip(grads_and_vars);
            py::gil_scoped_release release;
            o.apply_gradients(grads, vars);
          },
          py::arg("grads_and_vars"),
          "One update from an iterable of (gradient, variable) pairs, e.g. zip(grads, vars).")
      .def("build", &Optimizer::build, py::arg("var_list"))
      .def("__repr__", [](const Optimizer& o) { return "<Optimizer " + o.name() + ">"; });

  py::class_<SGD, Optimizer>(m, "SGD", py::dynamic_attr())
      .def(py::init([](py::object learning_rate, double momentum, bool nesterov,
                       std::optional<double> clipnorm, std::optional<double> clipvalue,
                       std::optional<double> global_clipnorm) {
             SGDOptions o;
             o.learning_rate = to_learning_rate(learning_rate);
             o.momentum = momentum;
             o.nesterov = nesterov;
             clip_options(o, clipnorm, clipvalue, global_clipnorm);
             return SGD(o);
           }),
           py::arg("learning_rate") = 0.01, py::arg("momentum") = 0.0, py::arg("nesterov") = false,
           MIXPREC_PY_CLIP_ARGS);
  py::class_<RMSprop, Optimizer>(m, "RMSprop", py::dynamic_attr())
      .def(py::init([](py::object learning_rate, double rho, double momentum, double epsilon,
                       bool centered, std::optional<double> clipnorm,
                       std::optional<double> clipvalue, std::optional<double> global_clipnorm) {
             RMSpropOptions o;
             o.learning_rate = to_learning_rate(learning_rate);
             o.rho = rho;
             o.momentum = momentum;
             o.epsilon = epsilon;
             o.centered = centered;
             clip_options(o, clipnorm, clipvalue, global_clipnorm);
             return RMSprop(o);
           }),
           py::arg("learning_rate") = 0.001, py::arg("rho") = 0.9, py::arg("momentum") = 0.0,
           py::arg("epsilon") = 1e-7, py::arg("centered") = false, MIXPREC_PY_CLIP_ARGS);
  py::class_<Adam, Optimizer>(m, "Adam", py::dynamic_attr())
      .def(py::init([](py::object learning_rate, double beta_1, double beta_2, double epsilon,
                       std::optional<double> clipnorm, std::optional<double> clipvalue,
                       std::optional<double> global_clipnorm) {
             AdamOptions o;
             o.learning_rate = to_learning_rate(learning_rate);
             o.beta_1 = beta_1;
             o.beta_2 = beta_2;
             o.epsilon = epsilon;
             clip_options(o, clipnorm, clipvalue, global_clipnorm);
             return Adam(o);
           }),
           py::arg("learning_rate") = 0.001, py::arg("beta_1") = 0.9, py::arg("beta_2") = 0.999,
           py::arg("epsilon") = 1e-7, MIXPREC_PY_CLIP_ARGS);
  py::class_<AdamW, Optimizer>(m, "AdamW", py::dynamic_attr())
      .def(py::init([](py::object learning_rate, double weight_decay, double beta_1, double beta_2,
                       double epsilon, std::optional<double> clipnorm,
                       std::optional<double> clipvalue, std::optional<double> global_clipnorm,
                       std::vector<std::string> exclude_from_weight_decay) {
             AdamWOptions o;
             o.learning_rate = to_learning_rate(learning_rate);
             o.weight_decay = weight_decay;
             o.beta_1 = beta_1;
             o.beta_2 = beta_2;
             o.epsilon = epsilon;
             clip_options(o, clipnorm, clipvalue, global_clipnorm);
             o.exclude_from_weight_decay = std::move(exclude_from_weight_decay);
             return AdamW(o);
           }),
           py::arg("learning_rate") = 0.001, py::arg("weight_decay") = 0.004,
           py::arg("beta_1") = 0.9, py::arg("beta_2") = 0.999, py::arg("epsilon") = 1e-7,
           MIXPREC_PY_CLIP_ARGS, py::arg("exclude_from_weight_decay") = std::vector<std::string>{});
  m.def("get", &optimizers::get, py::arg("identifier"));

  py::class_<UnscaledGradients>(m, "_UnscaledGradients");
  py::class_<LossScaleOptimizer, Optimizer>(m, "LossScaleOptimizer", py::dynamic_attr(), R"doc(
Dynamic loss scaling around an optimizer (keras.mixed_precision.LossScaleOptimizer).

LossScaleOptimizer(inner_optimizer, dynamic=True, initial_scale=None, dynamic_growth_steps=None);
the TF 2.1 spelling loss_scale='dynamic' or a number (a fixed scale) is accepted too.
get_scaled_loss(loss) multiplies by the scale, get_unscaled_gradients(grads) divides and checks
for Inf/NaN in one pass, apply_gradients(zip(grads, vars)) skips the step when they overflowed and
adjusts the scale. loss_scale is the current scale.)doc")
      .def(py::init([](Optimizer inner, bool dynamic, std::optional<double> initial_scale,
                       std::optional<std::int64_t> dynamic_growth_steps, py::object loss_scale) {
             mixed_precision::LossScaleOptions o;
             o.dynamic = dynamic;
             o.initial_scale = initial_scale;
             o.dynamic_growth_steps = dynamic_growth_steps;
             if (!loss_scale.is_none()) {
               if (py::isinstance<py::str>(loss_scale)) {
                 if (loss_scale.cast<std::string>() != "dynamic") {
                   throw ValueError("loss_scale must be 'dynamic' or a number, got '" +
                                    loss_scale.cast<std::string>() + "'");
                 }
               } else {
                 o.dynamic = false;
                 o.initial_scale = loss_scale.cast<double>();
               }
             }
             return LossScaleOptimizer(std::move(inner), o);
           }),
           py::arg("inner_optimizer"), py::arg("dynamic") = true,
           py::arg("initial_scale") = py::none(), py::arg("dynamic_growth_steps") = py::none(),
           py::arg("loss_scale") = py::none())
      .def(
          "get_scaled_loss",
          [](const LossScaleOptimizer& o, py::object loss) {
            return o.get_scaled_loss(to_tensor(loss));
          },
          py::arg("loss"))
      .def(
          "get_unscaled_gradients",
          [](py::object self, py::sequence grads) {
            const auto& o = self.cast<const LossScaleOptimizer&>();
            std::vector<Tensor> ts;
            for (auto g : grads) ts.push_back(to_tensor_or_none(g));
            std::optional<UnscaledGradients> out;
            {
              py::gil_scoped_release release;
              out.emplace(o.get_unscaled_gradients(ts));
            }
            py::list result;
            for (const auto& g : *out) {
              result.append(g.defined() ? py::cast(g) : py::object(py::none()));
            }
            py::setattr(self, kLastUnscaled, py::cast(*out));
            return result;
          },
          py::arg("grads"))
      .def("apply_gradients", &apply_loss_scaled, py::arg("grads_and_vars"))
      .def_property_readonly("loss_scale", &LossScaleOptimizer::loss_scale)
      .def_property_readonly("dynamic", &LossScaleOptimizer::dynamic)
      .def_property_readonly("dynamic_growth_steps", &LossScaleOptimizer::dynamic_growth_steps)
      .def_property_readonly("dynamic_counter", &LossScaleOptimizer::dynamic_counter)
      .def_property_readonly("skipped_steps", &LossScaleOptimizer::skipped_steps)
      .def_property_readonly("inner_optimizer", &LossScaleOptimizer::inner_optimizer);
}

void bind_losses(py::module_& m) {
  using namespace losses;
  py::class_<Loss>(m, "Loss", "A loss: loss(y_true, y_pred) is the float32 mean over samples.")
      .def(
          "__call__",
          [](const Loss& l, py::object y_true, py::object y_pred) {
            Tensor t = to_tensor(y_true), p = to_tensor(y_pred);
            return l(t, p);
          },
          py::arg("y_true"), py::arg("y_pred"))
      .def_property_readonly("name", &Loss::name);
  py::class_<SparseCategoricalCrossentropy, Loss>(m, "SparseCategoricalCrossentropy")
      .def(py::init([](bool from_logits, std::optional<std::int64_t> ignore_class) {
             return SparseCategoricalCrossentropy(
                 {.from_logits = from_logits, .ignore_class = ignore_class});
           }),
           py::arg("from_logits") = false, py::arg("ignore_class") = py::none());
  py::class_<CategoricalCrossentropy, Loss>(m, "CategoricalCrossentropy")
      .def(py::init([](bool from_logits) {
             return CategoricalCrossentropy({.from_logits = from_logits});
           }),
           py::arg("from_logits") = false);
  py::class_<BinaryCrossentropy, Loss>(m, "BinaryCrossentropy")
      .def(py::init(
               [](bool from_logits) { return BinaryCrossentropy({.from_logits = from_logits}); }),
           py::arg("from_logits") = false);
  py::class_<MeanSquaredError, Loss>(m, "MeanSquaredError").def(py::init<>());
  m.def("get", &losses::get, py::arg("identifier"));
}

void bind_metrics(py::module_& m) {
  using namespace metrics;
  auto update = [](Metric& metric, py::object a, py::object b) {
    if (b.is_none()) {
      if (py::isinstance<py::float_>(a) || py::isinstance<py::int_>(a)) {
        metric.update_state(a.cast<double>());
      } else {
        metric.update_state(to_tensor(a));
      }
    } else {
      metric.update_state(to_tensor(a), to_tensor(b));
    }
  };
  py::class_<Metric>(m, "Metric", R"doc(
A streaming metric: update_state(y_true, y_pred) (or update_state(values) for Mean), result(),
reset_state(). Calling it updates and returns the result, as in Keras.)doc")
      .def("update_state", update, py::arg("y_true"), py::arg("y_pred") = py::none())
      .def(
          "__call__",
          [update](Metric& metric, py::object a, py::object b) {
            update(metric, a, b);
            return metric.result();
          },
          py::arg("y_true"), py::arg("y_pred") = py::none())
      .def("result", &Metric::result)
      .def("reset_state", &Metric::reset_state)
      .def_property_readonly("name", &Metric::name);
  auto named = [](py::object name) { return MetricOptions{.name = str_or_empty(name)}; };
  py::class_<Accuracy, Metric>(m, "Accuracy")
      .def(py::init([named](py::object name) { return Accuracy(named(name)); }),
           py::arg("name") = py::none());
  py::class_<SparseCategoricalAccuracy, Metric>(m, "SparseCategoricalAccuracy")
      .def(py::init([named](py::object name) { return SparseCategoricalAccuracy(named(name)); }),
           py::arg("name") = py::none());
  py::class_<CategoricalAccuracy, Metric>(m, "CategoricalAccuracy")
      .def(py::init([named](py::object name) { return CategoricalAccuracy(named(name)); }),
           py::arg("name") = py::none());
  py::class_<BinaryAccuracy, Metric>(m, "BinaryAccuracy")
      .def(py::init([](py::object name, double threshold) {
             return BinaryAccuracy({.name = str_or_empty(name), .threshold = threshold});
           }),
           py::arg("name") = py::none(), py::arg("threshold") = 0.5);
  py::class_<Mean, Metric>(m, "Mean").def(
      py::init([named](py::object name) { return Mean(named(name)); }),
      py::arg("name") = py::none());
  m.def(
      "get", [](const std::string& name) { return metrics::get(name); }, py::arg("identifier"));
}

// GradientTape: a context manager (`with mp.GradientTape() as tape:`); gradients are computed by
// tape.gradient(target, sources) after the block, with the GIL released.
struct PyGradientTape {
  explicit PyGradientTape(bool persistent) : tape(GradientTape::Options{persistent}) {}
  GradientTape tape;
  bool entered = false;
};

}  // namespace

bool tape_active() { return active_tapes > 0; }

void bind_training(py::module_& m) {
  py::module_ optimizers = m.def_submodule("optimizers", "Optimizers.");
  bind_optimizers(optimizers);
  py::module_ losses = m.def_submodule("losses", "Losses, computed in float32.");
  bind_losses(losses);
  py::module_ metrics = m.def_submodule("metrics", "Metrics.");
  bind_metrics(metrics);

  py::class_<PyGradientTape>(m, "GradientTape", R"doc(
Records the operations of a training step for tape.gradient (tf.GradientTape):

    with mp.GradientTape() as tape:
        loss = loss_object(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)

Layers and models called outside every `with GradientTape()` block record nothing (as in
TensorFlow). persistent=True allows several gradient() calls.)doc")
      .def(py::init<bool>(), py::arg("persistent") = false)
      .def(
          "__enter__",
          [](PyGradientTape& t) -> PyGradientTape& {
            if (!t.entered) ++active_tapes;
            t.entered = true;
            return t;
          },
          py::return_value_policy::reference)
      .def("__exit__",
           [](PyGradientTape& t, py::args) {
             if (t.entered) --active_tapes;
             t.entered = false;
             return false;
           })
      .def(
          "watch", [](PyGradientTape& t, Tensor& x) { t.tape.watch(x); }, py::arg("tensor"))
      .def(
          "gradient",
          [](PyGradientTape& t, py::object target, py::object sources) -> py::object {
            Tensor y = to_tensor(target);
            if (py::isinstance<Tensor>(sources)) {
              Tensor x = sources.cast<Tensor>(), g;
              {
                py::gil_scoped_release release;
                g = t.tape.gradient(y, x);
              }
              return g.defined() ? py::cast(g) : py::object(py::none());
            }
            std::vector<Tensor> xs;
            for (auto s : py::iter(sources)) xs.push_back(s.cast<Tensor>());
            std::vector<Tensor> gs;
            {
              py::gil_scoped_release release;
              gs = t.tape.gradient(y, xs);
            }
            py::list out;
            for (const auto& g : gs) out.append(g.defined() ? py::cast(g) : py::object(py::none()));
            return out;
          },
          py::arg("target"), py::arg("sources"));
}

}  // namespace mixprec::python
