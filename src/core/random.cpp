#include "mixprec/random.h"

#include <cmath>
#include <numbers>

#include "mixprec/error.h"

namespace mixprec {

namespace {
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Generator::Generator(std::uint64_t seed_value) { seed(seed_value); }

void Generator::seed(std::uint64_t seed_value) {
  std::uint64_t state = seed_value;
  for (auto& s : s_) s = splitmix64(state);
  has_spare_ = false;
}

std::uint64_t Generator::next_u64() {  // xoshiro256**
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Generator::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Generator::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * std::numbers::pi * u2;
  spare_ = radius * std::sin(angle);
  has_spare_ = true;
  return radius * std::cos(angle);
}

GeneratorState Generator::state() const {
  GeneratorState st;
  for (int i = 0; i < 4; ++i) st.words[static_cast<std::size_t>(i)] = s_[i];
  st.has_spare = has_spare_;
  st.spare = spare_;
  return st;
}

void Generator::set_state(const GeneratorState& state) {
  if (state.words[0] == 0 && state.words[1] == 0 && state.words[2] == 0 && state.words[3] == 0) {
    throw ValueError(
        "Generator::set_state: the state is all zero, which xoshiro256** never "
        "reaches; pass a state taken with Generator::state()");
  }
  for (int i = 0; i < 4; ++i) s_[i] = state.words[static_cast<std::size_t>(i)];
  has_spare_ = state.has_spare;
  spare_ = state.spare;
}

std::uint64_t Generator::below(std::uint64_t n) {
  if (n <= 1) return 0;
  // Rejection sampling on the top of the range keeps every value equally likely.
  const std::uint64_t limit = ~0ull - (~0ull % n);
  std::uint64_t x = next_u64();
  while (x >= limit) x = next_u64();
  return x % n;
}

Generator& default_generator() {
  static Generator generator;
  return generator;
}

void set_seed(std::uint64_t seed_value) { default_generator().seed(seed_value); }

}  // namespace mixprec
