// Data-parallel scaling of the seed MLP on the CPU: training steps per second at the same per-rank
// batch, run once alone and once under `mpirun -np N` (scripts/bench-distributed.sh runs both and
// computes the scaling efficiency throughput(N) / (N * throughput(1))).
//
//   distributed_scaling_bench [--units U] [--batch B] [--steps S] [--warmup W]
//                             [--policy float32|mixed_bfloat16] [--json PATH]
//
// Every rank builds the same model (same seed: the same initial weights without a broadcast) and
// trains on its own fixed synthetic batch of B samples (the global batch is B x world size). A
// step is forward, backward, the all-reduce of the float32 gradients over the group
// (DataParallel::all_reduce_gradients, the bucketed reduction fit() uses, each rank weighted by
// 1 / world size: the gradient of the global batch's mean loss) and the optimizer update; in a
// group of one there is no all-reduce. The time is the slowest rank's for S steps after W untimed
// ones; the all-reduce's own share is reported too. Rank 0 prints one JSON object (and writes it to
// PATH).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"

namespace mp = mixprec;

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::int64_t units = 4096;  // the seed's 784-4096-4096-10
  std::int64_t batch = 128;   // per rank
  int steps = 20;
  int warmup = 3;
  std::string policy = "float32";
  std::string json_path;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--units" && has_value) {
      o.units = std::stoll(argv[++i]);
    } else if (a == "--batch" && has_value) {
      o.batch = std::stoll(argv[++i]);
    } else if (a == "--steps" && has_value) {
      o.steps = std::stoi(argv[++i]);
    } else if (a == "--warmup" && has_value) {
      o.warmup = std::stoi(argv[++i]);
    } else if (a == "--policy" && has_value) {
      o.policy = argv[++i];
    } else if (a == "--json" && has_value) {
      o.json_path = argv[++i];
    } else {
      throw mp::ValueError("distributed_scaling_bench: unknown or incomplete option '" + a +
                           "' (see the comment at the top of bench/distributed_scaling_bench.cpp)");
    }
  }
  if (o.units <= 0 || o.batch <= 0 || o.steps <= 0 || o.warmup < 0) {
    throw mp::ValueError(
        "distributed_scaling_bench: --units, --batch and --steps must be positive");
  }
  if (o.policy != "float32" && o.policy != "mixed_bfloat16") {
    throw mp::ValueError(
        "distributed_scaling_bench: --policy float32 or mixed_bfloat16 (policies "
        "without loss scaling), got " +
        o.policy);
  }
  return o;
}

struct Trainer {
  mp::Model model;
  mp::optimizers::Optimizer optimizer = mp::optimizers::SGD({.learning_rate = 0.01});
  mp::distributed::DataParallel data_parallel;  // its gradient all-reduce (25 MB buckets)
  std::vector<mp::Tensor> variables;
  mp::Tensor x, y;
  double allreduce_seconds = 0;  // accumulated over the timed steps

  void step() {
    const mp::losses::SparseCategoricalCrossentropy loss_object;
    mp::GradientTape tape;
    const mp::Tensor loss = loss_object(y, model(x, {.training = true}));
    std::vector<mp::Tensor> grads = tape.gradient(loss, variables);
    const int world = mp::distributed::world_size();
    if (world > 1) {
      const auto t0 = Clock::now();
      mp::NoGradScope no_grad;
      data_parallel.all_reduce_gradients(grads, 1.0 / world);  // float32 buckets, as fit() does
      allreduce_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    }
    optimizer.apply_gradients(grads, variables);
  }
};

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

nlohmann::ordered_json run(const Options& o) {
  mp::mixed_precision::set_global_policy(mp::mixed_precision::Policy(o.policy));
  mp::set_seed(1);  // the same initial weights on every rank
  Trainer t{mp::applications::mlp({.units = o.units})};
  t.variables = t.model.trainable_variables();
  mp::set_seed(100 + static_cast<std::uint64_t>(mp::distributed::rank()));  // each rank's batch
  t.x = mp::random_uniform({o.batch, 784});
  t.y = mp::random_uniform({o.batch}, 0.0, 10.0).to(mp::kInt64);
  for (int i = 0; i < o.warmup; ++i) t.step();
  t.allreduce_seconds = 0;
  mp::distributed::barrier();
  const auto start = Clock::now();
  for (int i = 0; i < o.steps; ++i) t.step();
  t.variables.front().to_vector<float>();  // the last step has finished
  const double mine = std::chrono::duration<double>(Clock::now() - start).count();
  const double seconds = mp::distributed::all_reduce(mine, mp::distributed::ReduceOp::max);
  const double allreduce =
      mp::distributed::all_reduce(t.allreduce_seconds, mp::distributed::ReduceOp::max);
  std::int64_t grad_bytes = 0;
  for (const mp::Tensor& v : t.variables) grad_bytes += v.numel() * 4;
  const int world = mp::distributed::world_size();
  return {{"world_size", world},
          {"omp_threads", omp_get_max_threads()},
          {"cpu", cpu_name()},
          {"policy", o.policy},
          {"units", o.units},
          {"params", t.model.count_params()},
          {"gradient_bytes", grad_bytes},
          {"per_rank_batch", o.batch},
          {"global_batch", o.batch * world},
          {"steps", o.steps},
          {"seconds", seconds},
          {"steps_per_second", o.steps / seconds},
          {"samples_per_second", static_cast<double>(o.steps * o.batch * world) / seconds},
          {"allreduce_ms_per_step", 1e3 * allreduce / o.steps}};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    mp::distributed::initialize();
    const nlohmann::ordered_json result = run(o);
    if (mp::distributed::rank() == 0) {
      std::printf("%s\n", result.dump().c_str());
      if (!o.json_path.empty()) std::ofstream(o.json_path) << result.dump(2) << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
