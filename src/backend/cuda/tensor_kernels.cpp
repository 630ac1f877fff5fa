// The CUDA backend's TensorKernels table (backend/tensor_kernels.h): own kernels in kernels/*.cu,
// enqueued on the device's compute stream.
#include "backend/tensor_kernels.h"

#include "backend/cuda/binary.h"
#include "backend/cuda/cast.h"
#include "backend/cuda/concat.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/dropout.h"
#include "backend/cuda/indexing.h"
#include "backend/cuda/reduce.h"
#include "backend/cuda/select.h"
#include "backend/cuda/softmax.h"
#include "backend/cuda/sparse_crossentropy.h"
#include "backend/cuda/unary.h"

namespace mixprec::cuda {

extern const TensorKernels kTensorKernels;
const TensorKernels kTensorKernels{
    .unary = unary,
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
    .copy = copy_strided,
    .fill = fill,
    .concat = concat,
    .split = split,
    .argmax = argmax,
    .one_hot = static_cast<void (*)(const Tensor&, std::int64_t, const Tensor&)>(one_hot),
    .dropout = static_cast<Tensor (*)(const Tensor&, std::uint64_t, std::uint64_t, double)>(
        dropout_apply)};

}  // namespace mixprec::cuda
