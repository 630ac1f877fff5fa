// Every built-in layer, plus Input/KerasTensor and the Layer base (for mixprec.h).
#pragma once

#include "mixprec/layers/activation.h"
#include "mixprec/layers/batch_normalization.h"
#include "mixprec/layers/class_token.h"
#include "mixprec/layers/conv2d.h"
#include "mixprec/layers/cropping1d.h"
#include "mixprec/layers/dense.h"
#include "mixprec/layers/depthwise_conv2d.h"
#include "mixprec/layers/dropout.h"
#include "mixprec/layers/embedding.h"
#include "mixprec/layers/flatten.h"
#include "mixprec/layers/input_layer.h"
#include "mixprec/layers/keras_tensor.h"
#include "mixprec/layers/layer.h"
#include "mixprec/layers/layer_normalization.h"
#include "mixprec/layers/merge.h"
#include "mixprec/layers/multi_head_attention.h"
#include "mixprec/layers/pooling.h"
#include "mixprec/layers/position_embedding.h"
#include "mixprec/layers/reshape.h"
#include "mixprec/layers/resizing.h"
#include "mixprec/layers/reversible_embedding.h"
#include "mixprec/layers/rms_normalization.h"
#include "mixprec/layers/sync_batch_normalization.h"
#include "mixprec/layers/zero_padding2d.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

#pragma GCC visibility pop
