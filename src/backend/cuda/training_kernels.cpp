// The cuda backend's TrainingKernels table (backend/training_kernels.h): the Tensor-level entries
// that build the multi-tensor launch tables (optimizers.h) and enqueue the kernels of
// kernels/optimizers.cu on the compute stream. Nothing here waits for the GPU except
// sums_of_squares and read_loss_scale_state.
#include "backend/training_kernels.h"

#include <algorithm>
#include <string>

#include "backend/cuda/context.h"
#include "backend/cuda/optimizers.h"
#include "backend/cuda/transfer.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cuda {

namespace {

using kernel_math::LossScaleState;

// The device pointer of a tensor seen through a const handle (handles share their storage).
void* pointer(const Tensor& t) { return Tensor(t).data_ptr(); }
LossScaleState* state_of(const Tensor& state) {
  return static_cast<LossScaleState*>(pointer(state));
}
int* found_inf_of(const Tensor& state) {
  return reinterpret_cast<int*>(static_cast<char*>(pointer(state)) + kernel_math::kFoundInfOffset);
}

void multi_tensor_update(const kernel_math::UpdateRule& rule,
                         std::span<const UpdateOperand> operands, const Tensor& found_inf) {
  if (operands.empty()) return;
  const int slots = kernel_math::update_slot_count(rule.kind);
  std::vector<void*> table_operands[5];
  std::vector<std::int64_t> numels;
  std::vector<float> clip_scales;
  for (const UpdateOperand& op : operands) {
    table_operands[0].push_back(pointer(op.gradient));
    table_operands[1].push_back(pointer(op.variable));
    for (int k = 0; k < kernel_math::kMaxUpdateSlots; ++k) {
      const Tensor& slot = op.slots[static_cast<std::size_t>(k)];
      if (k < slots && !slot.defined()) {
        throw ValueError("multi_tensor_update: a variable lacks slot " + std::to_string(k) +
                         " of its update (" + std::to_string(slots) + " slots)");
      }
      table_operands[2 + k].push_back(k < slots ? pointer(slot) : nullptr);
    }
    numels.push_back(op.variable.numel());
    clip_scales.push_back(op.clip_scale);
  }
  const std::vector<MultiTensorLaunch> launches = plan_multi_tensor(numels);
  if (launches.empty()) return;
  const int* flag = found_inf.defined() ? static_cast<const int*>(found_inf.data_ptr()) : nullptr;
  StreamScope scope(operands[0].variable.device());
  for (const MultiTensorLaunch& launch : launches) {
    kernels::multi_tensor_update(
        rule, make_multi_tensor_table(launch, table_operands, numels, clip_scales), flag,
        scope.stream());
  }
}

// The defined gradients as contiguous tensors on `device`, with their indices.
struct GradientList {
  std::vector<std::size_t> index;
  std::vector<Tensor> tensors;
};

GradientList contiguous_gradients(Device device, const std::vector<Tensor>& grads) {
  GradientList list;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined()) continue;
    if (!(g.device() == device)) {
      throw DeviceError("LossScaleOptimizer: gradient " + std::to_string(i) + " is on " +
                        g.device().to_string() + " but the loss-scale state is on " +
                        device.to_string() + "; keep every gradient on the variables' device");
    }
    if (!is_floating(g.dtype())) {
      throw DTypeError("LossScaleOptimizer: gradient " + std::to_string(i) + " is " +
                       std::string(dtype_name(g.dtype())) + "; gradients must be floating point");
    }
    list.index.push_back(i);
    list.tensors.push_back(g.detach().contiguous());
  }
  return list;
}

// Clears the state's found_inf, then launches the unscale/check kernel over `list`, one dtype
// group and table at a time; outputs[i] (may be empty: check only) receives the float32 results.
void launch_unscale(const Tensor& state, const GradientList& list,
                    const std::vector<Tensor>& outputs, const float* scale) {
  StreamScope scope(state.device());
  int* found_inf = found_inf_of(state);
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

std::vector<Tensor> unscale_and_check(const std::vector<Tensor>& grads, const Tensor& state) {
  const GradientList list = contiguous_gradients(state.device(), grads);
  std::vector<Tensor> outputs;
  outputs.reserve(list.tensors.size());
  for (const Tensor& g : list.tensors) {
    outputs.push_back(core::make_tensor(g.shape(), DType::float32, state.device()));
  }
  launch_unscale(state, list, outputs, static_cast<const float*>(pointer(state)));
  std::vector<Tensor> result(grads.size());
  for (std::size_t k = 0; k < list.index.size(); ++k) result[list.index[k]] = outputs[k];
  return result;
}

void check_finite(const std::vector<Tensor>& grads, const Tensor& state) {
  launch_unscale(state, contiguous_gradients(state.device(), grads), {}, nullptr);
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

void write_loss_scale_state(const Tensor& state, const LossScaleState& value) {
  StreamScope scope(state.device());
  kernels::loss_scale_set(state_of(state), value, scope.stream());
}

Tensor make_loss_scale_state(Device device, const LossScaleState& value) {
  Tensor state = core::make_tensor(Shape{6}, DType::int64, device);
  write_loss_scale_state(state, value);  // by kernel parameter: no host copy
  return state;
}

LossScaleState read_loss_scale_state(const Tensor& state) {
  LossScaleState value;
  copy_device_to_host(state.device(), &value, state.data_ptr(), sizeof value);
  return value;
}

void loss_scale_step(const Tensor& state, const LossScaleRule& rule) {
  StreamScope scope(state.device());
  kernels::loss_scale_update(state_of(state), rule.mode, rule.growth_steps, scope.stream());
}

// Up to kernels::kMaxMovingAverages operands per launch (BatchNormalization sends two).
void moving_average(std::span<const MovingAverageOperand> operands, double momentum) {
  for (std::size_t first = 0; first < operands.size(); first += kernels::kMaxMovingAverages) {
    kernels::MovingAverageTable table;
    const std::size_t n =
        std::min<std::size_t>(kernels::kMaxMovingAverages, operands.size() - first);
    for (std::size_t k = 0; k < n; ++k) {
      const MovingAverageOperand& op = operands[first + k];
      table.moving[k] = pointer(op.moving);
      table.value[k] = op.value.data_ptr();
      table.numel[k] = op.moving.numel();
      table.weight[k] = op.weight;
    }
    table.count = static_cast<int>(n);
    StreamScope scope(operands[first].moving.device());
    kernels::moving_average(operands[first].moving.dtype(), table, momentum, scope.stream());
  }
}

}  // namespace

extern const TrainingKernels kTrainingKernels;
const TrainingKernels kTrainingKernels{
    .multi_tensor_update = multi_tensor_update,
    .unscale_and_check = unscale_and_check,
    .check_finite = check_finite,
    .sums_of_squares = sums_of_squares,
    .make_loss_scale_state = make_loss_scale_state,
    .write_loss_scale_state = write_loss_scale_state,
    .read_loss_scale_state = read_loss_scale_state,
    .loss_scale_step = loss_scale_step,
    .moving_average = moving_average,
};

}  // namespace mixprec::cuda
