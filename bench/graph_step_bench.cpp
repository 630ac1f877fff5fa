// Training steps eager against replayed as CUDA graphs (issue 28), one model and batch size per
// call: fit()'s graphed step (src/models/graphed_step.h) over `--steps` timed steps after
// `--warmup` steps, executions of `--steps-per-execution` steps each ending with one host wait, as
// fit() runs them. Batches are on the GPU before the clock starts (as the prefetcher delivers
// them); the time per step is the execution's wall time over its steps. JSON: one object per
// setting with ms per step, samples/s, host waits per step, replays, and the reasons when the step
// ran eagerly (e.g. clipnorm, which reads the norms back every step).
//
//   graph_step_bench --model mlp --batch-size 256 [--graphs on|off|both] [--policy mixed_float16]
//                    [--optimizer rmsprop|sgd|adam|adamw] [--steps 200] [--warmup 20]
//                    [--steps-per-execution 16] [--device cuda] [--json out.json]
//   --model: mlp (the seed MLP, 784-512-512-10, RMSprop), efficientnet-b0 (seed 002, 224x224,
//   1000 classes, Adam), gpt (gpt-nano at its context, 128 tokens, AdamW), or any gpt preset.
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "mixprec/applications/gpt.h"
#include "mixprec/cuda.h"
#include "mixprec/mixprec.h"
#include "models/graphed_step.h"
#include "models/train_step.h"
#include "models/training_state.h"

namespace mp = mixprec;

namespace {

struct Settings {
  std::string model = "mlp", policy = "mixed_float16", optimizer, graphs = "both", json,
              device = "cuda";
  std::int64_t batch = 256;
  int steps = 200, warmup = 20, per_execution = 16;
};

mp::optimizers::Optimizer make_optimizer(const std::string& name) {
  if (name == "sgd") return mp::optimizers::SGD({.learning_rate = 0.01, .momentum = 0.9});
  if (name == "adam") return mp::optimizers::Adam();
  if (name == "adamw") return mp::optimizers::AdamW();
  return mp::optimizers::RMSprop();
}

struct Batch {
  mp::Tensor x, y;
};

// The model, compiled, and a few batches on its device.
mp::Model build(const Settings& s, mp::Device device, std::vector<Batch>& batches) {
  mp::mixed_precision::set_global_policy(mp::mixed_precision::Policy(s.policy));
  mp::set_seed(1);
  mp::DeviceScope on(device);
  std::optional<mp::Model> model;
  std::string optimizer = s.optimizer;
  mp::Generator gen(3);
  if (s.model == "mlp") {
    model.emplace(mp::applications::mlp({}));
    if (optimizer.empty()) optimizer = "rmsprop";
    model->compile({.optimizer = make_optimizer(optimizer),
                    .loss = std::string("sparse_categorical_crossentropy"),
                    .metrics = {std::string("accuracy")}});
    for (int i = 0; i < 4; ++i) {
      batches.push_back(
          {mp::random_uniform({s.batch, 784}, 0.0, 1.0, {}, gen).to(device),
           mp::random_uniform({s.batch}, 0.0, 10.0, {}, gen).to(mp::DType::int64).to(device)});
    }
  } else if (s.model.rfind("efficientnet-b", 0) == 0) {
    model.emplace(mp::applications::efficientnet(std::stoi(s.model.substr(14)), {}));
    if (optimizer.empty()) optimizer = "adam";
    model->compile({.optimizer = make_optimizer(optimizer),
                    .loss = std::string("sparse_categorical_crossentropy"),
                    .metrics = {std::string("accuracy")}});
    for (int i = 0; i < 2; ++i) {
      batches.push_back(
          {mp::random_uniform({s.batch, 224, 224, 3}, 0.0, 1.0, {}, gen).to(device),
           mp::random_uniform({s.batch}, 0.0, 1000.0, {}, gen).to(mp::DType::int64).to(device)});
    }
  } else {
    mp::applications::GptConfig c =
        mp::applications::gpt_preset(s.model == "gpt" ? "gpt-nano" : s.model);
    model.emplace(mp::applications::gpt(c));
    if (optimizer.empty()) optimizer = "adamw";
    model->compile({.optimizer = make_optimizer(optimizer),
                    .loss = mp::losses::SparseCategoricalCrossentropy({.from_logits = true})});
    for (int i = 0; i < 2; ++i) {
      const mp::Tensor ids =
          mp::random_uniform({s.batch, c.context}, 0.0, static_cast<double>(c.vocab), {}, gen)
              .to(mp::DType::int32)
              .to(device);
      batches.push_back({ids, ids});
    }
  }
  return *model;
}

struct Row {
  bool graphs = false;
  double ms_per_step = 0.0, samples_per_s = 0.0, waits_per_step = 0.0;
  std::int64_t replays = 0, eager_steps = 0;
  std::vector<std::string> reasons;
};

Row run(const Settings& s, bool graphs) {
  const mp::Device device = s.device == "cpu" ? mp::Device::cpu() : mp::Device::cuda();
  if (!graphs) setenv("MIXPREC_CUDA_GRAPHS", "0", 1);
  std::vector<Batch> batches;
  mp::Model model = build(s, device, batches);
  mp::models::StepContext ctx(model, *model.model_impl().training);
  mp::models::GraphedTrainStep step(ctx, false);
  unsetenv("MIXPREC_CUDA_GRAPHS");
  std::int64_t n = 0;
  auto execution = [&](int count) {
    for (int i = 0; i < count; ++i, ++n) {
      const Batch& b = batches[static_cast<std::size_t>(n) % batches.size()];
      step.run(b.x, b.y, {1, n + 1});
    }
    step.sync_execution();
  };
  for (int done = 0; done < s.warmup; done += s.per_execution) execution(s.per_execution);
  const std::int64_t waits0 = mp::cuda::host_synchronizations();
  const std::int64_t replays0 = step.replays(), eager0 = step.eager_steps();
  const auto t0 = std::chrono::steady_clock::now();
  int timed = 0;
  for (; timed < s.steps; timed += s.per_execution) execution(s.per_execution);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  Row r;
  r.graphs = graphs;
  r.ms_per_step = ms / timed;
  r.samples_per_s = static_cast<double>(s.batch) * timed / (ms / 1000.0);
  r.waits_per_step = static_cast<double>(mp::cuda::host_synchronizations() - waits0) / timed;
  r.replays = step.replays() - replays0;
  r.eager_steps = step.eager_steps() - eager0;
  r.reasons = step.reasons();
  return r;
}

std::string quoted(const std::string& v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i], v = argv[i + 1];
    if (arg == "--model")
      s.model = v;
    else if (arg == "--batch-size")
      s.batch = std::stoll(v);
    else if (arg == "--graphs")
      s.graphs = v;
    else if (arg == "--policy")
      s.policy = v;
    else if (arg == "--optimizer")
      s.optimizer = v;
    else if (arg == "--steps")
      s.steps = std::stoi(v);
    else if (arg == "--warmup")
      s.warmup = std::stoi(v);
    else if (arg == "--steps-per-execution")
      s.per_execution = std::stoi(v);
    else if (arg == "--device")
      s.device = v;
    else if (arg == "--json")
      s.json = v;
    else {
      std::cerr << "graph_step_bench: unknown option " << arg << " (see the file's head)\n";
      return 2;
    }
  }
  if (argc % 2 == 0 || s.per_execution < 1 || s.steps < 1) {
    std::cerr
        << "graph_step_bench: options take one value each; steps and steps-per-execution >= 1\n";
    return 2;
  }
  try {
    std::vector<Row> rows;
    if (s.graphs == "off" || s.graphs == "both") rows.push_back(run(s, false));
    if (s.graphs == "on" || s.graphs == "both") rows.push_back(run(s, true));
    std::ostringstream js;
    js << "{\n  \"what\": \"training step eager vs CUDA graph replay (issue 28)\",\n  \"model\": "
       << quoted(s.model) << ",\n  \"policy\": " << quoted(s.policy)
       << ",\n  \"batch_size\": " << s.batch << ",\n  \"steps_per_execution\": " << s.per_execution
       << ",\n  \"rows\": [\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      js << "    {\"graphs\": " << (r.graphs ? "true" : "false")
         << ", \"ms_per_step\": " << r.ms_per_step << ", \"samples_per_s\": " << r.samples_per_s
         << ", \"host_waits_per_step\": " << r.waits_per_step << ", \"replays\": " << r.replays
         << ", \"eager_steps\": " << r.eager_steps << ", \"reasons\": [";
      for (std::size_t k = 0; k < r.reasons.size(); ++k)
        js << (k ? ", " : "") << quoted(r.reasons[k]);
      js << "]}" << (i + 1 < rows.size() ? "," : "") << "\n";
      std::cout << s.model << " b" << s.batch << " graphs " << (r.graphs ? "on " : "off") << ": "
                << r.ms_per_step << " ms/step, " << r.waits_per_step << " waits/step, " << r.replays
                << " replays" << (r.reasons.empty() ? "" : " (eager: " + r.reasons.front() + ")")
                << "\n";
    }
    if (rows.size() == 2 && rows[1].ms_per_step > 0) {
      js << "  ],\n  \"speedup\": " << rows[0].ms_per_step / rows[1].ms_per_step << "\n}\n";
      std::cout << "speedup " << rows[0].ms_per_step / rows[1].ms_per_step << "x\n";
    } else {
      js << "  ]\n}\n";
    }
    if (!s.json.empty()) std::ofstream(s.json) << js.str();
  } catch (const std::exception& e) {
    std::cerr << "graph_step_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
