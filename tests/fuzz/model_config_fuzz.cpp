// libFuzzer target: model_from_json and compile_options_from_json must build or throw a
// mixprec::Error. Tight limits keep a valid input from building a large model (the reader's
// refusal of huge ones is tested in tests/unit/model_config_errors_test.cpp).
#include <cstddef>
#include <cstdint>
#include <string>

#include "mixprec/error.h"
#include "mixprec/models/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    (void)mixprec::model_from_json(text, {.max_params = 100000, .max_extent = 4096});
  } catch (const mixprec::Error&) {
  }
  try {
    (void)mixprec::compile_options_from_json(text);
  } catch (const mixprec::Error&) {
  }
  return 0;
}
