// libFuzzer target: mixprec::load_model on a saved-model directory whose config.json is the input
// (model.safetensors a valid file of a tiny Dense model, written once) must load or throw a
// mixprec::Error: the whole-document depth bound, the format checks, the model and compile
// configs read from inside it, the weights matched against the model it builds. The weights file
// bounds the parameters, so no valid input builds a large model.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_file.h"
#include "mixprec/error.h"
#include "mixprec/mixprec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool ready = [] {
    mixprec::clear_session();
    auto inputs = mixprec::Input({4});
    auto outputs = mixprec::layers::Dense(3, {.name = "dense"})(inputs);
    mixprec::Model model(inputs, outputs);
    model.save_weights(mixprec::fuzz::scratch_dir() / "model.safetensors");
    return true;
  }();
  (void)ready;
  mixprec::fuzz::write_input(data, size, "config.json");
  try {
    (void)mixprec::load_model(mixprec::fuzz::scratch_dir());
  } catch (const mixprec::Error&) {
  }
  return 0;
}
