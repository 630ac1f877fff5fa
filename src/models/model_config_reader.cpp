// The reading half of the model config (include/mixprec/models/model_config.h): model_from_json.
//
// Two passes over the same code. The check pass validates every key of every layer, constructs
// the layers (cheap: no variable exists before a layer is built), orders the graph (Kahn's
// algorithm: a reference to a missing node or a cycle leaves nodes unscheduled) and propagates
// the shapes with each layer's own validate()/compute_output_shape(), counting the parameters the
// build would allocate, without building anything. Only when the whole config passed, and the
// layer and parameter counts are within the limits, does the build pass construct the model.
// Each layer's own options are read by layer_config_reader.cpp; this file reads the graph.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "io/json_limits.h"
#include "mixprec/activations.h"
#include "mixprec/error.h"
#include "mixprec/layers/layers.h"
#include "mixprec/models/model_config.h"
#include "mixprec/models/sequential.h"
#include "models/config_reader.h"
#include "models/layer_config_reader.h"

namespace mixprec {

namespace {

using models::config::fail;
using models::config::kMaxNameLength;
using models::config::kMaxRank;
using models::config::make_layer;
using models::config::Object;
using models::config::quote;
using models::config::read_name;
using models::config::show;
using models::config::Upper;
using nlohmann::json;

constexpr std::size_t kMaxCallInputs = 1024;
constexpr std::size_t kMaxCallsPerLayer = 4096;
// Elements of one sample of any layer output: a check against configs whose shapes would
// overflow (a Flatten of huge extents) long before a variable could be sized from them.
constexpr double kMaxSampleElements = 1ull << 40;

enum class Pass { check, build };

struct Budget {
  const ModelConfigLimits& limits;
  std::int64_t layers = 0;
  double params = 0;  // double: exact far beyond any limit, and products cannot overflow
};

struct Context {
  Budget& budget;
  Pass pass;
  int depth;
};

// "layers[3] (dense_2)" inside "layers[5] (block)/" for nested models.
std::string entry_where(const std::string& prefix, std::size_t i) {
  return prefix + "layers[" + std::to_string(i) + "]";
}

// The variables' elements a layer allocates when built on `shapes` (the check pass's count; it
// must agree with each layer's build()).
double layer_params(const layers::Layer& l, const std::vector<PartialShape>& shapes) {
  const std::string& cls = l.class_name();
  const double in =
      shapes.empty() || shapes[0].empty() ? 0.0 : std::max<double>(0, shapes[0].back());
  if (cls == "Dense") {
    const layers::Dense d(l);
    const double units = static_cast<double>(d.units());
    return in * units + (d.use_bias() ? units : 0);
  }
  if (cls == "Conv2D") {
    const layers::Conv2D c(l);
    const double f = static_cast<double>(c.filters());
    const double k = double(c.kernel_size().height) * c.kernel_size().width;
    return k * std::floor(in / c.groups()) * f + (c.use_bias() ? f : 0);
  }
  if (cls == "DepthwiseConv2D") {
    const layers::DepthwiseConv2D c(l);
    const double out = in * c.depth_multiplier();
    const double k = double(c.kernel_size().height) * c.kernel_size().width;
    return k * out + (c.use_bias() ? out : 0);
  }
  if (cls == "BatchNormalization") {
    const layers::BatchNormalization b(l);
    return in * (2 + (b.center() ? 1 : 0) + (b.scale() ? 1 : 0));
  }
  return 0;
}

void check_sample_size(const std::vector<PartialShape>& outs, const std::string& where) {
  for (const PartialShape& s : outs) {
    double n = 1;
    for (std::size_t i = 1; i < s.size(); ++i)
      n *= static_cast<double>(std::max<std::int64_t>(1, s[i]));
    if (s.size() > kMaxRank || n > kMaxSampleElements) {
      fail(where, "the layer's output " + partial_shape_to_string(s) +
                      " is larger than a model config may describe");
    }
  }
}

void add_params(Budget& budget, double params, const std::string& where) {
  budget.params += params;
  if (budget.params > static_cast<double>(budget.limits.max_params)) {
    fail(where, "the model would have more than " + std::to_string(budget.limits.max_params) +
                    " parameters (ModelConfigLimits::max_params)");
  }
}

void add_layers(Budget& budget, std::size_t count, const std::string& where) {
  budget.layers += static_cast<std::int64_t>(count);
  if (budget.layers > budget.limits.max_layers) {
    fail(where, "the model has more than " + std::to_string(budget.limits.max_layers) +
                    " layers (ModelConfigLimits::max_layers)");
  }
}

// What a model config gives: in the build pass the model, in the check pass its output shapes
// and input count (its parameters go straight into the budget).
struct ModelResult {
  std::optional<Model> model;
  std::vector<PartialShape> outputs;
  std::size_t inputs = 0;
};

ModelResult read_model(const json& entry, const std::string& where, Context ctx);

// One layer entry of a model's "layers", read in either pass.
struct Entry {
  std::string class_name, name, where;
  layers::Layer layer;       // every entry but a nested model in the check pass
  bool is_input = false;     // an InputLayer
  PartialShape batch_shape;  // InputLayer
  std::optional<layers::InputLayer> input;
  bool is_model = false;
  ModelResult nested;       // a nested model
  std::size_t outputs = 1;  // tensors each call produces
};

bool is_model_class(const std::string& cls) { return cls == "Functional" || cls == "Sequential"; }

layers::InputLayer make_input(Object& c, const ModelConfigLimits& limits,
                              PartialShape& batch_shape) {
  const std::string name = read_name(c);
  const json& d = c.get("dtype");
  DType dtype = DType::float32;
  try {
    if (!d.is_string()) throw ValueError("");
    dtype = parse_dtype(d.get<std::string>());
  } catch (const ValueError&) {
    c.bad("dtype", "a dtype name (float32, float16, int64, ...)", d);
  }
  const json& s = c.array("batch_shape", kMaxRank);
  if (s.empty()) c.bad("batch_shape", "[batch, extents...] (at least the batch axis)", s);
  batch_shape.clear();
  for (const json& e : s) {
    const std::int64_t v = models::config::to_integer(
        e, -1, limits.max_extent, c.where(), "batch_shape", "-1 (unknown) or a positive extent");
    if (v == 0) c.bad("batch_shape", "a list of -1 (unknown) or positive extents", s);
    batch_shape.push_back(v);
  }
  c.finish();
  InputOptions o;
  o.dtype = dtype;
  o.name = name;
  o.batch_size = batch_shape[0];
  return layers::InputLayer(std::vector<std::int64_t>(batch_shape.begin() + 1, batch_shape.end()),
                            o);
}

// Reads {"class_name", "config"} of a layer (not its inbound nodes).
Entry read_entry(const std::string& cls, const json& cfg, const std::string& where, Context ctx) {
  Entry e;
  e.class_name = cls;
  e.where = where;
  // The name first, so that every later message names the layer.
  if (cfg.is_object() && cfg.contains("name") && cfg["name"].is_string() &&
      cfg["name"].get_ref<const std::string&>().size() <= kMaxNameLength) {
    e.where += " (" + cfg["name"].get<std::string>() + ")";
  }
  if (is_model_class(cls)) {
    if (ctx.depth + 1 > ctx.budget.limits.max_nesting) {
      fail(e.where, "models nested more than " + std::to_string(ctx.budget.limits.max_nesting) +
                        " deep (ModelConfigLimits::max_nesting)");
    }
    e.is_model = true;
    e.nested = read_model(json{{"class_name", cls}, {"config", cfg}}, e.where + "/",
                          Context{ctx.budget, ctx.pass, ctx.depth + 1});
    if (ctx.pass == Pass::build) e.layer = *e.nested.model;
    e.outputs =
        ctx.pass == Pass::build ? e.nested.model->outputs().size() : e.nested.outputs.size();
    e.name = cfg["name"].get<std::string>();
    return e;
  }
  Object c(cfg, e.where);
  try {
    if (cls == "InputLayer") {
      e.is_input = true;
      e.input = make_input(c, ctx.budget.limits, e.batch_shape);
      e.layer = *e.input;
    } else {
      e.layer = make_layer(cls, c, ctx.budget.limits);
    }
  } catch (const ValueError&) {
    throw;
  } catch (const Error& err) {
    fail(e.where, err.what());
  }
  e.name = e.layer.name();
  return e;
}

struct Ref {
  std::size_t layer;
  std::size_t node;
  std::size_t tensor;
};

Ref read_ref(const json& v, const std::unordered_map<std::string, std::size_t>& index,
             const std::vector<Entry>& entries, const std::vector<std::size_t>& calls,
             const std::string& where, const std::string& what) {
  if (!v.is_array() || v.size() != 3 || !v[0].is_string()) {
    fail(where, what + " must be [layer name, node index, tensor index], got " + show(v));
  }
  const auto it = index.find(v[0].get<std::string>());
  if (it == index.end()) {
    fail(where, what + " refers to an unknown layer " + quote(v[0].get<std::string>()));
  }
  const Entry& src = entries[it->second];
  const std::string layer = quote(src.name);
  const json& node = v[1];
  const json& tensor = v[2];
  if (!node.is_number_unsigned() || node.get<std::uint64_t>() >= calls[it->second]) {
    fail(where, what + " refers to call " + show(node) + " of layer " + layer + ", which has " +
                    std::to_string(calls[it->second]) + " call(s)");
  }
  if (!tensor.is_number_unsigned() || tensor.get<std::uint64_t>() >= src.outputs) {
    fail(where, what + " refers to output " + show(tensor) + " of layer " + layer + ", which has " +
                    std::to_string(src.outputs) + " output(s)");
  }
  return {it->second, static_cast<std::size_t>(node.get<std::uint64_t>()),
          static_cast<std::size_t>(tensor.get<std::uint64_t>())};
}

// Runs the check-pass computation of one call: validates the inputs and returns the outputs.
std::vector<PartialShape> check_call(Entry& e, std::size_t call,
                                     const std::vector<PartialShape>& shapes, Budget& budget) {
  const std::string where = e.where + ": call " + std::to_string(call);
  if (e.is_model) {
    if (shapes.size() != e.nested.inputs) {
      fail(where, "the model takes " + std::to_string(e.nested.inputs) + " inputs, got " +
                      std::to_string(shapes.size()));
    }
    return e.nested.outputs;
  }
  std::vector<PartialShape> outs;
  try {
    e.layer.impl().validate_input_count(shapes.size());
    e.layer.impl().validate(shapes);
    outs = e.layer.impl().compute_output_shape(shapes);
  } catch (const Error& err) {
    fail(where, err.what());
  }
  check_sample_size(outs, where);
  if (call == 0) add_params(budget, layer_params(e.layer, shapes), e.where);
  return outs;
}

ModelResult read_functional(Object& c, const std::string& prefix, Context ctx) {
  const std::string name = read_name(c);
  const bool trainable = c.boolean("trainable");
  const json& list = c.array("layers", std::numeric_limits<std::size_t>::max());
  if (list.empty()) c.bad("layers", "a non-empty list of layers", list);
  add_layers(ctx.budget, list.size(), prefix.empty() ? "layers" : prefix);

  std::vector<Entry> entries;
  std::vector<const json*> inbound;
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < list.size(); ++i) {
    Object e(list[i], entry_where(prefix, i));
    const std::string cls = e.string("class_name", 64);
    const json& cfg = e.get("config");
    inbound.push_back(&e.array("inbound_nodes", kMaxCallsPerLayer));
    e.finish();
    entries.push_back(read_entry(cls, cfg, e.where(), ctx));
    if (!index.emplace(entries.back().name, i).second) {
      fail(entries.back().where,
           "a second layer named " + quote(entries.back().name) + " (names must be unique)");
    }
  }
  // Calls per layer: an InputLayer has its one source node.
  std::vector<std::size_t> calls(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    calls[i] = entries[i].is_input ? 1 : inbound[i]->size();
    if (entries[i].is_input && !inbound[i]->empty()) {
      fail(entries[i].where, "an InputLayer has no inbound nodes, got " + show(*inbound[i]));
    }
    if (!entries[i].is_input && inbound[i]->empty()) {
      fail(entries[i].where, "the layer is never called (\"inbound_nodes\" is empty)");
    }
  }
  // Node ids: first[i] + call. Each call's inputs, read and checked.
  std::vector<std::size_t> first(entries.size() + 1, 0);
  for (std::size_t i = 0; i < entries.size(); ++i) first[i + 1] = first[i] + calls[i];
  const std::size_t node_count = first.back();
  std::vector<std::vector<Ref>> args(node_count);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].is_input) continue;
    for (std::size_t k = 0; k < calls[i]; ++k) {
      const json& call = (*inbound[i])[k];
      const std::string what = "inbound_nodes[" + std::to_string(k) + "]";
      if (!call.is_array() || call.empty() || call.size() > kMaxCallInputs) {
        fail(entries[i].where, what + " must be a non-empty list of inputs, got " + show(call));
      }
      for (std::size_t j = 0; j < call.size(); ++j) {
        args[first[i] + k].push_back(read_ref(call[j], index, entries, calls, entries[i].where,
                                              what + "[" + std::to_string(j) + "]"));
      }
    }
  }
  const auto read_refs = [&](const char* key) {
    const json& refs = c.array(key, kMaxCallInputs);
    if (refs.empty())
      c.bad(key, "a non-empty list of [layer name, node index, tensor index]", refs);
    std::vector<Ref> out;
    for (std::size_t j = 0; j < refs.size(); ++j) {
      out.push_back(read_ref(refs[j], index, entries, calls, c.where(),
                             std::string(key) + "[" + std::to_string(j) + "]"));
    }
    return out;
  };
  const std::vector<Ref> input_refs = read_refs("input_layers");
  const std::vector<Ref> output_refs = read_refs("output_layers");
  c.finish();
  std::vector<bool> listed(entries.size(), false);
  for (const Ref& r : input_refs) {
    if (!entries[r.layer].is_input) {
      fail(c.where(), "\"input_layers\" names " + quote(entries[r.layer].name) +
                          ", which is not an InputLayer");
    }
    if (listed[r.layer])
      fail(c.where(), "\"input_layers\" names " + quote(entries[r.layer].name) + " twice");
    listed[r.layer] = true;
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].is_input && !listed[i]) {
      fail(entries[i].where, "the InputLayer is missing from \"input_layers\"");
    }
  }

  // Execution order (Kahn): a call waits for its inputs and for the layer's previous call.
  std::vector<std::size_t> owner(node_count);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    for (std::size_t k = 0; k < calls[i]; ++k) owner[first[i] + k] = i;
  }
  std::vector<std::size_t> waiting(node_count, 0);
  std::vector<std::vector<std::size_t>> readers(node_count);
  for (std::size_t n = 0; n < node_count; ++n) {
    for (const Ref& r : args[n]) {
      readers[first[r.layer] + r.node].push_back(n);
      ++waiting[n];
    }
    if (n > first[owner[n]]) {
      readers[n - 1].push_back(n);
      ++waiting[n];
    }
  }
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t n = 0; n < node_count; ++n) {
    if (waiting[n] == 0) ready.push(n);
  }
  std::vector<std::size_t> order;
  while (!ready.empty()) {
    const std::size_t n = ready.top();
    ready.pop();
    order.push_back(n);
    for (std::size_t r : readers[n]) {
      if (--waiting[r] == 0) ready.push(r);
    }
  }
  if (order.size() != node_count) {
    for (std::size_t n = 0; n < node_count; ++n) {
      if (waiting[n] != 0) {
        fail(entries[owner[n]].where, "inbound_nodes[" + std::to_string(n - first[owner[n]]) +
                                          "] can never run: its inputs form a cycle");
      }
    }
  }

  ModelResult result;
  result.inputs = input_refs.size();
  if (ctx.pass == Pass::check) {
    std::vector<std::vector<PartialShape>> values(node_count);
    for (std::size_t n : order) {
      Entry& e = entries[owner[n]];
      if (e.is_input) {
        values[n] = {e.batch_shape};
        continue;
      }
      std::vector<PartialShape> shapes;
      for (const Ref& r : args[n]) shapes.push_back(values[first[r.layer] + r.node][r.tensor]);
      values[n] = check_call(e, n - first[owner[n]], shapes, ctx.budget);
      if (values[n].size() != e.outputs) {
        fail(e.where, "the layer gives " + std::to_string(values[n].size()) +
                          " outputs, expected " + std::to_string(e.outputs));
      }
    }
    for (const Ref& r : output_refs)
      result.outputs.push_back(values[first[r.layer] + r.node][r.tensor]);
    return result;
  }
  std::vector<std::vector<KerasTensor>> values(node_count);
  for (std::size_t n : order) {
    Entry& e = entries[owner[n]];
    try {
      if (e.is_input) {
        values[n] = {e.input->output()};
        continue;
      }
      std::vector<KerasTensor> xs;
      for (const Ref& r : args[n]) xs.push_back(values[first[r.layer] + r.node].at(r.tensor));
      values[n] = e.layer.call_symbolic(xs);
    } catch (const Error& err) {
      fail(e.where, err.what());
    }
  }
  std::vector<KerasTensor> ins, outs;
  for (const Ref& r : input_refs) ins.push_back(values[first[r.layer]].at(0));
  for (const Ref& r : output_refs) outs.push_back(values[first[r.layer] + r.node].at(r.tensor));
  try {
    result.model = Model(ins, outs, ModelOptions{name, trainable});
  } catch (const Error& err) {
    fail(prefix.empty() ? "model" : prefix, err.what());
  }
  return result;
}

ModelResult read_sequential(Object& c, const std::string& prefix, Context ctx) {
  const std::string name = read_name(c);
  const bool trainable = c.boolean("trainable");
  const json& list = c.array("layers", std::numeric_limits<std::size_t>::max());
  c.finish();
  add_layers(ctx.budget, list.size(), prefix.empty() ? "layers" : prefix);
  std::vector<Entry> entries;
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < list.size(); ++i) {
    Object e(list[i], entry_where(prefix, i));
    const std::string cls = e.string("class_name", 64);
    const json& cfg = e.get("config");
    e.finish();
    entries.push_back(read_entry(cls, cfg, e.where(), ctx));
    if (entries.back().is_input && i != 0) {
      fail(entries.back().where, "an InputLayer can only be the first layer of a Sequential model");
    }
    if (entries.back().outputs != 1) {
      fail(entries.back().where, "a Sequential model needs layers with one output");
    }
    if (!index.emplace(entries.back().name, i).second) {
      fail(entries.back().where,
           "a second layer named " + quote(entries.back().name) + " (names must be unique)");
    }
  }
  ModelResult result;
  result.inputs = 1;
  const bool has_input = !entries.empty() && entries[0].is_input;
  if (ctx.pass == Pass::check) {
    if (has_input) {
      std::vector<PartialShape> shapes{entries[0].batch_shape};
      for (std::size_t i = 1; i < entries.size(); ++i) {
        shapes = check_call(entries[i], 0, shapes, ctx.budget);
        if (shapes.size() != 1)
          fail(entries[i].where, "a Sequential model needs layers with one output");
      }
      result.outputs = shapes;
    } else {
      // Built on its first call: nothing to allocate now, the output shape is not known.
      result.outputs = {PartialShape{-1}};
    }
    return result;
  }
  Sequential model(SequentialOptions{name, trainable});
  for (Entry& e : entries) {
    try {
      model.add(e.layer);
    } catch (const Error& err) {
      fail(e.where, err.what());
    }
  }
  result.model = model;
  return result;
}

ModelResult read_model(const json& entry, const std::string& prefix, Context ctx) {
  Object top(entry, prefix.empty() ? "model config" : prefix);
  const std::string cls = top.string("class_name", 64);
  const json& cfg = top.get("config");
  top.finish();
  if (!is_model_class(cls)) top.bad("class_name", "\"Functional\" or \"Sequential\"", json(cls));
  Object c(cfg, prefix.empty() ? "config" : prefix.substr(0, prefix.size() - 1));
  return cls == "Functional" ? read_functional(c, prefix, ctx) : read_sequential(c, prefix, ctx);
}

}  // namespace

Model model_from_json(const std::string& text, ModelConfigLimits limits) {
  if (text.size() > limits.max_bytes) {
    fail("", "the model config is " + std::to_string(text.size()) + " bytes, more than the " +
                 std::to_string(limits.max_bytes) + " allowed (ModelConfigLimits::max_bytes)");
  }
  const std::size_t max_depth = 16 + 8 * static_cast<std::size_t>(std::max(0, limits.max_nesting));
  // Before parsing: nothing below may walk (dump, copy, visit) a value deeper than this.
  if (io::json_nesting_depth(text, max_depth) > max_depth) {
    fail("", "the model config nests arrays and objects more than " + std::to_string(max_depth) +
                 " deep");
  }
  const json config = json::parse(text, nullptr, false);
  if (config.is_discarded()) fail("", "the model config is not valid JSON");
  Budget check_budget{limits};
  read_model(config, "", Context{check_budget, Pass::check, 0});
  Budget build_budget{limits};
  return *read_model(config, "", Context{build_budget, Pass::build, 0}).model;
}

}  // namespace mixprec
