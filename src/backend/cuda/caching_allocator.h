// The bookkeeping of the CUDA caching allocator, independent of CUDA so that it is unit-tested on
// machines without a GPU (it draws its segments from any raw allocate/release pair: cudaMalloc and
// cudaFree on a GPU, aligned malloc/free in tests/unit/cuda_allocator_test.cpp).
//
// Requests are rounded up to multiples of 512 bytes. Small requests (<= 1 MiB) are carved out of
// 2 MiB segments; large ones get a segment rounded up to a multiple of 2 MiB. A freed block goes
// back to the free list of the stream it was allocated for (work queued on that stream may still
// read it; the next user on the same stream is ordered after that work) and merges with free
// neighbours of its segment. An allocation takes the smallest free block of its pool and stream
// that fits (best fit) and splits off the rest when the rest is worth keeping; only when none fits
// is a new segment drawn from the raw allocator. If that fails, every wholly free segment is
// released and the raw allocation is retried once. So a training loop that allocates the same
// sizes every step reaches a steady state with no raw allocation at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <unordered_map>

namespace mixprec::cuda {

// Where segments come from. allocate returns nullptr when out of memory (it may throw for other
// failures); release is never given a pointer allocate did not return.
struct RawMemory {
  std::function<void*(std::size_t)> allocate;
  std::function<void(void*)> release;
};

// An opaque stream identity (a cudaStream_t's value on a GPU).
using StreamId = std::uintptr_t;

struct PoolStats {
  std::int64_t segment_allocations = 0;  // successful raw allocations (cudaMalloc calls)
  std::int64_t segment_releases = 0;     // raw releases (cudaFree calls)
  std::int64_t reserved_bytes = 0;       // in segments held from the raw allocator
  std::int64_t allocated_bytes = 0;      // in blocks handed out (rounded sizes)
  std::int64_t allocated_blocks = 0;
  std::int64_t cached_bytes() const { return reserved_bytes - allocated_bytes; }
};

class BlockPool {
 public:
  static constexpr std::size_t kRounding = 512;            // block sizes are multiples of this
  static constexpr std::size_t kSmallLimit = 1u << 20;     // requests up to 1 MiB are small
  static constexpr std::size_t kSmallSegment = 2u << 20;   // small blocks share 2 MiB segments
  static constexpr std::size_t kLargeRounding = 2u << 20;  // large segments: multiples of 2 MiB

  explicit BlockPool(RawMemory raw);
  // Releases the free segments. Blocks still handed out keep their segments (never released).
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // A block of at least `bytes` (0 is allowed: 512 bytes) for use on `stream`, aligned like the
  // raw allocator's pointers (cudaMalloc: 256 bytes) since every block size is a multiple of 512.
  // nullptr when the raw allocator fails even after the cache was released: the caller reports.
  void* allocate(std::size_t bytes, StreamId stream);
  // Returns a block to its stream's free list; false (and nothing changes) for a pointer this
  // pool did not hand out.
  bool deallocate(void* ptr);
  // Releases every wholly free segment to the raw allocator; returns the bytes released.
  std::size_t release_cached();
  PoolStats stats() const;
  // The rounded size of a handed-out block (0 for an unknown pointer).
  std::size_t block_size(void* ptr) const;

  static std::size_t round_size(std::size_t bytes);

 private:
  struct Block {
    StreamId stream = 0;
    std::size_t size = 0;
    char* ptr = nullptr;
    bool small = false;
    bool allocated = false;
    Block* prev = nullptr;  // neighbours within the same segment (address order)
    Block* next = nullptr;
  };
  // Free blocks ordered by (stream, size, address): lower_bound finds the best fit of a stream.
  struct BySize {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeSet = std::set<Block*, BySize>;

  FreeSet& free_set(bool small) { return small ? small_free_ : large_free_; }
  Block* new_segment(std::size_t size, bool small, StreamId stream);
  void split(Block* block, std::size_t size);
  std::size_t release_cached_locked();

  RawMemory raw_;
  mutable std::mutex mutex_;
  FreeSet small_free_, large_free_;
  std::unordered_map<void*, Block*> allocated_;
  PoolStats stats_;
};

}  // namespace mixprec::cuda
