// The fused CPU batch normalization + activation kernels (batch_norm_activation.h): the blocked
// loops of batch_norm_loops.h with the vectorised activations of vector_math.h applied per chunk
// of rows in float32.
#include "backend/cpu/batch_norm_activation.h"

#include <algorithm>
#include <vector>

#include "backend/cpu/batch_norm_loops.h"
#include "backend/cpu/vector_math.h"
#include "core/dispatch.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

using namespace bn_loops;  // NOLINT: the shared loop helpers

// Per-channel float32 constants of one call: pre = (x - mean) * scale + shift.
struct Affine {
  std::vector<float> mean, scale, shift;
};

Affine affine_of(const std::vector<float>& mean, const std::vector<float>& variance,
                 const Tensor& gamma, const Tensor& beta, double epsilon) {
  Affine a{mean, inverse_std(variance, static_cast<float>(epsilon)), beta.to_vector<float>()};
  const std::vector<float> g = gamma.to_vector<float>();
  for (std::size_t j = 0; j < a.scale.size(); ++j) a.scale[j] *= g[j];
  return a;
}

// pre[i] = (x[i] - mean) * scale + shift for n rows of c channels (float32).
void pre_activation(const float* x, std::int64_t n, std::int64_t c, const Affine& a, float* pre) {
  const float* m = a.mean.data();
  const float* s = a.scale.data();
  const float* b = a.shift.data();
  for (std::int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * c;
    float* pi = pre + i * c;
#pragma omp simd
    for (std::int64_t j = 0; j < c; ++j) pi[j] = (xi[j] - m[j]) * s[j] + b[j];
  }
}

template <typename T>
void forward(const T* x, Rows r, const Affine& a, UnaryOp act, T* y) {
  const std::int64_t c = r.c;
  parallel_rows(r, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<float> in(buffer_size(c)), pre(buffer_size(c)), out(buffer_size(c));
    for_each_chunk(r0, r1, c, [&](std::int64_t row, std::int64_t n) {
      const float* px = load<float>(x + row * c, n * c, in.data());
      pre_activation(px, n, c, a, pre.data());
      float* py = output<float>(y + row * c, out.data());
      activation_floats(act, py, pre.data(), n * c);
      store(py, n * c, y + row * c);
    });
  });
}

// Per-thread buffers of the backward: x and dy in float32, the pre-activation, dz.
struct BackwardBuffers {
  explicit BackwardBuffers(std::int64_t c)
      : x(buffer_size(c)), g(buffer_size(c)), pre(buffer_size(c)), dz(buffer_size(c)) {}
  std::vector<float> x, g, pre, dz;
  const float* px = nullptr;  // x of the current chunk in float32
};

// dz = dy * act'(pre) for the n rows from `row`, recomputing pre from x; returns dz.
template <typename T>
const float* chunk_dz(const T* dy, const T* x, std::int64_t row, std::int64_t n, std::int64_t c,
                      const Affine& a, UnaryOp act, BackwardBuffers& b) {
  b.px = load<float>(x + row * c, n * c, b.x.data());
  const float* pg = load<float>(dy + row * c, n * c, b.g.data());
  pre_activation(b.px, n, c, a, b.pre.data());
  activation_backward_floats(act, b.dz.data(), pg, b.pre.data(), nullptr, n * c, true);
  return b.dz.data();
}

template <typename T>
void backward(const T* dy, const T* x, Rows r, const Affine& a, const std::vector<float>& inv_std,
              BatchNormStats stats, UnaryOp act, T* dx, float* dgamma, float* dbeta) {
  const std::int64_t c = r.c;
  const float* pm = a.mean.data();
  const auto sums = channel_sums<float>(r, 2, [&](std::int64_t r0, std::int64_t r1, float* acc) {
    BackwardBuffers b(c);
    float* acc_g = acc;
    float* acc_gx = acc + c;
    for_each_chunk(r0, r1, c, [&](std::int64_t row, std::int64_t n) {
      const float* dz = chunk_dz(dy, x, row, n, c, a, act, b);
      for (std::int64_t i = 0; i < n; ++i) {
#pragma omp simd
        for (std::int64_t j = 0; j < c; ++j) {
          acc_g[j] += dz[i * c + j];
          acc_gx[j] += dz[i * c + j] * (b.px[i * c + j] - pm[j]);
        }
      }
    });
  });
  // dx = k * (dz - p - (x - mean) * q): k = gamma * inv_std, p = dbeta / M, q = dgamma * inv_std
  // / M (p and q are 0 for moving statistics), as cpu::batch_norm_backward.
  const std::size_t cs = static_cast<std::size_t>(c);
  std::vector<float> k(cs), p(cs), q(cs);
  for (std::size_t j = 0; j < cs; ++j) {
    const double sum_g = sums[j], sum_gx = sums[j + cs], inv = inv_std[j];
    dbeta[j] = static_cast<float>(sum_g);
    dgamma[j] = static_cast<float>(sum_gx * inv);
    k[j] = a.scale[j];  // gamma * inv_std
    const bool batch = stats == BatchNormStats::batch;
    p[j] = batch ? static_cast<float>(sum_g / double(r.m)) : 0.0f;
    q[j] = batch ? static_cast<float>(sum_gx * inv * inv / double(r.m)) : 0.0f;
  }
  parallel_rows(r, [&](std::int64_t r0, std::int64_t r1) {
    BackwardBuffers b(c);
    std::vector<float> out(buffer_size(c));
    for_each_chunk(r0, r1, c, [&](std::int64_t row, std::int64_t n) {
      const float* dz = chunk_dz(dy, x, row, n, c, a, act, b);
      float* pd = output<float>(dx + row * c, out.data());
      for (std::int64_t i = 0; i < n; ++i) {
#pragma omp simd
        for (std::int64_t j = 0; j < c; ++j) {
          pd[i * c + j] = k[j] * (dz[i * c + j] - p[j] - (b.px[i * c + j] - pm[j]) * q[j]);
        }
      }
      store(pd, n * c, dx + row * c);
    });
  });
}

// Calls f.template operator()<T>() for the storage type of x (float, float16, bfloat16).
template <typename F>
void dispatch_storage(DType dtype, F&& f) {
  switch (dtype) {
    case DType::float32: f.template operator()<float>(); return;
    case DType::float16: f.template operator()<float16>(); return;
    case DType::bfloat16: f.template operator()<bfloat16>(); return;
    default:
      throw DTypeError("cpu::batch_norm_activation: x must be float32, float16 or bfloat16, got " +
                       std::string(dtype_name(dtype)));
  }
}

void check_supported(const Tensor& x, UnaryOp act) {
  if (!batch_norm_activation_supported(x.dtype(), act)) {
    throw Error("cpu::batch_norm_activation: no fused kernel for " +
                std::string(dtype_name(x.dtype())) + " x with activation " +
                std::string(op_name(act)));
  }
}

Tensor stat_tensor(std::int64_t c) {
  return core::make_tensor(Shape{c}, DType::float32, Device::cpu());
}

}  // namespace

bool batch_norm_activation_supported(DType dtype, UnaryOp act) {
  const bool storage =
      dtype == DType::float32 || dtype == DType::float16 || dtype == DType::bfloat16;
  const bool activation = act == UnaryOp::relu || act == UnaryOp::relu6 ||
                          act == UnaryOp::sigmoid || act == UnaryOp::silu;
  return storage && activation;
}

BatchNormTrainingResult batch_norm_activation_training(const Tensor& x, const Tensor& gamma,
                                                       const Tensor& beta, double epsilon,
                                                       UnaryOp act) {
  check_supported(x, act);
  const Rows r = rows_of(x);
  if (r.m == 0) throw ValueError("cpu::batch_norm_activation: no rows to take statistics over");
  BatchNormTrainingResult out{core::make_tensor(x.shape(), x.dtype(), Device::cpu()),
                              stat_tensor(r.c), stat_tensor(r.c)};
  if (x.numel() == 0) return out;
  const Tensor xc = x.contiguous();
  dispatch_storage(x.dtype(), [&]<typename T>() {
    float* mean = out.mean.data<float>();
    float* variance = out.variance.data<float>();
    batch_statistics(xc.data<T>(), r, mean, variance);
    const Affine a = affine_of(std::vector<float>(mean, mean + r.c),
                               std::vector<float>(variance, variance + r.c), gamma, beta, epsilon);
    forward(xc.data<T>(), r, a, act, out.y.data<T>());
  });
  return out;
}

Tensor batch_norm_activation_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       const Tensor& mean, const Tensor& variance, double epsilon,
                                       UnaryOp act) {
  check_supported(x, act);
  Tensor y = core::make_tensor(x.shape(), x.dtype(), Device::cpu());
  if (x.numel() == 0) return y;
  const Tensor xc = x.contiguous();
  const Affine a =
      affine_of(mean.to_vector<float>(), variance.to_vector<float>(), gamma, beta, epsilon);
  dispatch_storage(x.dtype(),
                   [&]<typename T>() { forward(xc.data<T>(), rows_of(x), a, act, y.data<T>()); });
  return y;
}

BatchNormGradients batch_norm_activation_backward(const Tensor& dy, const Tensor& x,
                                                  const Tensor& gamma, const Tensor& beta,
                                                  const Tensor& mean, const Tensor& variance,
                                                  double epsilon, BatchNormStats stats,
                                                  UnaryOp act) {
  check_supported(x, act);
  if (dy.dtype() != x.dtype() || dy.shape() != x.shape()) {
    throw Error("cpu::batch_norm_activation_backward: the gradient must have x's shape and dtype");
  }
  const Rows r = rows_of(x);
  BatchNormGradients out{core::make_tensor(x.shape(), x.dtype(), Device::cpu()), stat_tensor(r.c),
                         stat_tensor(r.c)};
  if (x.numel() == 0) {
    std::fill_n(out.dgamma.data<float>(), r.c, 0.0f);
    std::fill_n(out.dbeta.data<float>(), r.c, 0.0f);
    return out;
  }
  const std::vector<float> var = variance.to_vector<float>();
  const Affine a = affine_of(mean.to_vector<float>(), var, gamma, beta, epsilon);
  const std::vector<float> inv_std = inverse_std(var, static_cast<float>(epsilon));
  const Tensor xc = x.contiguous(), gc = dy.contiguous();
  dispatch_storage(x.dtype(), [&]<typename T>() {
    backward(gc.data<T>(), xc.data<T>(), r, a, inv_std, stats, act, out.dx.data<T>(),
             out.dgamma.data<float>(), out.dbeta.data<float>());
  });
  return out;
}

}  // namespace mixprec::cpu
