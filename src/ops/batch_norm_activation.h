// The fused batch normalization + activation op (internal: the functional model runs it for a
// BatchNormalization node whose only consumer is an Activation node), its on/off switch, and the
// argument checks it shares with batch_norm_training / batch_norm_inference (ops/batch_norm.cpp).
#pragma once

#include <optional>
#include <string_view>

#include "core/op_kinds.h"
#include "mixprec/nn_ops.h"
#include "mixprec/tensor.h"

namespace mixprec::ops {

// The activation the fused op applies for an Activation layer's name: relu, relu6, sigmoid,
// swish / silu; nullopt for every other name (those are not fused).
std::optional<UnaryOp> fusable_activation(std::string_view activation);

// Whether models fuse BatchNormalization + Activation: set_batch_norm_activation_fusion's value
// if one was set, else the environment (MIXPREC_FUSION=0 turns fusion off; default on).
bool batch_norm_activation_fusion_enabled();
// Overrides the environment (tests compare fused and unfused runs); nullopt restores it.
void set_batch_norm_activation_fusion(std::optional<bool> enabled);

// The checks of batch_norm_training (mean and variance null: batch statistics, at least one row)
// and batch_norm_inference (both given), throwing with `op` in the message.
void check_batch_norm_arguments(const char* op, const Tensor& x, const Tensor& gamma,
                                const Tensor& beta, const Tensor* mean, const Tensor* variance,
                                double epsilon);

// act(batch_norm_training(x, gamma, beta, epsilon).y) with the same statistics, differentiable in
// x, gamma and beta; one kernel where the backend has it (NnKernels::batch_norm_activation_*),
// else the two ops composed. act: relu, relu6, sigmoid or silu (ValueError otherwise).
BatchNormOutput batch_norm_activation_training(const Tensor& x, const Tensor& gamma,
                                               const Tensor& beta, double epsilon, UnaryOp act);

// act(batch_norm_inference(...)), likewise.
Tensor batch_norm_activation_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       const Tensor& moving_mean, const Tensor& moving_variance,
                                       double epsilon, UnaryOp act);

}  // namespace mixprec::ops
