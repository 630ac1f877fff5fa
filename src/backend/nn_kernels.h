// Matmul, convolution, pooling, batch normalization and image kernels of one device kind.
#pragma once

namespace mixprec {

struct NnKernels {
  // Entries are added as the ops move behind the interface (issue 10).
  int unused = 0;
};

}  // namespace mixprec
