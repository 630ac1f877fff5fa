// Every built-in layer, plus Input/KerasTensor and the Layer base (for mixprec.h).
#pragma once

#include "mixprec/layers/activation.h"
#include "mixprec/layers/dense.h"
#include "mixprec/layers/dropout.h"
#include "mixprec/layers/flatten.h"
#include "mixprec/layers/input_layer.h"
#include "mixprec/layers/keras_tensor.h"
#include "mixprec/layers/layer.h"
#include "mixprec/layers/merge.h"
#include "mixprec/layers/reshape.h"
