// mixed_bfloat16 against float32 as a CPU WITHOUT native bfloat16 would run it, on a CPU that
// has it (issue 14: "at most 1.1x our float32 step on a CPU without AVX512_BF16 / AMX"): oneDNN
// is capped at AVX512_CORE (dnnl::set_max_cpu_isa, before any primitive), so its bf16 and AMX
// kernels are gone and mixprec's convolutions and matmuls run float32 on widened copies, and
// mixprec's own conversion ISA is capped below AVX512_BF16 (core::set_convert_isa_limit), so its
// loops round with the integer formula. An emulation: the cores, caches and memory stay this
// CPU's. EfficientNet-B0 (seed 002) at 64x64, batch 32, Adam, synthetic data; both policies
// alternate, ROUNDS times; the median step of each round and the ratio of the medians.
//
//   build/bench/cpu_bf16_without_native_bench [ROUNDS] [STEPS] [OUT.json]
//   build/bench/cpu_bf16_without_native_bench 3 20 bench/results/cpu-bf16-without-native.json
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "backend/cpu/dnnl_context.h"
#include "core/convert_kernels.h"
#include "mixprec/mixprec.h"

namespace mp = mixprec;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The median training step (ms) of EfficientNet-B0 under `policy` over `steps` steps after 3.
double median_step(const std::string& policy, int steps) {
  mp::mixed_precision::set_global_policy(policy);
  mp::Model model =
      mp::applications::efficientnet(0, {.input_size = 64, .channels = 3, .classes = 1000});
  model.compile({.optimizer = mp::optimizers::Adam(),
                 .loss = std::string("sparse_categorical_crossentropy")});
  mp::Generator gen(42);
  const mp::Tensor x = mp::random_uniform({32, 64, 64, 3}, 0.0, 1.0, {}, gen);
  std::vector<std::int64_t> labels(32);
  for (int i = 0; i < 32; ++i) labels[static_cast<std::size_t>(i)] = (i * 37) % 1000;
  const mp::Tensor y = mp::from_vector(labels, {32});
  std::vector<double> ms;
  for (int s = 0; s < steps + 3; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    model.train_on_batch(x, y);
    const auto t1 = std::chrono::steady_clock::now();
    if (s >= 3) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  mp::mixed_precision::set_global_policy("float32");
  return median(ms);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  const std::string out = argc > 3 ? argv[3] : "";
  if (rounds < 1 || steps < 1) {
    std::fprintf(stderr, "usage: cpu_bf16_without_native_bench [ROUNDS>=1] [STEPS>=1] [OUT]\n");
    return 2;
  }
  if (dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx512_core) != dnnl::status::success) {
    std::fprintf(stderr, "cpu_bf16_without_native_bench: oneDNN refused the ISA cap\n");
    return 1;
  }
  mp::core::set_convert_isa_limit(mp::core::ConvertIsa::avx512);
  std::vector<double> f32, bf16;
  for (int r = 0; r < rounds; ++r) {
    f32.push_back(median_step("float32", steps));
    bf16.push_back(median_step("mixed_bfloat16", steps));
    std::printf("round %d: float32 %.2f ms, mixed_bfloat16 %.2f ms\n", r + 1, f32.back(),
                bf16.back());
  }
  const bool native = mp::cpu::cpu_has_native_bf16();
  const double ratio = median(bf16) / median(f32);
  std::printf("mixed_bfloat16 / float32 = %.3f (oneDNN native bf16 after the cap: %s)\n", ratio,
              native ? "yes" : "no");
  if (!out.empty()) {
    std::ofstream f(out);
    f << "{\n  \"what\": \"EfficientNet-B0 64x64 batch 32 Adam, mixed_bfloat16 vs float32 with "
         "native bfloat16 taken away (oneDNN capped at AVX512_CORE, mixprec conversions below "
         "AVX512_BF16): an emulation of a CPU without it\",\n"
      << "  \"cpu\": \"" << mp::list_physical_devices("CPU").at(0).name << "\",\n"
      << "  \"command\": \"build/bench/cpu_bf16_without_native_bench " << rounds << " " << steps
      << " " << out << "\",\n  \"rounds\": [";
    for (int r = 0; r < rounds; ++r) {
      f << (r ? ", " : "") << "{\"float32_ms\": " << f32[static_cast<std::size_t>(r)]
        << ", \"mixed_bfloat16_ms\": " << bf16[static_cast<std::size_t>(r)] << "}";
    }
    f << "],\n  \"ratio_of_medians\": " << ratio
      << ",\n  \"onednn_native_bf16\": " << (native ? "true" : "false") << "\n}\n";
  }
  return native ? 1 : 0;  // the cap did not take: the figures would not be an emulation
}
