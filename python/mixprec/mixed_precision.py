"""Mixed precision (keras.mixed_precision): dtype policies and loss scaling.

    mixed_precision.set_global_policy("mixed_float16")    # layers created afterwards use it
    policy = mixed_precision.global_policy()               # .compute_dtype, .variable_dtype
    optimizer = mixed_precision.LossScaleOptimizer(mixprec.optimizers.RMSprop())

set_policy is TensorFlow 2.1's name of set_global_policy (the guide's experimental API).
"""

from ._mixprec import (
    Policy,
    fp16_conv_use_fp32_compute,
    fp16_matmul_use_fp32_compute,
    global_policy,
    pick_policy_for_device,
    set_fp16_conv_use_fp32_compute,
    set_fp16_matmul_use_fp32_compute,
    set_global_policy,
)
from ._mixprec.optimizers import LossScaleOptimizer

set_policy = set_global_policy

__all__ = ["LossScaleOptimizer", "Policy", "fp16_conv_use_fp32_compute",
           "fp16_matmul_use_fp32_compute", "global_policy", "pick_policy_for_device",
           "set_fp16_conv_use_fp32_compute", "set_fp16_matmul_use_fp32_compute",
           "set_global_policy", "set_policy"]
