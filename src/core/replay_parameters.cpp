// ReplayParameters (replay_parameters.h): the per-step values of a captured step, their buffer
// addresses and their recomputation before each replay.
#include "core/replay_parameters.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "mixprec/error.h"

#if MIXPREC_HAVE_CUDA
#include "backend/cuda/replay_words.h"
#endif

namespace mixprec::core {

namespace {

thread_local ReplayParameters* t_active = nullptr;

}  // namespace

ReplayParameters::ReplayParameters(Tensor buffer) : buffer_(std::move(buffer)) {
  if (!buffer_.defined() || buffer_.dtype() != DType::int64 || buffer_.numel() != kWords ||
      !buffer_.is_contiguous()) {
    throw ValueError("ReplayParameters: the buffer must be a contiguous int64 tensor of " +
                     std::to_string(kWords) + " elements");
  }
  device_ = buffer_.device();
  address_ = static_cast<char*>(buffer_.data_ptr());
}

ReplayParameters* ReplayParameters::active() { return t_active; }

void ReplayParameters::fail(std::string why) {
  if (failure_.empty()) failure_ = std::move(why);
}

const void* ReplayParameters::record(std::span<const std::uint64_t> value, Recompute recompute) {
  const std::size_t offset = words_.size();
  if (value.empty() || offset + value.size() > static_cast<std::size_t>(kWords)) {
    fail("the step's per-step values need more than the " + std::to_string(kWords) +
         " words of the replay buffer");
    return nullptr;
  }
  words_.insert(words_.end(), value.begin(), value.end());
  entries_.push_back({offset, value.size(), std::move(recompute)});
  char* at = address_ + offset * sizeof(std::uint64_t);
  if (device_.is_cpu()) std::memcpy(at, value.data(), value.size_bytes());
  return at;
}

std::uint64_t ReplayParameters::draw(Generator& generator) {
  const auto seen = [&](const auto& f) { return f.first == &generator; };
  if (std::find_if(first_states_.begin(), first_states_.end(), seen) == first_states_.end()) {
    first_states_.emplace_back(&generator, generator.state());
  }
  const std::uint64_t value = generator.next_u64();
  record_draw(generator, value);
  return value;
}

void ReplayParameters::restore_generators() const {
  for (const auto& [g, state] : first_states_) g->set_state(state);
}

void ReplayParameters::record_draw(Generator& generator, std::uint64_t value) {
  if (draws_.contains(value)) {
    fail("two random draws of the step gave the same value");
    return;
  }
  Generator* g = &generator;
  const std::uint64_t one[1] = {value};
  if (record(one, [g](std::span<std::uint64_t> out) { out[0] = g->next_u64(); }) == nullptr) {
    return;
  }
  draws_.emplace(value, words_.size() - 1);
  if (std::find(generators_.begin(), generators_.end(), g) == generators_.end()) {
    generators_.push_back(g);
  }
}

const std::uint64_t* ReplayParameters::draw_address(std::uint64_t value) const {
  const auto it = draws_.find(value);
  if (it == draws_.end()) return nullptr;
  return reinterpret_cast<const std::uint64_t*>(address_ + it->second * sizeof(std::uint64_t));
}

void ReplayParameters::refresh() {
  for (const Entry& e : entries_) {
    e.recompute(std::span<std::uint64_t>(words_.data() + e.offset, e.words));
  }
}

void ReplayParameters::upload() {
  if (words_.empty() || (uploads_ > 0 && words_ == uploaded_)) return;
  if (device_.is_cpu()) {
    std::memcpy(address_, words_.data(), words_.size() * sizeof(std::uint64_t));
  } else {
#if MIXPREC_HAVE_CUDA
    static_assert(cuda::kReplayWords == static_cast<std::size_t>(kWords));
    cuda::write_replay_words(device_, reinterpret_cast<std::uint64_t*>(address_), words_.data(),
                             words_.size());
#else
    throw DeviceError("ReplayParameters: " + device_.to_string() +
                      " needs the CUDA backend, which this build does not have");
#endif
  }
  uploaded_ = words_;
  ++uploads_;
}

ReplayRecording::ReplayRecording(ReplayParameters& parameters) {
  if (t_active != nullptr) {
    throw std::logic_error("ReplayRecording: a step is already being recorded on this thread");
  }
  t_active = &parameters;
}

ReplayRecording::~ReplayRecording() { t_active = nullptr; }

}  // namespace mixprec::core
