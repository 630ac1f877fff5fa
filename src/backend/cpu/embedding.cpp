// CPU embedding gather and deterministic scatter-add (see embedding.h).
#include "backend/cpu/embedding.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "core/tensor_impl.h"
#include "mixprec/convert.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

// Below this many output elements the loops run on one thread.
constexpr std::int64_t kParallelElements = std::int64_t{1} << 15;

template <typename F>
void dispatch_ids(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::int32: f.template operator()<std::int32_t>(); return;
    case DType::int64: f.template operator()<std::int64_t>(); return;
    default: core::throw_unsupported_dtype(op, dtype, "int32, int64");
  }
}

// n values from S to D, each rounded once (a plain copy for one type).
template <typename S, typename D>
void convert_row(const S* src, D* dst, std::int64_t n) {
  if constexpr (std::is_same_v<S, D>) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(S));
  } else if constexpr (std::is_same_v<S, float> &&
                       (std::is_same_v<D, float16> || std::is_same_v<D, bfloat16>)) {
    convert(src, dst, static_cast<std::size_t>(n));
  } else if constexpr (std::is_same_v<D, float> &&
                       (std::is_same_v<S, float16> || std::is_same_v<S, bfloat16>)) {
    convert(src, dst, static_cast<std::size_t>(n));
  } else {
    // float32 <-> float64 and 16-bit -> float64 (exact through float), float64 -> float32 (one
    // rounding); the op layer never asks for float64 -> 16-bit.
    for (std::int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<S, float16> || std::is_same_v<S, bfloat16>) {
        dst[i] = static_cast<D>(static_cast<float>(src[i]));
      } else if constexpr (std::is_same_v<D, float16> || std::is_same_v<D, bfloat16>) {
        dst[i] = D(static_cast<float>(src[i]));
      } else {
        dst[i] = static_cast<D>(src[i]);
      }
    }
  }
}

std::string shape_string(const Tensor& ids) { return ids.shape().to_string(); }

}  // namespace

void check_embedding_ids(const char* op, const Tensor& ids, std::int64_t vocab) {
  const Tensor ic = ids.contiguous();
  dispatch_ids(ids.dtype(), op, [&]<typename I>() {
    const I* p = ic.data<I>();
    const std::int64_t n = ic.numel();
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t id = static_cast<std::int64_t>(p[i]);
      if (id < 0 || id >= vocab) {
        throw ValueError(std::string(op) + ": id " + std::to_string(id) + " at flat position " +
                         std::to_string(i) + " of ids " + shape_string(ids) +
                         " is outside the vocabulary [0, " + std::to_string(vocab) +
                         "); check the tokenizer's vocabulary size against the embedding's "
                         "input_dim");
      }
    }
  });
}

Tensor embedding_gather(const Tensor& table, const Tensor& ids, DType out_dtype) {
  const std::int64_t vocab = table.dim(0), c = table.dim(1);
  check_embedding_ids("embedding_lookup", ids, vocab);
  std::vector<std::int64_t> dims(ids.shape().begin(), ids.shape().end());
  dims.push_back(c);
  Tensor out = core::make_tensor(Shape(dims), out_dtype, Device::cpu());
  const std::int64_t n = ids.numel();
  if (n == 0 || c == 0) return out;
  const Tensor tc = table.contiguous(), ic = ids.contiguous();
  dispatch_ids(ids.dtype(), "embedding_lookup", [&]<typename I>() {
    const I* pid = ic.data<I>();
    core::dispatch_floating(table.dtype(), "embedding_lookup", [&]<typename S>() {
      core::dispatch_floating(out_dtype, "embedding_lookup", [&]<typename D>() {
        const S* src = tc.data<S>();
        D* dst = out.data<D>();
#pragma omp parallel for schedule(static) if (n * c >= kParallelElements)
        for (std::int64_t i = 0; i < n; ++i) {
          convert_row(src + static_cast<std::int64_t>(pid[i]) * c, dst + i * c, c);
        }
      });
    });
  });
  return out;
}

Tensor embedding_scatter_add(const Tensor& g, const Tensor& ids, std::int64_t vocab,
                             DType table_dtype) {
  const std::int64_t c = g.dim(-1), n = ids.numel();
  Tensor out = core::make_tensor(Shape{vocab, c}, table_dtype, Device::cpu());
  std::memset(out.data_ptr(), 0, out.nbytes());
  if (n == 0 || c == 0 || vocab == 0) return out;
  const Tensor gc = g.contiguous(), ic = ids.contiguous();
  // Stable counting sort of the positions by id: offsets (vocab + 1), positions in id order with
  // each id's positions increasing. Out-of-range ids are left out.
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(vocab) + 1, 0);
  std::vector<std::int64_t> order;
  dispatch_ids(ids.dtype(), "embedding_lookup", [&]<typename I>() {
    const I* pid = ic.data<I>();
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t id = static_cast<std::int64_t>(pid[i]);
      if (id >= 0 && id < vocab) ++offsets[static_cast<std::size_t>(id) + 1];
    }
    for (std::int64_t v = 0; v < vocab; ++v) {
      offsets[static_cast<std::size_t>(v) + 1] += offsets[static_cast<std::size_t>(v)];
    }
    order.resize(static_cast<std::size_t>(offsets.back()));
    std::vector<std::int64_t> next(offsets.begin(), offsets.end() - 1);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t id = static_cast<std::int64_t>(pid[i]);
      if (id >= 0 && id < vocab) order[static_cast<std::size_t>(next[id]++)] = i;
    }
  });
  core::dispatch_floating(g.dtype(), "embedding_lookup", [&]<typename G>() {
    core::dispatch_floating(table_dtype, "embedding_lookup", [&]<typename T>() {
      using P = core::compute_t<T>;
      const G* pg = gc.data<G>();
      T* dst = out.data<T>();
#pragma omp parallel for schedule(dynamic, 64) if (n * c >= kParallelElements)
      for (std::int64_t v = 0; v < vocab; ++v) {
        const std::int64_t first = offsets[static_cast<std::size_t>(v)];
        const std::int64_t last = offsets[static_cast<std::size_t>(v) + 1];
        if (first == last) continue;
        std::vector<P> acc(static_cast<std::size_t>(c), P(0)), row(acc.size());
        for (std::int64_t k = first; k < last; ++k) {
          convert_row(pg + order[static_cast<std::size_t>(k)] * c, row.data(), c);
#pragma omp simd
          for (std::int64_t j = 0; j < c; ++j) acc[j] += row[j];
        }
        convert_row(acc.data(), dst + v * c, c);
      }
    });
  });
  return out;
}

}  // namespace mixprec::cpu
