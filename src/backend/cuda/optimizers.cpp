// Host side of the device loss scaling and optimizer updates (see optimizers.h): the launch
// planner, the per-step constants, and the Tensor-level entry points that build the launch tables.
#include "backend/cuda/optimizers.h"

#include <array>
#include <string>

#include "backend/cuda/context.h"
#include "backend/cuda/transfer.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cuda {

namespace {
// The device pointer of a tensor seen through a const handle (handles share their storage).
void* pointer(const Tensor& t) { return Tensor(t).data_ptr(); }
}  // namespace

std::vector<MultiTensorLaunch> plan_multi_tensor(const std::vector<std::int64_t>& numels,
                                                 int max_tensors, int max_blocks,
                                                 std::int64_t chunk) {
  if (max_tensors < 1 || max_tensors > kMultiTensorMaxTensors || max_blocks < 1 ||
      max_blocks > kMultiTensorMaxBlocks || chunk < 1) {
    throw ValueError("plan_multi_tensor: limits must be in [1, " +
                     std::to_string(kMultiTensorMaxTensors) + "] tensors and [1, " +
                     std::to_string(kMultiTensorMaxBlocks) +
                     "] blocks with a positive chunk, got " + std::to_string(max_tensors) + ", " +
                     std::to_string(max_blocks) + ", " + std::to_string(chunk));
  }
  std::vector<MultiTensorLaunch> launches;
  MultiTensorLaunch current;
  auto flush = [&] {
    if (!current.blocks.empty()) launches.push_back(std::move(current));
    current = MultiTensorLaunch{};
  };
  for (std::size_t i = 0; i < numels.size(); ++i) {
    const std::int64_t n = numels[i];
    if (n < 0) throw ValueError("plan_multi_tensor: negative element count " + std::to_string(n));
    const std::int64_t chunks = (n + chunk - 1) / chunk;
    if (chunks > std::int64_t{1} << 31) {
      throw ValueError("plan_multi_tensor: tensor " + std::to_string(i) + " has " +
                       std::to_string(n) + " elements, more than the 2^31 chunks a table indexes");
    }
    for (std::int64_t c = 0; c < chunks; ++c) {
      if (static_cast<int>(current.blocks.size()) == max_blocks) flush();
      if (current.tensors.empty() || current.tensors.back() != static_cast<int>(i)) {
        if (static_cast<int>(current.tensors.size()) == max_tensors) flush();
        current.tensors.push_back(static_cast<int>(i));
      }
      current.blocks.push_back({static_cast<int>(current.tensors.size()) - 1, c});
    }
  }
  flush();
  return launches;
}

void multi_tensor_update(Device device, const DeviceUpdate& update,
                         const std::vector<UpdateTensors>& variables, const int* found_inf) {
  const int slots = update_slot_count(update.kind);
  std::vector<void*> operands[5];
  std::vector<std::int64_t> numels;
  std::vector<float> clip_scales;
  for (const UpdateTensors& v : variables) {
    operands[0].push_back(const_cast<float*>(v.gradient));
    operands[1].push_back(v.variable);
    for (int k = 0; k < 3; ++k) {
      if (k < slots && v.slots[k] == nullptr) {
        throw ValueError("multi_tensor_update: a variable lacks slot " + std::to_string(k) +
                         " of its update (" + std::to_string(slots) + " slots)");
      }
      operands[2 + k].push_back(k < slots ? v.slots[k] : nullptr);
    }
    numels.push_back(v.numel);
    clip_scales.push_back(v.clip_scale);
  }
  const std::vector<MultiTensorLaunch> launches = plan_multi_tensor(numels);
  if (launches.empty()) return;
  StreamScope scope(device);
  for (const MultiTensorLaunch& launch : launches) {
    kernels::multi_tensor_update(update,
                                 make_multi_tensor_table(launch, operands, numels, clip_scales),
                                 found_inf, scope.stream());
  }
}

namespace {

// The defined gradients as contiguous tensors on `device`, with their indices.
struct GradientList {
  std::vector<std::size_t> index;
  std::vector<Tensor> tensors;
};

GradientList contiguous_gradients(Device device, const std::vector<Tensor>& grads,
                                  const char* who) {
  GradientList list;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined()) continue;
    if (!(g.device() == device)) {
      throw DeviceError(std::string(who) + ": gradient " + std::to_string(i) + " is on " +
                        g.device().to_string() + ", expected " + device.to_string() +
                        "; keep the gradients on the variables' device");
    }
    if (!is_floating(g.dtype())) {
      throw DTypeError(std::string(who) + ": gradient " + std::to_string(i) + " is " +
                       std::string(dtype_name(g.dtype())) + "; gradients must be floating point");
    }
    list.index.push_back(i);
    list.tensors.push_back(g.detach().contiguous());
  }
  return list;
}

// Launches the unscale/check kernel over `list`, one dtype group and table at a time; outputs[i]
// (may be empty: check only) receives the float32 results.
void launch_unscale(Device device, const GradientList& list, const std::vector<Tensor>& outputs,
                    const float* scale, int* found_inf) {
  StreamScope scope(device);
  check(cudaMemsetAsync(found_inf, 0, sizeof(int), scope.stream()), "clearing the found-inf flag");
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16, DType::float64}) {
    std::vector<void*> operands[2];
    std::vector<std::int64_t> numels;
    for (std::size_t k = 0; k < list.tensors.size(); ++k) {
      const Tensor& g = list.tensors[k];
      if (g.dtype() != dtype) continue;
      operands[0].push_back(pointer(g));
      operands[1].push_back(outputs.empty() ? nullptr : pointer(outputs[k]));
      numels.push_back(g.numel());
    }
    for (const MultiTensorLaunch& launch : plan_multi_tensor(numels)) {
      kernels::multi_tensor_unscale(dtype, make_multi_tensor_table(launch, operands, numels), scale,
                                    found_inf, scope.stream());
    }
  }
}

}  // namespace

std::vector<Tensor> unscale_and_check(Device device, const std::vector<Tensor>& grads,
                                      const float* scale, int* found_inf) {
  const GradientList list = contiguous_gradients(device, grads, "LossScaleOptimizer");
  std::vector<Tensor> outputs;
  outputs.reserve(list.tensors.size());
  for (const Tensor& g : list.tensors) {
    outputs.push_back(core::make_tensor(g.shape(), DType::float32, device));
  }
  launch_unscale(device, list, outputs, scale, found_inf);
  std::vector<Tensor> result(grads.size());
  for (std::size_t k = 0; k < list.index.size(); ++k) result[list.index[k]] = outputs[k];
  return result;
}

void check_finite(Device device, const std::vector<Tensor>& grads, int* found_inf) {
  launch_unscale(device, contiguous_gradients(device, grads, "LossScaleOptimizer"), {}, nullptr,
                 found_inf);
}

std::vector<double> sums_of_squares(Device device, const std::vector<Tensor>& tensors) {
  std::vector<void*> operands[1];
  std::vector<std::int64_t> numels;
  for (const Tensor& t : tensors) {
    if (t.defined() &&
        (t.dtype() != DType::float32 || !t.is_contiguous() || !(t.device() == device))) {
      throw ValueError("sums_of_squares expects contiguous float32 tensors on " +
                       device.to_string());
    }
    operands[0].push_back(t.defined() ? pointer(t) : nullptr);
    numels.push_back(t.defined() ? t.numel() : 0);
  }
  std::vector<double> sums(tensors.size(), 0.0);
  const std::vector<MultiTensorLaunch> launches = plan_multi_tensor(numels);
  std::int64_t total_blocks = 0;
  for (const MultiTensorLaunch& launch : launches) total_blocks += std::ssize(launch.blocks);
  if (total_blocks == 0) return sums;
  Tensor partials = core::make_tensor(Shape{total_blocks}, DType::float64, device);
  auto* out = static_cast<double*>(partials.data_ptr());
  {
    StreamScope scope(device);
    std::int64_t offset = 0;
    for (const MultiTensorLaunch& launch : launches) {
      kernels::multi_tensor_sum_of_squares(make_multi_tensor_table(launch, operands, numels),
                                           out + offset, scope.stream());
      offset += std::ssize(launch.blocks);
    }
  }
  std::vector<double> host(static_cast<std::size_t>(total_blocks));
  copy_device_to_host(device, host.data(), out, host.size() * sizeof(double));
  // Block partials added per tensor in launch and block order: a fixed order for fixed shapes.
  std::size_t b = 0;
  for (const MultiTensorLaunch& launch : launches) {
    for (const MultiTensorLaunch::Block& block : launch.blocks) {
      sums[static_cast<std::size_t>(launch.tensors[static_cast<std::size_t>(block.slot)])] +=
          host[b++];
    }
  }
  return sums;
}

Tensor make_loss_scale_state(Device device, const DeviceLossScale& initial) {
  static_assert(sizeof(DeviceLossScale) == 5 * sizeof(std::int64_t));
  Tensor state = core::make_tensor(Shape{5}, DType::int64, device);
  set_loss_scale_state(state, initial);
  return state;
}

void set_loss_scale_state(const Tensor& state, const DeviceLossScale& value) {
  StreamScope scope(state.device());
  kernels::loss_scale_set(static_cast<DeviceLossScale*>(pointer(state)), value, scope.stream());
}

DeviceLossScale read_loss_scale_state(const Tensor& state) {
  DeviceLossScale value;
  copy_device_to_host(state.device(), &value, state.data_ptr(), sizeof value);
  return value;
}

void update_loss_scale_state(const Tensor& state, LossScaleMode mode, std::int64_t growth_steps) {
  StreamScope scope(state.device());
  kernels::loss_scale_update(static_cast<DeviceLossScale*>(pointer(state)), mode, growth_steps,
                             scope.stream());
}

Tensor loss_scale_view(const Tensor& state) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = state.impl()->storage;
  impl->shape = Shape();
  impl->strides = {};
  impl->offset = 0;  // DeviceLossScale::scale is at byte 0
  impl->dtype = DType::float32;
  return Tensor(std::move(impl));
}

}  // namespace mixprec::cuda
