// The per-step values of a training step captured as a CUDA graph, kept in device
// memory so that every replay uses its own step's values instead of the capture's.
//
// A graph replays its kernels with the arguments of the capture. Two host values of fit()'s step
// change every step: the optimizer's update constants (Adam's and AdamW's bias correction, a
// learning-rate schedule's rate: optimizers/update_constants.h, computed on the host in double
// and rounded to float once) and dropout's keys (one next_u64() of the layer's generator per call,
// layers/dropout.cpp). While GraphedTrainStep captures, the code that computes such a value
// records it here (ReplayParameters::active()) with a function that recomputes it, and passes the
// kernel the value's address in the buffer instead of the value; the kernel reads it there when it
// runs. Before each replay the host recomputes every value, in the order recorded, exactly as the
// eager step would have at that step (the same host code, the same double arithmetic: the floats
// are bit-identical by construction), and writes them into the buffer, stream-ordered before the
// graph (upload()). The draws advance the generators as the eager step's draws would, so after N
// replayed steps every generator is where N eager steps leave it (checkpoints resume exactly).
//
// PyTorch does the same for its Philox dropout under graphs (the seed and offset live in device
// tensors that CUDAGraph::replay() fills from the host generator before each launch). Computing
// Adam's bias correction on the device instead would not give today's bits: the CUDA pow() is not
// the host's.
//
// Host-only bookkeeping (tested on the CPU: tests/unit/replay_parameters_test.cpp); the buffer is
// the only device memory, written by upload() (a kernel that takes the words by parameter on a
// GPU, so nothing on the host must outlive the call; a plain copy for a CPU buffer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mixprec/device.h"
#include "mixprec/random.h"
#include "mixprec/tensor.h"

namespace mixprec::core {

class ReplayParameters {
 public:
  // The buffer's size in 8-byte words: 2 KiB, written by one kernel parameter on a GPU. A step
  // that records more fails (failure()): it is not replayed.
  static constexpr std::int64_t kWords = 256;
  // Writes the value's words for the step about to be replayed.
  using Recompute = std::function<void(std::span<std::uint64_t> out)>;

  // `buffer`: a contiguous int64 tensor of kWords elements (GraphedTrainStep's, on the step's
  // device), which must outlive this object and every replay that reads it.
  explicit ReplayParameters(Tensor buffer);

  // The recorder of the capture running on this thread (ReplayRecording), or nullptr.
  static ReplayParameters* active();

  Device device() const { return device_; }
  const Tensor& buffer() const { return buffer_; }

  // Records a value of value.size() words and returns its address in the buffer, or nullptr when
  // the buffer is full (the caller then passes the value itself, and failure() says why the step
  // cannot be replayed). `recompute` is called by refresh(). A CPU buffer receives the value at
  // once (the CPU runs what it records).
  const void* record(std::span<const std::uint64_t> value, Recompute recompute);
  // The same for a trivially copyable value (its bytes, padded with zeros to whole words).
  template <typename T>
  const T* record_value(const T& value, std::function<T()> recompute) {
    static_assert(std::is_trivially_copyable_v<T> && alignof(T) <= 8);
    constexpr std::size_t words = (sizeof(T) + 7) / 8;
    std::uint64_t packed[words] = {};
    std::memcpy(packed, &value, sizeof(T));
    return static_cast<const T*>(
        record(packed, [recompute = std::move(recompute)](std::span<std::uint64_t> out) {
          const T next = recompute();
          std::uint64_t bytes[words] = {};
          std::memcpy(bytes, &next, sizeof(T));
          std::memcpy(out.data(), bytes, sizeof bytes);
        }));
  }
  // One next_u64() of `generator` (a dropout key), recorded: recomputed by refresh() as the next
  // draw of that generator. What the layers call while a step is captured.
  std::uint64_t draw(Generator& generator);
  // The record of a draw already made, `value` (no state to restore: see restore_generators). Two
  // draws of one step that gave the same value make the step fail (the kernels find a draw by its
  // value: draw_address).
  void record_draw(Generator& generator, std::uint64_t value);
  // Sets every generator that draw() drew from back to its state before its first draw: a
  // capture that is not replayed leaves no trace, whichever generator it drew from.
  void restore_generators() const;
  // The address of the recorded draw that gave `value`, or nullptr (no draw of this step gave it:
  // a fixed seed, constant across replays).
  const std::uint64_t* draw_address(std::uint64_t value) const;

  // Recomputes every value in the order recorded (draws advance their generators).
  void refresh();
  // Writes the current values into the buffer: on a GPU a kernel on the compute stream (ordered
  // after the previous replay, which read the old values, and before the next). Nothing when they
  // are the ones the last upload wrote (SGD at a constant rate, no dropout: no launch per step).
  void upload();
  // How many uploads wrote the buffer.
  std::int64_t uploads() const { return uploads_; }

  // The current values (the capture's until refresh()), words() in record order.
  const std::vector<std::uint64_t>& words() const { return words_; }
  std::size_t values() const { return entries_.size(); }
  // The generators of the recorded draws, each once, in the order of their first draw.
  const std::vector<Generator*>& generators() const { return generators_; }
  std::size_t draws() const { return draws_.size(); }
  // Empty while every value recorded has a place; otherwise why the step cannot be replayed.
  const std::string& failure() const { return failure_; }

 private:
  struct Entry {
    std::size_t offset = 0, words = 0;
    Recompute recompute;
  };
  void fail(std::string why);

  Tensor buffer_;
  Device device_;
  char* address_ = nullptr;  // the buffer's first byte (device memory on a GPU: never read here)
  std::vector<std::uint64_t> words_;
  std::vector<Entry> entries_;
  std::unordered_map<std::uint64_t, std::size_t> draws_;  // value -> word offset
  std::vector<Generator*> generators_;
  std::vector<std::pair<Generator*, GeneratorState>> first_states_;  // draw()'s, before the first
  std::vector<std::uint64_t> uploaded_;  // what the buffer holds since the last upload
  std::int64_t uploads_ = 0;
  std::string failure_;
};

// Makes `parameters` this thread's active() recorder for its lifetime (a capture's); they do not
// nest (std::logic_error).
class ReplayRecording {
 public:
  explicit ReplayRecording(ReplayParameters& parameters);
  ~ReplayRecording();
  ReplayRecording(const ReplayRecording&) = delete;
  ReplayRecording& operator=(const ReplayRecording&) = delete;
};

}  // namespace mixprec::core
