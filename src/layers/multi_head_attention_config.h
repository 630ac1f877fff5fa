// The config reader's access to MultiHeadAttention's recorded use_causal_mask (a call argument
// in Keras, kept by the layer here: include/mixprec/layers/multi_head_attention.h).
#pragma once

#include "mixprec/layers/layer.h"

namespace mixprec::layers::detail {

// Sets the use_causal_mask of `layer`'s symbolic calls (a MultiHeadAttention).
void set_attention_causal(const Layer& layer, bool causal);

}  // namespace mixprec::layers::detail
