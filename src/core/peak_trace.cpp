// The peak trace of the host allocator (core/peak_trace.h).
#include "core/peak_trace.h"

#include <dlfcn.h>
#include <execinfo.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace mixprec::core {

namespace {

constexpr int kFrames = 16;

struct Block {
  std::size_t bytes = 0;
  std::array<void*, kFrames> frames{};
  int depth = 0;
};

struct Trace {
  std::mutex mutex;
  std::unordered_map<const void*, Block> live, at_peak;
  std::size_t live_bytes = 0, peak_bytes = 0;
};

Trace& trace() {
  static Trace* t = new Trace();  // never destroyed: blocks are freed during static destruction
  return *t;
}

// -1: not yet read from the environment.
std::atomic<int> g_enabled{-1};

}  // namespace

bool write_peak_trace(const char* path) {
  Trace& t = trace();
  std::lock_guard<std::mutex> lock(t.mutex);
  std::FILE* f = std::fopen(path, "w");
  if (f == nullptr) return false;
  std::fprintf(f, "# peak %zu bytes in %zu blocks\n", t.peak_bytes, t.at_peak.size());
  for (const auto& [block, b] : t.at_peak) {
    std::fprintf(f, "%zu", b.bytes);
    for (int i = 0; i < b.depth; ++i) {
      Dl_info info;
      if (dladdr(b.frames[i], &info) == 0 || info.dli_fname == nullptr) continue;
      // One byte back: the return address may lie past the end of the calling function.
      const auto offset = static_cast<unsigned long>(static_cast<const char*>(b.frames[i]) -
                                                     static_cast<const char*>(info.dli_fbase) - 1);
      std::fprintf(f, " %s+0x%lx", info.dli_fname, offset);
    }
    std::fprintf(f, "\n");
  }
  return std::fclose(f) == 0;
}

namespace {

bool from_environment() {
  const char* path = std::getenv("MIXPREC_PEAK_TRACE");
  if (path == nullptr || *path == '\0') return false;
  static const char* const kept = path;
  std::atexit([] { write_peak_trace(kept); });
  return true;
}

}  // namespace

bool peak_trace_enabled() {
  int e = g_enabled.load(std::memory_order_relaxed);
  if (e < 0) {
    static const bool env = from_environment();
    int expected = -1;
    g_enabled.compare_exchange_strong(expected, env ? 1 : 0);
    e = g_enabled.load();
  }
  return e == 1;
}

void set_peak_trace(bool on) {
  peak_trace_enabled();  // reads the environment first, so it cannot override this later
  Trace& t = trace();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.live.clear(), t.at_peak.clear();
  t.live_bytes = t.peak_bytes = 0;
  g_enabled.store(on ? 1 : 0);
}

std::vector<std::size_t> peak_trace_block_sizes() {
  Trace& t = trace();
  std::lock_guard<std::mutex> lock(t.mutex);
  std::vector<std::size_t> sizes;
  for (const auto& entry : t.at_peak) sizes.push_back(entry.second.bytes);
  std::sort(sizes.rbegin(), sizes.rend());
  return sizes;
}

void peak_trace_allocated(const void* block, std::size_t bytes) {
  if (!peak_trace_enabled()) return;
  Block b;
  b.bytes = bytes;
  b.depth = backtrace(b.frames.data(), kFrames);
  Trace& t = trace();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.live[block] = b;
  t.live_bytes += bytes;
  if (t.live_bytes > t.peak_bytes) {
    t.peak_bytes = t.live_bytes;
    t.at_peak = t.live;
  }
}

void peak_trace_freed(const void* block) {
  if (!peak_trace_enabled()) return;
  Trace& t = trace();
  std::lock_guard<std::mutex> lock(t.mutex);
  const auto it = t.live.find(block);
  if (it == t.live.end()) return;
  t.live_bytes -= it->second.bytes;
  t.live.erase(it);
}

}  // namespace mixprec::core
