// Elementwise, comparison, reduction, softmax, cast, copy, concat and indexing kernels of one
// device kind.
#pragma once

namespace mixprec {

struct TensorKernels {
  // Entries are added as the ops move behind the interface (issue 10).
  int unused = 0;
};

}  // namespace mixprec
