// The residual Add + LayerNormalization of a pre-norm Transformer block, fused
// (ops::add_layer_norm, one pass) against composed (add, then layer_norm: two passes), forward
// only (the backward is the same in both), on the rows of a GPT step: batch x T rows of the
// residual width. The two run interleaved (DESIGN §5), so their ratio holds under background load.
//
//   add_layer_norm_bench [--json PATH] [--rows N] [--width C] [--repeats N] [--dtype NAME]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "mixprec/transformer_ops.h"
#include "ops/add_layer_norm.h"

namespace mp = mixprec;

namespace {

struct Stats {
  double min_ms = 0, median_ms = 0;
};

// Each function once per round, `repeats` rounds, after `warmup` untimed rounds.
std::vector<Stats> interleaved(const std::vector<std::function<void()>>& fs, int warmup,
                               int repeats) {
  for (int i = 0; i < warmup; ++i) {
    for (const auto& f : fs) f();
  }
  std::vector<std::vector<double>> ms(fs.size());
  for (int r = 0; r < repeats; ++r) {
    for (std::size_t i = 0; i < fs.size(); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      fs[i]();
      ms[i].push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  std::vector<Stats> out;
  for (auto& m : ms) {
    std::sort(m.begin(), m.end());
    const std::size_t n = m.size();
    out.push_back({m.front(), n % 2 ? m[n / 2] : 0.5 * (m[n / 2 - 1] + m[n / 2])});
  }
  return out;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto start = line.find_first_not_of(" \t", line.find(':') + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  }
  return "unknown CPU";
}

}  // namespace

int main(int argc, char** argv) {
  std::string json;
  std::int64_t rows = 8 * 256, width = 384;
  int repeats = 200;
  std::vector<mp::DType> dtypes = {mp::DType::float32, mp::DType::bfloat16, mp::DType::float16};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else if (arg == "--rows" && i + 1 < argc) {
      rows = std::max<std::int64_t>(1, std::stoll(argv[++i]));
    } else if (arg == "--width" && i + 1 < argc) {
      width = std::max<std::int64_t>(1, std::stoll(argv[++i]));
    } else if (arg == "--repeats" && i + 1 < argc) {
      repeats = std::max(1, std::stoi(argv[++i]));
    } else if (arg == "--dtype" && i + 1 < argc) {
      const std::string name = argv[++i];
      dtypes.clear();
      for (const mp::DType d : {mp::DType::float32, mp::DType::bfloat16, mp::DType::float16}) {
        if (name == mp::dtype_name(d)) dtypes.push_back(d);
      }
      if (dtypes.empty()) {
        std::cerr << "add_layer_norm_bench: --dtype is float32, bfloat16 or float16\n";
        return 2;
      }
    } else {
      std::cerr << "usage: " << argv[0]
                << " [--json PATH] [--rows N] [--width C] [--repeats N] [--dtype NAME]\n";
      return arg == "--help" || arg == "-h" ? 0 : 2;
    }
  }
  std::ostringstream rows_json;
  std::printf("%-9s %12s %12s %12s %12s %8s %8s\n", "dtype", "composed", "fused", "composed",
              "fused", "median", "min");
  std::printf("%-9s %12s %12s %12s %12s %8s %8s\n", "", "median ms", "median ms", "min ms",
              "min ms", "ratio", "ratio");
  for (const mp::DType dtype : dtypes) {
    mp::Generator gen(1);
    const mp::Tensor a = mp::random_uniform({rows, width}, -1.0, 1.0, {.dtype = dtype}, gen);
    const mp::Tensor b = mp::random_uniform({rows, width}, -1.0, 1.0, {.dtype = dtype}, gen);
    const mp::Tensor gamma = mp::ones({width}), beta = mp::zeros({width});
    const std::vector<Stats> s =
        interleaved({[&] { mp::layer_norm(mp::add(a, b), gamma, beta, 1e-5); },
                     [&] { mp::ops::add_layer_norm(a, b, gamma, beta, 1e-5); }},
                    10, repeats);
    const double median_ratio = s[1].median_ms / s[0].median_ms;
    const double min_ratio = s[1].min_ms / s[0].min_ms;
    const std::string name(mp::dtype_name(dtype));
    std::printf("%-9s %12.4f %12.4f %12.4f %12.4f %8.3f %8.3f\n", name.c_str(), s[0].median_ms,
                s[1].median_ms, s[0].min_ms, s[1].min_ms, median_ratio, min_ratio);
    rows_json << (rows_json.tellp() > 0 ? ",\n" : "") << "    {\"dtype\": \"" << name
              << "\", \"composed_ms\": {\"min\": " << s[0].min_ms
              << ", \"median\": " << s[0].median_ms << "}, \"fused_ms\": {\"min\": " << s[1].min_ms
              << ", \"median\": " << s[1].median_ms
              << "}, \"ratio_fused_over_composed\": " << median_ratio
              << ", \"min_ratio_fused_over_composed\": " << min_ratio << "}";
  }
  if (!json.empty()) {
    std::ofstream out(json);
    out << "{\n  \"device\": \"" << cpu_model() << "\",\n  \"threads\": " << omp_get_max_threads()
        << ",\n  \"workload\": {\"bench\": \"add-layer-norm\", \"rows\": " << rows
        << ", \"width\": " << width << ", \"repeats\": " << repeats << "},\n  \"results\": [\n"
        << rows_json.str() << "\n  ]\n}\n";
    if (!out) {
      std::cerr << "add_layer_norm_bench: cannot write " << json << "\n";
      return 1;
    }
  }
  return 0;
}
