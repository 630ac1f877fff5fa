// The CPU backend's TensorKernels table (backend/tensor_kernels.h): OpenMP loops over the
// elementwise machinery of elementwise.h, one file per op family.
#include "backend/tensor_kernels.h"

#include "backend/cpu/binary.h"
#include "backend/cpu/cast.h"
#include "backend/cpu/concat.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/dropout.h"
#include "backend/cpu/fill.h"
#include "backend/cpu/indexing.h"
#include "backend/cpu/reduce.h"
#include "backend/cpu/select.h"
#include "backend/cpu/softmax.h"
#include "backend/cpu/sparse_crossentropy.h"
#include "backend/cpu/unary.h"

namespace mixprec::cpu {

extern const TensorKernels kTensorKernels;
const TensorKernels kTensorKernels{.unary = unary,
                                   .unary_backward = unary_backward,
                                   .binary = binary,
                                   .add_relu = add_relu,
                                   .compare = compare,
                                   .where = where,
                                   .is_finite = is_finite,
                                   .all_finite = all_finite,
                                   .reduce = reduce,
                                   .softmax_forward = softmax_forward,
                                   .softmax_backward = softmax_backward,
                                   .sparse_crossentropy_forward = sparse_crossentropy_forward,
                                   .sparse_crossentropy_backward = sparse_crossentropy_backward,
                                   .cast = cast,
                                   .copy = copy,
                                   .fill = fill,
                                   .concat = concat,
                                   .split = split,
                                   .argmax = argmax,
                                   .one_hot = one_hot,
                                   .dropout = dropout};

}  // namespace mixprec::cpu
