// The optimizer family (keras.optimizers): the Optimizer handle, SGD, Adam, AdamW, RMSprop and the
// learning-rate schedules, and LossScaleOptimizer (declared in mixprec/mixed_precision/, its Keras
// home, and also named mixprec::optimizers::LossScaleOptimizer as in keras.optimizers).
#pragma once

#include "mixprec/mixed_precision/loss_scale_optimizer.h"
#include "mixprec/optimizers/adam.h"
#include "mixprec/optimizers/optimizer.h"
#include "mixprec/optimizers/rmsprop.h"
#include "mixprec/optimizers/schedules.h"
#include "mixprec/optimizers/sgd.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

#pragma GCC visibility pop
