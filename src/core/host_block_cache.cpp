// Size classes and free lists of the host allocator's block cache (host_block_cache.h).
#include "core/host_block_cache.h"

#include <bit>

namespace mixprec::core {

namespace {
constexpr std::size_t kMinClass = 64;                  // the allocation alignment
constexpr std::size_t kFineClassesUpTo = 256;          // powers of two up to here
constexpr std::size_t kSteppedClassesUpTo = 4u << 20;  // four steps per power of two up to here
constexpr std::size_t kLargeGranule = std::size_t{2} << 20;  // above: multiples of 2 MiB
}  // namespace

std::size_t host_size_class(std::size_t bytes) {
  if (bytes <= kMinClass) return kMinClass;
  if (bytes > kSteppedClassesUpTo) return (bytes + kLargeGranule - 1) & ~(kLargeGranule - 1);
  const std::size_t power = std::bit_ceil(bytes);
  if (power <= kFineClassesUpTo) return power;
  const std::size_t step = power / 8;  // (power/2, power] in four steps of power/8
  return (bytes + step - 1) / step * step;
}

void* HostBlockCache::take(std::size_t size_class) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = free_blocks_.find(size_class);
  if (it == free_blocks_.end() || it->second.empty()) return nullptr;
  void* block = it->second.back();
  it->second.pop_back();
  cached_bytes_ -= size_class;
  return block;
}

bool HostBlockCache::give(void* block, std::size_t size_class, std::size_t limit) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cached_bytes_ + size_class > limit) return false;
  free_blocks_[size_class].push_back(block);
  cached_bytes_ += size_class;
  return true;
}

void HostBlockCache::release_all(void (*release)(void*)) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [size_class, blocks] : free_blocks_) {
    for (void* block : blocks) release(block);
  }
  free_blocks_.clear();
  cached_bytes_ = 0;
}

std::size_t HostBlockCache::cached_bytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_bytes_;
}

}  // namespace mixprec::core
