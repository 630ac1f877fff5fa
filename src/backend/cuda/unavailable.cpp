// A build without the CUDA backend (MIXPREC_CUDA=OFF, no nvcc, or a sanitizer build) compiles this
// file instead of the rest of src/backend/cuda: the public CUDA functions report no GPU, CUDA
// storage cannot be allocated (a DeviceError naming the device), and the backend's entry points,
// which the ops call only for CUDA tensors (that cannot exist here), throw the same error.
#include <atomic>
#include <string>

#include "backend/cuda/batch_norm.h"
#include "backend/cuda/binary.h"
#include "backend/cuda/cast.h"
#include "backend/cuda/concat.h"
#include "backend/cuda/conv.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/depthwise.h"
#include "backend/cuda/dropout.h"
#include "backend/cuda/image.h"
#include "backend/cuda/indexing.h"
#include "backend/cuda/matmul.h"
#include "backend/cuda/pooling.h"
#include "backend/cuda/reduce.h"
#include "backend/cuda/select.h"
#include "backend/cuda/softmax.h"
#include "backend/cuda/transfer.h"
#include "backend/cuda/unary.h"
#include "core/allocator.h"
#include "core/physical_devices_registry.h"
#include "mixprec/cuda.h"
#include "mixprec/error.h"

namespace mixprec {

namespace {

[[noreturn]] void no_backend(const std::string& what) {
  throw DeviceError(what +
                    ": this build of mixprec has no CUDA backend; use --device cpu (or "
                    "rebuild with the CUDA toolkit installed and -DMIXPREC_CUDA=ON)");
}


}  // namespace


namespace cuda {


Tensor unary(UnaryOp, const Tensor& x) { no_backend("unary op on " + x.device().to_string()); }
Tensor unary_backward(UnaryOp, const Tensor&, const Tensor& x, const Tensor&) {
  no_backend("unary op on " + x.device().to_string());
}
Tensor binary(BinaryOp, const Tensor& a, const Tensor&) {
  no_backend("binary op on " + a.device().to_string());
}
Tensor compare(CompareOp, const Tensor& a, const Tensor&) {
  no_backend("compare on " + a.device().to_string());
}
Tensor where(const Tensor&, const Tensor& a, const Tensor&) {
  no_backend("where on " + a.device().to_string());
}
Tensor is_finite(const Tensor& x) { no_backend("is_finite on " + x.device().to_string()); }
bool all_finite(const Tensor& x) { no_backend("all_finite on " + x.device().to_string()); }
Tensor reduce(ReduceOp, const Tensor& x, const std::vector<bool>&, double) {
  no_backend("reduction on " + x.device().to_string());
}
Tensor softmax_forward(SoftmaxKind, const Tensor& x, int) {
  no_backend("softmax on " + x.device().to_string());
}
Tensor softmax_backward(SoftmaxKind, const Tensor&, const Tensor& y, int) {
  no_backend("softmax on " + y.device().to_string());
}
Tensor cast(const Tensor& x, DType) { no_backend("cast on " + x.device().to_string()); }
void concat(const std::vector<Tensor>&, int, const Tensor& out) {
  no_backend("concat on " + out.device().to_string());
}
std::vector<Tensor> split(const Tensor& g, int, const std::vector<std::int64_t>&,
                          const std::vector<bool>&) {
  no_backend("split on " + g.device().to_string());
}
void argmax(const Tensor& x, int, const Tensor&) {
  no_backend("argmax on " + x.device().to_string());
}
void copy_strided(const Tensor& src, const Tensor&) {
  no_backend("copy on " + src.device().to_string());
}
Tensor contiguous(const Tensor& x) { no_backend("copy on " + x.device().to_string()); }
void fill(const Tensor& t, double) { no_backend("fill on " + t.device().to_string()); }
Tensor full(const Shape&, double, DType, Device device) {
  no_backend("cannot allocate on " + device.to_string());
}
Tensor to_device(const Tensor& src, Device target) {
  no_backend("cannot copy from " + src.device().to_string() + " to " + target.to_string());
}
void copy_host_to_device(Device device, void*, const void*, std::size_t) {
  no_backend("cannot copy to " + device.to_string());
}
void copy_device_to_host(Device device, void*, const void*, std::size_t) {
  no_backend("cannot copy from " + device.to_string());
}
Tensor matmul(const Tensor& a, const Tensor&, Transpose, Transpose, DType, Accumulation) {
  no_backend("matmul on " + a.device().to_string());
}
Tensor matmul(const Tensor& a, const Tensor&, Transpose, Transpose) {
  no_backend("matmul on " + a.device().to_string());
}
MatmulCacheStats matmul_cache_stats() { return {}; }

}  // namespace cuda

// The matmul epilogue, convolution, depthwise, batch-norm, pooling and image functions are
// reached only through the CUDA NnKernels table (backend/cuda/nn_kernels.cpp), which a build
// without CUDA does not have: no stubs. The statistics stay for tools that print them.

namespace cuda {

ConvCacheStats conv_cache_stats() { return {}; }

}  // namespace cuda

// ---- one_hot and dropout (backend/cuda/{indexing,dropout}.h; called by ops/indexing.cpp and
// layers/dropout.cpp for CUDA tensors only) ----

namespace cuda {

void one_hot(const Tensor& indices, std::int64_t, const Tensor&) {
  no_backend("one_hot on " + indices.device().to_string());
}
Tensor dropout_apply(const Tensor& x, std::uint64_t, std::uint64_t, double) {
  no_backend("dropout on " + x.device().to_string());
}

}  // namespace cuda

}  // namespace mixprec
