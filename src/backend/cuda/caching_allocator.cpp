#include "backend/cuda/caching_allocator.h"

#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace mixprec::cuda {

bool BlockPool::BySize::operator()(const Block* a, const Block* b) const {
  return std::make_tuple(a->pool, a->stream, a->size, reinterpret_cast<std::uintptr_t>(a->ptr)) <
         std::make_tuple(b->pool, b->stream, b->size, reinterpret_cast<std::uintptr_t>(b->ptr));
}

BlockPool::BlockPool(RawMemory raw) : raw_(std::move(raw)) {}

BlockPool::~BlockPool() {
  std::vector<PoolId> ids;
  for (const auto& [id, unused] : private_) ids.push_back(id);
  for (PoolId id : ids) release_private(id);
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
  // Free remainders of segments that still have handed-out blocks are bookkeeping only.
  for (FreeSet* set : {&small_free_, &large_free_}) {
    for (Block* b : *set) delete b;
    set->clear();
  }
  for (auto& [ptr, b] : allocated_) delete b;
  allocated_.clear();
}

std::size_t BlockPool::round_size(std::size_t bytes) {
  if (bytes < kRounding) return kRounding;
  return (bytes + kRounding - 1) / kRounding * kRounding;
}

BlockPool::Block* BlockPool::new_segment(std::size_t size, bool small, PoolId pool,
                                         StreamId stream) {
  void* p = raw_.allocate(size);
  if (p == nullptr) {
    // Out of memory: give every cached segment back and try once more (a fragmented cache can
    // hold enough memory in pieces of the wrong size). Not inside a private window: releasing
    // would call cudaFree in the middle of a stream capture, which invalidates it.
    if (window_ != 0) return nullptr;
    if (release_cached_locked() == 0) return nullptr;
    p = raw_.allocate(size);
    if (p == nullptr) return nullptr;
  }
  auto* block = new Block;
  block->pool = pool;
  block->stream = stream;
  block->size = size;
  block->ptr = static_cast<char*>(p);
  block->small = small;
  stats_.segment_allocations += 1;
  stats_.reserved_bytes += static_cast<std::int64_t>(size);
  if (pool != 0) {
    private_.at(pool).segments.push_back(block);
    stats_.private_reserved_bytes += static_cast<std::int64_t>(size);
  }
  return block;
}

// Cuts `block` (not in any free set) down to `size` when the remainder is worth keeping: any
// remainder in the small pool (it serves requests of 512 bytes and up), more than kSmallLimit in
// the large pool (a smaller remainder could only serve small requests, which never use large
// segments; it stays part of the block).
void BlockPool::split(Block* block, std::size_t size) {
  const std::size_t rest = block->size - size;
  const bool keep = block->small ? rest >= kRounding : rest > kSmallLimit;
  if (!keep) return;
  auto* tail = new Block;
  tail->pool = block->pool;
  tail->stream = block->stream;
  tail->size = rest;
  tail->ptr = block->ptr + size;
  tail->small = block->small;
  tail->prev = block;
  tail->next = block->next;
  if (block->next != nullptr) block->next->prev = tail;
  block->next = tail;
  block->size = size;
  free_set(tail->small).insert(tail);
}

void* BlockPool::allocate(std::size_t bytes, StreamId stream) {
  const std::size_t size = round_size(bytes);
  const bool small = size <= kSmallLimit;
  std::lock_guard<std::mutex> lock(mutex_);
  FreeSet& set = free_set(small);
  const PoolId pool =
      window_ != 0 && std::this_thread::get_id() == window_thread_ ? window_ : PoolId{0};
  Block key;
  key.pool = pool;
  key.stream = stream;
  key.size = size;
  key.ptr = nullptr;
  Block* block = nullptr;
  auto it = set.lower_bound(&key);
  if (it != set.end() && (*it)->pool == pool && (*it)->stream == stream) {
    block = *it;
    set.erase(it);
  } else {
    const std::size_t segment =
        small ? kSmallSegment : (size + kLargeRounding - 1) / kLargeRounding * kLargeRounding;
    block = new_segment(segment, small, pool, stream);
    if (block == nullptr) return nullptr;
  }
  split(block, size);
  block->allocated = true;
  allocated_.emplace(block->ptr, block);
  stats_.allocated_bytes += static_cast<std::int64_t>(block->size);
  stats_.allocated_blocks += 1;
  stats_.allocations += 1;
  if (pool != 0) {
    stats_.private_allocations += 1;
    private_.at(pool).allocations += 1;
  }
  return block->ptr;
}

bool BlockPool::deallocate(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocated_.find(ptr);
  if (it == allocated_.end()) return false;
  Block* block = it->second;
  allocated_.erase(it);
  if (window_ != 0 && block->pool != window_) {
    // Captured work may read this block when the graph is replayed: held back, still counted as
    // allocated (so never merged or reused), until the pool is released.
    private_.at(window_).held.push_back(block);
    stats_.held_blocks += 1;
    return true;
  }
  free_block_locked(block);
  return true;
}

void BlockPool::free_block_locked(Block* block) {
  block->allocated = false;
  stats_.allocated_bytes -= static_cast<std::int64_t>(block->size);
  stats_.allocated_blocks -= 1;
  FreeSet& set = free_set(block->small);
  // Merge with free neighbours (they are in the free set: take them out before their size
  // changes, since the set is ordered by size).
  if (Block* prev = block->prev; prev != nullptr && !prev->allocated) {
    set.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (block->next != nullptr) block->next->prev = prev;
    delete block;
    block = prev;
  }
  if (Block* next = block->next; next != nullptr && !next->allocated) {
    set.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (next->next != nullptr) next->next->prev = block;
    delete next;
  }
  set.insert(block);
}

std::size_t BlockPool::release_cached_locked() {
  std::size_t released = 0;
  for (FreeSet* set : {&small_free_, &large_free_}) {
    std::vector<Block*> whole;
    for (Block* b : *set) {
      // Segments of live private pools stay: their graphs replay into them.
      if (b->pool == 0 && b->prev == nullptr && b->next == nullptr) whole.push_back(b);
    }
    for (Block* b : whole) {
      set->erase(b);
      raw_.release(b->ptr);
      released += b->size;
      stats_.segment_releases += 1;
      stats_.reserved_bytes -= static_cast<std::int64_t>(b->size);
      delete b;
    }
  }
  return released;
}

std::size_t BlockPool::release_cached() {
  std::lock_guard<std::mutex> lock(mutex_);
  return release_cached_locked();
}

PoolStats BlockPool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::size_t BlockPool::block_size(void* ptr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocated_.find(ptr);
  return it == allocated_.end() ? 0 : it->second->size;
}

}  // namespace mixprec::cuda

namespace mixprec::cuda {

PoolId BlockPool::create_private() {
  std::lock_guard<std::mutex> lock(mutex_);
  const PoolId id = next_private_++;
  private_.emplace(id, PrivatePool{});
  return id;
}

void BlockPool::begin_private(PoolId pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (window_ != 0) {
    throw std::logic_error("caching allocator: a private pool window is open already (pool " +
                           std::to_string(window_) + "); one capture per device at a time");
  }
  if (private_.count(pool) == 0) {
    throw std::logic_error("caching allocator: unknown private pool " + std::to_string(pool));
  }
  window_ = pool;
  window_thread_ = std::this_thread::get_id();
}

void BlockPool::end_private() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  window_ = 0;
}

PoolId BlockPool::private_window() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return window_;
}

void BlockPool::release_private(PoolId pool) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = private_.find(pool);
  if (found == private_.end()) return;
  if (window_ == pool) window_ = 0;
  PrivatePool p = std::move(found->second);
  private_.erase(found);
  // Every block of its segments joins the shared cache (free ones are re-keyed in their free set;
  // the key includes the pool, so each is taken out before its pool changes).
  for (Block* head : p.segments) {
    for (Block* b = head; b != nullptr; b = b->next) {
      if (!b->allocated) {
        FreeSet& set = free_set(b->small);
        set.erase(b);
        b->pool = 0;
        set.insert(b);
      } else {
        b->pool = 0;
      }
      stats_.private_reserved_bytes -= static_cast<std::int64_t>(b->size);
    }
  }
  // The blocks it held back are freed as they would have been (into their own pools).
  for (Block* b : p.held) {
    stats_.held_blocks -= 1;
    free_block_locked(b);
  }
}

PrivatePoolStats BlockPool::private_stats(PoolId pool) const {
  std::lock_guard<std::mutex> lock(mutex_);
  PrivatePoolStats s;
  auto found = private_.find(pool);
  if (found == private_.end()) return s;
  const PrivatePool& p = found->second;
  s.segments = static_cast<std::int64_t>(p.segments.size());
  for (const Block* head : p.segments) {
    for (const Block* b = head; b != nullptr; b = b->next) {
      s.reserved_bytes += static_cast<std::int64_t>(b->size);
      if (b->allocated) s.allocated_bytes += static_cast<std::int64_t>(b->size);
    }
  }
  s.allocations = p.allocations;
  s.held_blocks = static_cast<std::int64_t>(p.held.size());
  return s;
}

}  // namespace mixprec::cuda
