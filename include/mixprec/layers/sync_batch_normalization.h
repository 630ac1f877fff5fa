// SyncBatchNormalization: a BatchNormalization whose training-mode statistics are those of the
// global batch of the process group (mixprec::distributed), TensorFlow's SyncBatchNormalization.
// It is BatchNormalization with options.synchronized = true (Keras 3 spells it
// BatchNormalization(synchronized=True)); its config is a BatchNormalization's with
// "synchronized": true, and it reads back as a BatchNormalization handle. See
// include/mixprec/layers/batch_normalization.h for the semantics.
#pragma once

#include "mixprec/layers/batch_normalization.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

class SyncBatchNormalization : public BatchNormalization {
 public:
  // options.synchronized is set to true whatever it holds.
  explicit SyncBatchNormalization(BatchNormalizationOptions options = {});
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
