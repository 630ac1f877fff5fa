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
//
// Private pools (CUDA graphs, issue 28; PyTorch's graph pools work the same way). A graph replays
// the kernels of its capture on the very addresses the capture used, so every block the captured
// work touches must stay out of anyone else's hands for as long as the graph lives:
//  - between begin_private(pool) and end_private() (the capture) every allocate() is served from
//    segments owned by `pool`, drawn from the raw allocator for it, never from the shared cache;
//  - a block of `pool` freed at any time (during the capture, or later while the graph lives)
//    returns to `pool`'s own free list: only later allocations into the same pool reuse it (during
//    the capture that is safe: the captured work is ordered on the one captured stream);
//  - a block of the shared cache (or of another pool) freed during the capture may still be read
//    by the captured work when it is replayed, so it is held back (counted in held_blocks) until
//    the pool is released, then freed as usual;
//  - no segment of a live private pool is released by release_cached() or by the out-of-memory
//    retry, and while a private window is open the retry releases nothing (cudaFree would break
//    the capture): the allocation fails and the capture falls back;
//  - release_private(pool) (the graph is gone, and the caller has waited for its replays) hands
//    the pool's segments, free and allocated blocks alike, to the shared cache, and frees the
//    held-back blocks.
// A replay runs no host code, so it allocates nothing: PoolStats::allocations (every allocate()
// that succeeded) stays put across replays, which the GPU test asserts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

namespace mixprec::cuda {

// Where segments come from. allocate returns nullptr when out of memory (it may throw for other
// failures); release is never given a pointer allocate did not return.
struct RawMemory {
  std::function<void*(std::size_t)> allocate;
  std::function<void(void*)> release;
};

// An opaque stream identity (a cudaStream_t's value on a GPU).
using StreamId = std::uintptr_t;
// A private pool (one per CUDA graph); 0 is the shared cache.
using PoolId = std::uint64_t;

struct PoolStats {
  std::int64_t segment_allocations = 0;  // successful raw allocations (cudaMalloc calls)
  std::int64_t segment_releases = 0;     // raw releases (cudaFree calls)
  std::int64_t reserved_bytes = 0;       // in segments held from the raw allocator
  std::int64_t allocated_bytes = 0;      // in blocks handed out (rounded sizes)
  std::int64_t allocated_blocks = 0;
  std::int64_t allocations = 0;             // allocate() calls that returned a block, since start
  std::int64_t private_allocations = 0;     // of those, served inside a private window
  std::int64_t private_reserved_bytes = 0;  // in segments owned by live private pools
  std::int64_t held_blocks = 0;             // shared blocks freed in a private window, held back
  std::int64_t cached_bytes() const { return reserved_bytes - allocated_bytes; }
};

// One private pool's share.
struct PrivatePoolStats {
  std::int64_t segments = 0;         // segments owned now
  std::int64_t reserved_bytes = 0;   // their bytes
  std::int64_t allocated_bytes = 0;  // in its blocks handed out now
  std::int64_t allocations = 0;      // allocate() calls it served, since it was created
  std::int64_t held_blocks = 0;      // shared blocks it holds back
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

  // ---- private pools (see the top of this file) ----
  // A new, empty private pool (ids are never reused).
  PoolId create_private();
  // Routes every allocate() of the calling thread to `pool` until end_private() (the capturing
  // thread: a background thread's allocations, e.g. the prefetcher's batches, stay shared so that
  // they can never land on a block the graph writes when replayed; its frees are held back like
  // the capturing thread's). Throws std::logic_error when a window is open already (one capture
  // per device at a time) or `pool` is unknown.
  void begin_private(PoolId pool);
  // Closes the window (nothing when none is open).
  void end_private() noexcept;
  // The pool whose window is open, 0 when none.
  PoolId private_window() const;
  // Gives the pool's segments to the shared cache and frees its held-back blocks; the caller
  // guarantees no queued work still uses them in the graph's way (it waited for the replays). An
  // open window of this pool is closed. Unknown ids are ignored.
  void release_private(PoolId pool) noexcept;
  // All zero for an unknown (or released) pool.
  PrivatePoolStats private_stats(PoolId pool) const;

 private:
  struct Block {
    PoolId pool = 0;
    StreamId stream = 0;
    std::size_t size = 0;
    char* ptr = nullptr;
    bool small = false;
    bool allocated = false;
    Block* prev = nullptr;  // neighbours within the same segment (address order)
    Block* next = nullptr;
  };
  // Free blocks ordered by (pool, stream, size, address): lower_bound finds the best fit of a
  // pool and stream.
  struct BySize {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeSet = std::set<Block*, BySize>;

  FreeSet& free_set(bool small) { return small ? small_free_ : large_free_; }
  Block* new_segment(std::size_t size, bool small, PoolId pool, StreamId stream);
  void split(Block* block, std::size_t size);
  std::size_t release_cached_locked();
  void free_block_locked(Block* block);

  struct PrivatePool {
    std::vector<Block*> segments;  // the first block of each segment it owns
    std::vector<Block*> held;      // blocks of other pools freed during its window
    std::int64_t allocations = 0;
  };

  RawMemory raw_;
  mutable std::mutex mutex_;
  FreeSet small_free_, large_free_;
  std::unordered_map<void*, Block*> allocated_;
  PoolStats stats_;
  std::unordered_map<PoolId, PrivatePool> private_;
  PoolId next_private_ = 1;
  PoolId window_ = 0;              // the pool allocations go to now (0: the shared cache)
  std::thread::id window_thread_;  // the thread whose allocations go there
};

}  // namespace mixprec::cuda
