// libFuzzer target: the CIFAR-100 binary reader on the input as train.bin (test.bin a valid
// one-record file) must load it or throw a mixprec::Error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_file.h"
#include "mixprec/data/cifar.h"
#include "mixprec/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool ready = [] {
    std::string record(3074, '\1');
    record[0] = 0;
    record[1] = 0;
    mixprec::fuzz::write_input(reinterpret_cast<const std::uint8_t*>(record.data()), record.size(),
                               "test.bin");
    return true;
  }();
  (void)ready;
  mixprec::fuzz::write_input(data, size, "train.bin");
  try {
    (void)mixprec::data::load_cifar100(mixprec::fuzz::scratch_dir().string());
  } catch (const mixprec::Error&) {
  }
  return 0;
}
