// Sparse class labels checked once, before fit() or evaluate() takes a step, against the model's
// output: a label out of range is reported at its index in the y the user passed, where the loss
// inside a step could only name its position in a shuffled batch.
#pragma once

#include "mixprec/models/model.h"
#include "models/training_state.h"

namespace mixprec::models {

// Under sparse_categorical_crossentropy, for a model with one output of C classes (its last
// axis) and integer labels y: every label in [0, C). ValueError naming `what` ("fit()",
// "evaluate()"), the sample's index in y, the label and the valid range otherwise. Anything else
// (another loss, several outputs, floating targets) is left to the loss.
void check_sparse_labels(const Model& model, const TrainingState& state, const Tensor& y,
                         const char* what, const char* y_name = "y");

}  // namespace mixprec::models
