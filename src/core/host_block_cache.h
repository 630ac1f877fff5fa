// The host allocator's cache of freed blocks (core/allocator.cpp): every block size is rounded up
// to a size class and a freed block waits in its class's free list for the next request of that
// class, up to a bound on the bytes kept. A training step asks for the same sizes every step, so
// in the steady state each request is served from the cache: no malloc, no fresh pages (no page
// faults, no kernel zeroing), whatever the size.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

namespace mixprec::core {

// The size class of a request: 64 bytes at least; up to 256 bytes the next power of two; up to
// 4 MiB one of four steps between consecutive powers of two (at most 25% more than asked); above,
// the next multiple of 2 MiB (huge-page sized).
std::size_t host_size_class(std::size_t bytes);

// Free lists by size class with a bound on their total. Thread-safe.
class HostBlockCache {
 public:
  // A cached block of class `size_class` (from host_size_class), or nullptr when there is none.
  void* take(std::size_t size_class);
  // Keeps `block` of class `size_class` for reuse; false (the caller frees it) when keeping it
  // would exceed `limit` bytes in all.
  bool give(void* block, std::size_t size_class, std::size_t limit);
  // Frees every cached block with `release` (the function that matches the block's allocation).
  void release_all(void (*release)(void*));
  std::size_t cached_bytes();

 private:
  std::mutex mutex_;
  std::map<std::size_t, std::vector<void*>> free_blocks_;  // size class -> cached blocks
  std::size_t cached_bytes_ = 0;
};

}  // namespace mixprec::core
