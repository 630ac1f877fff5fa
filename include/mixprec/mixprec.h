// mixprec: mixed-precision training of neural networks in C++. Include this one header.
#pragma once

#include "mixprec/autograd.h"
#include "mixprec/bfloat16.h"
#include "mixprec/convert.h"
#include "mixprec/creation.h"
#include "mixprec/data/dataset.h"
#include "mixprec/data/fashion_mnist.h"
#include "mixprec/data/idx.h"
#include "mixprec/device.h"
#include "mixprec/dtype.h"
#include "mixprec/error.h"
#include "mixprec/float16.h"
#include "mixprec/memory.h"
#include "mixprec/ops.h"
#include "mixprec/random.h"
#include "mixprec/shape.h"
#include "mixprec/tensor.h"
