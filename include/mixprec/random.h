// Seeded random number generation. The same seed gives the same numbers on every run and every
// platform: the generator (splitmix64 seeding a xoshiro256**) and the float transforms are our own,
// not std:: distributions, whose output is implementation-defined.
#pragma once

#include <array>
#include <cstdint>

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

// The whole state of a Generator: restoring it continues the exact sequence (checkpoints).
struct GeneratorState {
  std::array<std::uint64_t, 4> words{};  // xoshiro256** state
  bool has_spare = false;                // normal() keeps the second Box-Muller output
  double spare = 0.0;
};

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0x6d697870726563ull);
  void seed(std::uint64_t seed);
  std::uint64_t next_u64();
  double uniform();                      // [0, 1), 53 random bits
  double normal();                       // standard normal (Box-Muller, both outputs used)
  std::uint64_t below(std::uint64_t n);  // uniform integer in [0, n), unbiased

  GeneratorState state() const;
  // ValueError for an all-zero xoshiro state (the one state the generator cannot leave).
  void set_state(const GeneratorState& state);

 private:
  std::uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0.0;
};

// The process-wide default generator used when no generator is passed.
Generator& default_generator();
// Reseeds the default generator (mixprec::set_seed(42) makes a program's random tensors
// repeatable).
void set_seed(std::uint64_t seed);

}  // namespace mixprec

#pragma GCC visibility pop
