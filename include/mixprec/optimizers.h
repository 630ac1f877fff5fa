// The optimizer family (keras.optimizers): the Optimizer handle, SGD, Adam, AdamW, RMSprop and the
// learning-rate schedules. LossScaleOptimizer lives in mixprec/mixed_precision/.
#pragma once

#include "mixprec/optimizers/adam.h"
#include "mixprec/optimizers/optimizer.h"
#include "mixprec/optimizers/rmsprop.h"
#include "mixprec/optimizers/schedules.h"
#include "mixprec/optimizers/sgd.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

#pragma GCC visibility pop
