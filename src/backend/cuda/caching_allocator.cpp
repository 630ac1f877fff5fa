#include "backend/cuda/caching_allocator.h"

#include <tuple>
#include <utility>
#include <vector>

namespace mixprec::cuda {

bool BlockPool::BySize::operator()(const Block* a, const Block* b) const {
  return std::make_tuple(a->stream, a->size, reinterpret_cast<std::uintptr_t>(a->ptr)) <
         std::make_tuple(b->stream, b->size, reinterpret_cast<std::uintptr_t>(b->ptr));
}

BlockPool::BlockPool(RawMemory raw) : raw_(std::move(raw)) {}

BlockPool::~BlockPool() {
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

BlockPool::Block* BlockPool::new_segment(std::size_t size, bool small, StreamId stream) {
  void* p = raw_.allocate(size);
  if (p == nullptr) {
    // Out of memory: give every cached segment back and try once more (a fragmented cache can
    // hold enough memory in pieces of the wrong size).
    if (release_cached_locked() == 0) return nullptr;
    p = raw_.allocate(size);
    if (p == nullptr) return nullptr;
  }
  auto* block = new Block;
  block->stream = stream;
  block->size = size;
  block->ptr = static_cast<char*>(p);
  block->small = small;
  stats_.segment_allocations += 1;
  stats_.reserved_bytes += static_cast<std::int64_t>(size);
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
  Block key;
  key.stream = stream;
  key.size = size;
  key.ptr = nullptr;
  Block* block = nullptr;
  auto it = set.lower_bound(&key);
  if (it != set.end() && (*it)->stream == stream) {
    block = *it;
    set.erase(it);
  } else {
    const std::size_t segment =
        small ? kSmallSegment : (size + kLargeRounding - 1) / kLargeRounding * kLargeRounding;
    block = new_segment(segment, small, stream);
    if (block == nullptr) return nullptr;
  }
  split(block, size);
  block->allocated = true;
  allocated_.emplace(block->ptr, block);
  stats_.allocated_bytes += static_cast<std::int64_t>(block->size);
  stats_.allocated_blocks += 1;
  return block->ptr;
}

bool BlockPool::deallocate(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocated_.find(ptr);
  if (it == allocated_.end()) return false;
  Block* block = it->second;
  allocated_.erase(it);
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
  return true;
}

std::size_t BlockPool::release_cached_locked() {
  std::size_t released = 0;
  for (FreeSet* set : {&small_free_, &large_free_}) {
    std::vector<Block*> whole;
    for (Block* b : *set) {
      if (b->prev == nullptr && b->next == nullptr) whole.push_back(b);
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
