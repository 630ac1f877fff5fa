// The bounded least-recently-used cache that every oneDNN CPU op (matmul, convolution, pooling,
// batch norm) keeps its compiled primitives in, keyed by the full geometry of a call, so a training
// loop that repeats its shapes compiles each primitive once (oneDNN takes about a millisecond per
// primitive; a cache lookup a few hundred nanoseconds).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace mixprec::cpu {

struct PrimitiveCacheStats {
  std::size_t size = 0;      // primitives held now
  std::size_t capacity = 0;  // least recently used entries are evicted beyond this
  std::int64_t hits = 0;
  std::int64_t misses = 0;  // = primitives created
  // Primitives for which oneDNN chose its reference ("ref:...") kernel: a sign that a layout
  // reached oneDNN that its fast kernels do not take.
  std::int64_t reference_implementations = 0;
};

// FNV-1a over the 64-bit words of a key made of integers (a std::vector or std::array of
// std::int64_t: every integer that defines a primitive, in a fixed order).
struct IntegerKeyHash {
  template <typename Words>
  std::size_t operator()(const Words& key) const {
    std::uint64_t h = 1469598103934665603ull;
    for (std::int64_t v : key) {
      h ^= static_cast<std::uint64_t>(v);
      h *= 1099511628211ull;
    }
    return static_cast<std::size_t>(h);
  }
};

// A compiled primitive as the cache holds it: anything that names oneDNN's kernel in
// `implementation` (e.g. "brg:avx512_core", "ref:any"), which the statistics inspect.
template <typename P>
concept CachedPrimitive = requires(const P& p) {
  { p.implementation } -> std::convertible_to<std::string>;
};

// Key: equality-comparable and hashable by Hash. Thread-safe: one mutex around every operation,
// and a missing primitive is created under it, so two threads asking for the same new key compile
// it once (creation is rare next to lookups; serialising it costs nothing in a training loop).
template <typename Key, CachedPrimitive Primitive, typename Hash = IntegerKeyHash>
class PrimitiveCache {
 public:
  explicit PrimitiveCache(std::size_t capacity) : capacity_(capacity) {}
  PrimitiveCache(const PrimitiveCache&) = delete;
  PrimitiveCache& operator=(const PrimitiveCache&) = delete;

  // The primitive for `key`: the cached one (now the most recently used), or create() called
  // once and its result kept. create() returns std::shared_ptr<const Primitive>; what it throws
  // propagates and nothing is cached or counted.
  template <typename Create>
  std::shared_ptr<const Primitive> get(const Key& key, Create&& create) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it->second);  // most recently used goes to the front
      return it->second->second;
    }
    std::shared_ptr<const Primitive> created = std::forward<Create>(create)();
    ++misses_;
    if (std::string_view(created->implementation).starts_with("ref")) ++reference_implementations_;
    lru_.emplace_front(key, created);
    index_.emplace(key, lru_.begin());
    if (lru_.size() > capacity_) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
    return created;
  }

  PrimitiveCacheStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return {lru_.size(), capacity_, hits_, misses_, reference_implementations_};
  }

  // Drops every primitive (callers holding one keep it alive); the counters go on.
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    index_.clear();
    lru_.clear();
  }

 private:
  using Entry = std::pair<Key, std::shared_ptr<const Primitive>>;
  const std::size_t capacity_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<Key, typename std::list<Entry>::iterator, Hash> index_;
  std::int64_t hits_ = 0, misses_ = 0, reference_implementations_ = 0;
};

}  // namespace mixprec::cpu
