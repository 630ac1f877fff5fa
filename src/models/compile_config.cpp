// The compile settings as JSON (include/mixprec/models/model_config.h): compile_config_to_json and
// compile_options_from_json. The optimizer is described by the options its public class was
// constructed with (kept in OptimizerImpl::options) with the learning rate as it is now (a
// ReduceLROnPlateau may have lowered it); the loss and metrics as compile() was given them (names
// stay names), built-in objects by their get_config().
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <variant>

#include "io/json_limits.h"
#include "metrics/metric_config.h"
#include "mixprec/error.h"
#include "mixprec/mixed_precision/loss_scale_optimizer.h"
#include "mixprec/models/model_config.h"
#include "mixprec/optimizers.h"
#include "models/config_reader.h"
#include "models/training_state.h"
#include "optimizers/optimizer_impl.h"

namespace mixprec {

namespace {

using models::config::fail;
using models::config::Object;
using models::config::quote;
using models::config::Upper;
using nlohmann::json;

constexpr std::size_t kMaxCompileConfigBytes = 1u << 20;
// A LossScaleOptimizer around an optimizer with a schedule is about 8 levels deep.
constexpr std::size_t kMaxCompileConfigDepth = 32;
constexpr std::size_t kMaxMetrics = 64;
// steps_per_execution in a saved compile config: any count a training could use.
constexpr std::int64_t kMaxStepsPerExecution = std::int64_t{1} << 40;
constexpr std::size_t kMaxExcludedNames = 256;
constexpr double kBig = 1e30;

// ---- writing ----

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json schedule_config(const optimizers::LearningRate::Config& c) {
  using namespace optimizers::schedules;
  if (const auto* s = std::get_if<ConstantSchedule>(&c)) {
    return {{"class_name", "ConstantSchedule"}, {"config", {{"learning_rate", s->learning_rate}}}};
  }
  if (const auto* s = std::get_if<ExponentialDecay>(&c)) {
    return {{"class_name", "ExponentialDecay"},
            {"config",
             {{"initial_learning_rate", s->initial_learning_rate},
              {"decay_steps", s->decay_steps},
              {"decay_rate", s->decay_rate},
              {"staircase", s->staircase}}}};
  }
  const auto& s = std::get<CosineDecay>(c);
  return {{"class_name", "CosineDecay"},
          {"config",
           {{"initial_learning_rate", s.initial_learning_rate},
            {"decay_steps", s.decay_steps},
            {"alpha", s.alpha},
            {"warmup_target", optional_number(s.warmup_target)},
            {"warmup_steps", s.warmup_steps}}}};
}

// The learning rate the optimizer uses now: its constant value, or the built-in schedule it was
// constructed with.
json learning_rate_config(const optimizers::Optimizer& opt,
                          const optimizers::LearningRate& constructed) {
  if (!opt.learning_rate_is_schedule()) return opt.learning_rate();
  const auto& c = constructed.get_config();
  if (std::holds_alternative<std::monostate>(c) || std::holds_alternative<double>(c)) {
    throw ValueError("optimizer '" + opt.name() +
                     "': its learning-rate schedule is a custom function, which a config cannot "
                     "describe");
  }
  return schedule_config(c);
}

template <typename Options>
json clip_config(json config, const Options& o) {
  config["clipnorm"] = optional_number(o.clipnorm);
  config["clipvalue"] = optional_number(o.clipvalue);
  config["global_clipnorm"] = optional_number(o.global_clipnorm);
  return config;
}

json optimizer_config(const optimizers::Optimizer& opt) {
  const std::any& options = opt.impl()->options;
  if (const auto* o = std::any_cast<mixed_precision::LossScaleOptions>(&options)) {
    const auto lso = mixed_precision::as_loss_scale_optimizer(opt);
    json c = json::object();
    c["inner_optimizer"] = optimizer_config(lso->inner_optimizer());
    c["dynamic"] = o->dynamic;
    c["initial_scale"] = optional_number(o->initial_scale);
    c["dynamic_growth_steps"] =
        o->dynamic_growth_steps ? json(*o->dynamic_growth_steps) : json(nullptr);
    return {{"class_name", "LossScaleOptimizer"}, {"config", c}};
  }
  if (const auto* o = std::any_cast<optimizers::SGDOptions>(&options)) {
    json c = {{"learning_rate", learning_rate_config(opt, o->learning_rate)},
              {"momentum", o->momentum},
              {"nesterov", o->nesterov}};
    return {{"class_name", "SGD"}, {"config", clip_config(c, *o)}};
  }
  if (const auto* o = std::any_cast<optimizers::AdamOptions>(&options)) {
    json c = {{"learning_rate", learning_rate_config(opt, o->learning_rate)},
              {"beta_1", o->beta_1},
              {"beta_2", o->beta_2},
              {"epsilon", o->epsilon}};
    return {{"class_name", "Adam"}, {"config", clip_config(c, *o)}};
  }
  if (const auto* o = std::any_cast<optimizers::AdamWOptions>(&options)) {
    json c = {{"learning_rate", learning_rate_config(opt, o->learning_rate)},
              {"weight_decay", o->weight_decay},
              {"beta_1", o->beta_1},
              {"beta_2", o->beta_2},
              {"epsilon", o->epsilon}};
    // The var_names of exclude_from_weight_decay (the options' and later calls'); a var_list of
    // tensors cannot be described.
    c["exclude_from_weight_decay"] = opt.impl()->weight_decay_excluded_names();
    return {{"class_name", "AdamW"}, {"config", clip_config(c, *o)}};
  }
  if (const auto* o = std::any_cast<optimizers::RMSpropOptions>(&options)) {
    json c = {{"learning_rate", learning_rate_config(opt, o->learning_rate)},
              {"rho", o->rho},
              {"momentum", o->momentum},
              {"epsilon", o->epsilon},
              {"centered", o->centered}};
    return {{"class_name", "RMSprop"}, {"config", clip_config(c, *o)}};
  }
  throw ValueError("optimizer '" + opt.name() +
                   "' is not one of SGD, Adam, AdamW, RMSprop or LossScaleOptimizer, so a config "
                   "cannot describe it");
}

json loss_config(const std::variant<std::string, losses::Loss>& loss) {
  if (const auto* name = std::get_if<std::string>(&loss)) return *name;
  const auto& c = std::get<losses::Loss>(loss).get_config();
  if (!c) {
    throw ValueError("the loss '" + std::get<losses::Loss>(loss).name() +
                     "' is a custom function, which a config cannot describe");
  }
  json config = json::object();
  if (c->class_name != "MeanSquaredError") config["from_logits"] = c->from_logits;
  // Keras 3 writes "ignore_class": null when unset; older configs of this library lack the key.
  if (c->class_name == "SparseCategoricalCrossentropy") {
    config["ignore_class"] = c->ignore_class ? json(*c->ignore_class) : json(nullptr);
  }
  return {{"class_name", c->class_name}, {"config", config}};
}

json metric_config(const std::variant<std::string, metrics::Metric>& metric) {
  if (const auto* name = std::get_if<std::string>(&metric)) return *name;
  const metrics::Metric& m = std::get<metrics::Metric>(metric);
  const auto& c = m.get_config();
  if (!c) {
    throw ValueError("the metric '" + m.name() +
                     "' is a custom metric, which a config cannot describe");
  }
  json config = {{"name", c->name}};
  if (c->class_name == "BinaryAccuracy") config["threshold"] = c->threshold;
  return {{"class_name", c->class_name}, {"config", config}};
}

// ---- reading ----

optimizers::LearningRate read_learning_rate(Object& c) {
  const json& v = c.get("learning_rate");
  if (v.is_number()) return c.number("learning_rate", 0, kBig, Upper::inclusive, "a number >= 0");
  if (!v.is_object())
    c.bad("learning_rate", "a number or a schedule {\"class_name\", \"config\"}", v);
  Object s(v, c.where() + ": \"learning_rate\"");
  const std::string cls = s.string("class_name", 64);
  Object p(s.get("config"), s.where() + ".config");
  s.finish();
  using namespace optimizers::schedules;
  if (cls == "ConstantSchedule") {
    ConstantSchedule sc{p.number("learning_rate", 0, kBig, Upper::inclusive, "a number >= 0")};
    p.finish();
    return sc;
  }
  if (cls == "ExponentialDecay") {
    ExponentialDecay sc;
    sc.initial_learning_rate =
        p.number("initial_learning_rate", 0, kBig, Upper::inclusive, "a number >= 0");
    sc.decay_steps = p.integer("decay_steps", 1, std::int64_t{1} << 62, "a positive integer");
    sc.decay_rate = p.number("decay_rate", 0, kBig, Upper::inclusive, "a number >= 0");
    sc.staircase = p.boolean("staircase");
    p.finish();
    return sc;
  }
  if (cls == "CosineDecay") {
    CosineDecay sc;
    sc.initial_learning_rate =
        p.number("initial_learning_rate", 0, kBig, Upper::inclusive, "a number >= 0");
    sc.decay_steps = p.integer("decay_steps", 1, std::int64_t{1} << 62, "a positive integer");
    sc.alpha = p.number("alpha", 0, 1, Upper::inclusive, "a number in [0, 1]");
    // Configs written before the warm-up existed have neither key.
    if (p.has("warmup_target")) {
      sc.warmup_target = p.optional_number("warmup_target", 0, kBig, "null or a number >= 0");
    }
    if (p.has("warmup_steps")) {
      sc.warmup_steps = p.integer("warmup_steps", 0, std::int64_t{1} << 62, "an integer >= 0");
    }
    p.finish();
    return sc;
  }
  s.bad("class_name", "ConstantSchedule, ExponentialDecay or CosineDecay", json(cls));
}

template <typename Options>
void read_clip(Object& c, Options& o) {
  o.clipnorm = c.optional_number("clipnorm", 0, kBig, "null or a number >= 0");
  o.clipvalue = c.optional_number("clipvalue", 0, kBig, "null or a number >= 0");
  o.global_clipnorm = c.optional_number("global_clipnorm", 0, kBig, "null or a number >= 0");
}

optimizers::Optimizer read_optimizer(const json& v, const std::string& where, bool inner) {
  Object o(v, where);
  const std::string cls = o.string("class_name", 64);
  Object c(o.get("config"), where + ".config");
  o.finish();
  if (cls == "LossScaleOptimizer" && !inner) {
    optimizers::Optimizer inner_opt =
        read_optimizer(c.get("inner_optimizer"), c.where() + ".inner_optimizer", true);
    mixed_precision::LossScaleOptions lo;
    lo.dynamic = c.boolean("dynamic");
    lo.initial_scale = c.optional_number("initial_scale", 1, 1e38, "null or a number >= 1");
    const json& g = c.get("dynamic_growth_steps");
    if (!g.is_null()) {
      lo.dynamic_growth_steps =
          c.integer("dynamic_growth_steps", 1, std::int64_t{1} << 40, "null or a positive integer");
    }
    c.finish();
    return mixed_precision::LossScaleOptimizer(inner_opt, lo);
  }
  if (cls == "SGD") {
    optimizers::SGDOptions s;
    s.learning_rate = read_learning_rate(c);
    s.momentum = c.number("momentum", 0, 1, Upper::inclusive, "a number in [0, 1]");
    s.nesterov = c.boolean("nesterov");
    read_clip(c, s);
    c.finish();
    return optimizers::SGD(s);
  }
  if (cls == "Adam" || cls == "AdamW") {
    const auto read_common = [&](auto& a) {
      a.learning_rate = read_learning_rate(c);
      a.beta_1 = c.number("beta_1", 0, 1, Upper::exclusive, "a number in [0, 1)");
      a.beta_2 = c.number("beta_2", 0, 1, Upper::exclusive, "a number in [0, 1)");
      a.epsilon = c.number("epsilon", 0, 1, Upper::inclusive, "a number in [0, 1]");
      read_clip(c, a);
    };
    if (cls == "Adam") {
      optimizers::AdamOptions a;
      read_common(a);
      c.finish();
      return optimizers::Adam(a);
    }
    optimizers::AdamWOptions a;
    read_common(a);
    a.weight_decay = c.number("weight_decay", 0, kBig, Upper::inclusive, "a number >= 0");
    if (c.has("exclude_from_weight_decay")) {  // absent from configs written before it existed
      const json& names = c.array("exclude_from_weight_decay", kMaxExcludedNames);
      for (std::size_t i = 0; i < names.size(); ++i) {
        if (!names[i].is_string() || names[i].get_ref<const std::string&>().empty() ||
            names[i].get_ref<const std::string&>().size() > 256) {
          fail(c.where() + ": \"exclude_from_weight_decay\"[" + std::to_string(i) + "]",
               "must be a non-empty variable name part (a string), got " +
                   models::config::show(names[i]));
        }
        a.exclude_from_weight_decay.push_back(names[i].get<std::string>());
      }
    }
    c.finish();
    return optimizers::AdamW(a);
  }
  if (cls == "RMSprop") {
    optimizers::RMSpropOptions r;
    r.learning_rate = read_learning_rate(c);
    r.rho = c.number("rho", 0, 1, Upper::exclusive, "a number in [0, 1)");
    r.momentum = c.number("momentum", 0, 1, Upper::exclusive, "a number in [0, 1)");
    r.epsilon = c.number("epsilon", 0, 1, Upper::inclusive, "a number in [0, 1]");
    r.centered = c.boolean("centered");
    read_clip(c, r);
    c.finish();
    return optimizers::RMSprop(r);
  }
  o.bad("class_name",
        inner ? "SGD, Adam, AdamW or RMSprop" : "SGD, Adam, AdamW, RMSprop or LossScaleOptimizer",
        json(cls));
}

std::variant<std::string, losses::Loss> read_loss(Object& top) {
  const json& v = top.get("loss");
  if (v.is_string()) {
    const std::string name = top.string("loss", 64);
    try {
      (void)losses::get(name);
    } catch (const ValueError&) {
      top.bad("loss", "a loss name (sparse_categorical_crossentropy, ...)", v);
    }
    return name;
  }
  if (!v.is_object()) top.bad("loss", "a loss name or {\"class_name\", \"config\"}", v);
  Object l(v, top.where() + ": \"loss\"");
  const std::string cls = l.string("class_name", 64);
  Object c(l.get("config"), l.where() + ".config");
  l.finish();
  if (cls == "MeanSquaredError") {
    c.finish();
    return losses::MeanSquaredError();
  }
  if (cls == "SparseCategoricalCrossentropy" || cls == "CategoricalCrossentropy" ||
      cls == "BinaryCrossentropy") {
    const bool from_logits = c.boolean("from_logits");
    std::optional<std::int64_t> ignore_class;
    if (cls == "SparseCategoricalCrossentropy" && c.has("ignore_class") &&
        !c.get("ignore_class").is_null()) {
      ignore_class = c.integer("ignore_class", std::numeric_limits<std::int64_t>::min() + 1,
                               std::numeric_limits<std::int64_t>::max(), "null or an integer");
    }
    c.finish();
    if (cls == "SparseCategoricalCrossentropy") {
      return losses::SparseCategoricalCrossentropy(
          {.from_logits = from_logits, .ignore_class = ignore_class});
    }
    if (cls == "CategoricalCrossentropy") {
      return losses::CategoricalCrossentropy({.from_logits = from_logits});
    }
    return losses::BinaryCrossentropy({.from_logits = from_logits});
  }
  l.bad("class_name",
        "SparseCategoricalCrossentropy, CategoricalCrossentropy, BinaryCrossentropy or "
        "MeanSquaredError",
        json(cls));
}

std::variant<std::string, metrics::Metric> read_metric(const json& v, const std::string& where,
                                                       const std::string& loss_name) {
  if (v.is_string()) {
    const auto& name = v.get_ref<const std::string&>();
    try {
      if (name.size() > 64) throw ValueError("");
      (void)metrics::get(name, loss_name);
    } catch (const ValueError&) {
      fail(where, "must be a metric name (\"accuracy\", ...), got " + models::config::show(v));
    }
    return name;
  }
  Object m(v, where);
  const std::string cls = m.string("class_name", 64);
  Object c(m.get("config"), where + ".config");
  m.finish();
  metrics::Metric::Config config{.class_name = cls, .name = c.string("name", 64)};
  if (cls == "BinaryAccuracy") {
    config.threshold = c.number("threshold", 0, 1, Upper::inclusive, "a number in [0, 1]");
  }
  c.finish();
  if (std::optional<metrics::Metric> metric = metrics::from_config(config)) return *metric;
  m.bad("class_name",
        "Accuracy, SparseCategoricalAccuracy, CategoricalAccuracy, BinaryAccuracy or Mean",
        json(cls));
}

}  // namespace

std::string compile_config_to_json(const Model& model) {
  const auto& state = model.model_impl().training;
  if (!state) {
    throw ValueError("model '" + model.name() +
                     "' is not compiled, so it has no compile settings to describe");
  }
  json c = json::object();
  c["optimizer"] = optimizer_config(state->optimizer);
  c["loss"] = loss_config(state->options.loss);
  json metrics = json::array();
  for (const auto& m : state->options.metrics) metrics.push_back(metric_config(m));
  c["metrics"] = std::move(metrics);
  c["steps_per_execution"] = state->options.steps_per_execution;
  return c.dump();
}

CompileOptions compile_options_from_json(const std::string& text) {
  if (text.size() > kMaxCompileConfigBytes) {
    fail("compile config", "it is " + std::to_string(text.size()) + " bytes, more than the " +
                               std::to_string(kMaxCompileConfigBytes) + " allowed");
  }
  // Before parsing: a compile config is 4 levels deep, and an error message shows (dumps) values.
  if (const std::string deep = io::json_depth_problem(text, kMaxCompileConfigDepth);
      !deep.empty()) {
    fail("compile config", "it " + deep);
  }
  const json config = json::parse(text, nullptr, false);
  if (config.is_discarded()) fail("compile config", "not valid JSON");
  Object top(config, "compile config");
  CompileOptions options;
  try {
    options.optimizer =
        read_optimizer(top.get("optimizer"), "compile config: \"optimizer\"", false);
    options.loss = read_loss(top);
    const std::string loss_name = std::holds_alternative<std::string>(options.loss)
                                      ? std::get<std::string>(options.loss)
                                      : std::get<losses::Loss>(options.loss).name();
    const json& metrics = top.array("metrics", kMaxMetrics);
    for (std::size_t i = 0; i < metrics.size(); ++i) {
      options.metrics.push_back(read_metric(
          metrics[i], "compile config: \"metrics\"[" + std::to_string(i) + "]", loss_name));
    }
    // Absent from the settings of models saved before it existed: 1.
    if (top.has("steps_per_execution")) {
      options.steps_per_execution = top.integer("steps_per_execution", 1, kMaxStepsPerExecution,
                                                "a number of batches per execution");
    }
    top.finish();
  } catch (const ValueError&) {
    throw;
  } catch (const Error& e) {
    fail("compile config", e.what());
  }
  return options;
}

}  // namespace mixprec
