// libFuzzer target: io::load_checkpoint of the input into a compiled model (a small Dense model
// under a LossScaleOptimizer around Adam, inside no fit()) must restore it or throw a
// mixprec::Error. Beyond the checkpoint target's header and state reading, this reaches the
// checks against the model: the variables' names, shapes and dtypes, the optimizer's kind, its
// slots and scalars (the loss scale and counters' ranges), the generators and the learning rate.
#include <cstddef>
#include <cstdint>

#include "fuzz_file.h"
#include "mixprec/error.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/mixprec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static mixprec::Model* model = [] {
    mixprec::clear_session();
    auto inputs = mixprec::Input({4});
    auto outputs = mixprec::layers::Dense(3, {.name = "dense"})(inputs);
    auto* m = new mixprec::Model(inputs, outputs);
    m->compile(
        {.optimizer = mixprec::mixed_precision::LossScaleOptimizer(mixprec::optimizers::Adam()),
         .loss = std::string("sparse_categorical_crossentropy")});
    return m;
  }();
  const auto path = mixprec::fuzz::write_input(data, size, "input.safetensors");
  try {
    (void)mixprec::io::load_checkpoint(*model, path);
  } catch (const mixprec::Error&) {
  }
  return 0;
}
