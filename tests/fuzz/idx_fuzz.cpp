// libFuzzer target: data::read_idx on the input (plain or gzip) must load it or throw a
// mixprec::Error. The payload cap is lowered so that a header claiming gigabytes is refused
// before allocation, as the default cap refuses absurd sizes.
#include <cstddef>
#include <cstdint>

#include "fuzz_file.h"
#include "mixprec/data/idx.h"
#include "mixprec/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = mixprec::fuzz::write_input(data, size, "input.idx");
  try {
    (void)mixprec::data::read_idx(path.string(), {.max_bytes = 64u << 20});
  } catch (const mixprec::Error&) {
  }
  return 0;
}
