// Attention benchmark: the fused scaled_dot_product_attention against the composition
// (attention_reference), forward and forward + backward, at the shape of one layer of the GPT
// target step (batch 8, T = 256, 6 heads of 64, causal) or one given on the command line, on the
// CPU (float32, bfloat16) or on CUDA (--device cuda: float32, bfloat16, float16; the fused path
// runs the own flash-attention kernels, tensor cores for the 16-bit dtypes).
//
//   attention_bench [--device cpu|cuda] [--batch B] [--length T] [--heads H] [--dim D]
//                   [--repeats N] [--no-causal]
//
// Prints one JSON object per (dtype, path, pass): min and median milliseconds over `repeats`
// interleaved runs after two warm-up runs (on CUDA each run ends with a device synchronisation),
// and the GFLOP/s of the useful products (4 B H Tq Tk D forward, 2.5x that for the backward's
// five products; halved when causal).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "mixprec/attention.h"
#include "mixprec/cuda.h"
#include "mixprec/mixprec.h"

namespace mp = mixprec;

namespace {

struct Timing {
  double min_ms = 0, median_ms = 0;
};

// `sync` waits for the device (nothing on the CPU).
Timing time_it(const std::function<void()>& f, const std::function<void()>& sync, int repeats) {
  f(), f();
  sync();
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    sync();
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms.front(), ms[ms.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t b = 8, t = 256, h = 6, d = 64;
  int repeats = 10;
  bool causal = true;
  bool cuda = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::atoll(argv[++i]) : 0; };
    if (a == "--device" && i + 1 < argc) {
      const std::string d = argv[++i];
      if (d != "cpu" && d != "cuda") {
        std::fprintf(stderr, "--device must be cpu or cuda, got %s\n", d.c_str());
        return 2;
      }
      cuda = d == "cuda";
    } else if (a == "--batch")
      b = next();
    else if (a == "--length")
      t = next();
    else if (a == "--heads")
      h = next();
    else if (a == "--dim")
      d = next();
    else if (a == "--repeats")
      repeats = static_cast<int>(next());
    else if (a == "--no-causal")
      causal = false;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  const double forward_flops =
      4.0 * double(b * h) * double(t) * double(t) * double(d) * (causal ? 0.5 : 1.0);
  if (cuda && mp::cuda::device_count() == 0) {
    std::fprintf(stderr, "--device cuda: no CUDA GPU on this machine\n");
    return 1;
  }
  const mp::Device device = cuda ? mp::Device::cuda(0) : mp::Device::cpu();
  const std::function<void()> sync = [&] {
    if (cuda) mp::cuda::synchronize(device);
  };
  std::vector<mp::DType> dtypes{mp::DType::float32, mp::DType::bfloat16};
  if (cuda) dtypes.push_back(mp::DType::float16);
  for (mp::DType dtype : dtypes) {
    mp::Generator gen(1);
    auto make = [&]() {
      mp::Tensor x = mp::random_normal({b, t, h, d}, 0.0, 1.0, {.dtype = dtype}, gen).to(device);
      return x.set_requires_grad(true);
    };
    const mp::Tensor q = make(), k = make(), v = make();
    const mp::Tensor w =
        mp::random_normal({b, t, h, d}, 0.0, 1.0, {.dtype = dtype}, gen).to(device);
    for (bool fused : {true, false}) {
      auto f = fused ? mp::scaled_dot_product_attention : mp::attention_reference;
      const mp::AttentionOptions o{.causal = causal};
      const Timing fwd = time_it(
          [&] {
            mp::NoGradScope no_grad;
            (void)f(q, k, v, o);
          },
          sync, repeats);
      const Timing both = time_it(
          [&] {
            (void)mp::grad(mp::sum(mp::mul(f(q, k, v, o), w)), {q, k, v});
          },
          sync, repeats);
      for (int pass = 0; pass < 2; ++pass) {
        const Timing& tm = pass == 0 ? fwd : both;
        const double flops = pass == 0 ? forward_flops : 3.5 * forward_flops;
        std::printf(
            "{\"device\": \"%s\", \"dtype\": \"%s\", \"path\": \"%s\", \"pass\": \"%s\", "
            "\"shape\": "
            "[%lld, %lld, %lld, %lld], \"min_ms\": %.3f, \"median_ms\": %.3f, \"gflops\": %.2f}\n",
            cuda ? "cuda" : "cpu", std::string(mp::dtype_name(dtype)).c_str(),
            fused ? "fused" : "reference", pass == 0 ? "forward" : "forward+backward",
            static_cast<long long>(b), static_cast<long long>(t), static_cast<long long>(h),
            static_cast<long long>(d), tm.min_ms, tm.median_ms, flops / (tm.min_ms * 1e6));
      }
    }
  }
  return 0;
}
