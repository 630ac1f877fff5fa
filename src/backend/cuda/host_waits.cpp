// The host's waits for a GPU (host_waits.h): one process-wide atomic counter.
#include "backend/cuda/host_waits.h"

#include <atomic>

namespace mixprec::cuda {

namespace {

std::atomic<std::int64_t> waits{0};

}  // namespace

void count_host_wait() noexcept { waits.fetch_add(1, std::memory_order_relaxed); }

std::int64_t host_waits() noexcept { return waits.load(std::memory_order_relaxed); }

}  // namespace mixprec::cuda
