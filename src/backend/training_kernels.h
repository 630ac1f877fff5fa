// Optimizer updates, gradient preparation and loss scaling of one device kind.
#pragma once

namespace mixprec {

struct TrainingKernels {
  // Entries are added as the ops move behind the interface (issue 10).
  int unused = 0;
};

}  // namespace mixprec
