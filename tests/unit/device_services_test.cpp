// The CPU instance of DeviceServices (src/backend/device_services.h): staging buffers, uploads,
// host-timestamp events and allocator statistics; the callers that run on it with no device
// branch: the step timer (both timing rules, the queued one through a stand-in table) and the
// prefetcher's overlapped copy (staging, events, uploads) run without a GPU on the CPU's entries.
#include "backend/device_services.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "data/prefetch.h"
#include "mixprec/mixprec.h"
#include "models/step_timer.h"
#include "support/expect_error.h"

namespace mixprec {
namespace {

using namespace std::chrono_literals;
using testing::expect_error;

const DeviceServices& cpu_services() { return *backend_for(Device::cpu()).services; }

// The CPU's services, claiming to queue work: what the callers do on a GPU, run on the host.
DeviceServices queued_cpu_services() {
  DeviceServices s = cpu_services();
  s.execution = Execution::queued;
  return s;
}

void expect_complete(const DeviceServices& s) {
  EXPECT_NE(s.allocate_staging, nullptr);
  EXPECT_NE(s.upload, nullptr);
  EXPECT_NE(s.create_event, nullptr);
  EXPECT_NE(s.record_event, nullptr);
  EXPECT_NE(s.wait_event, nullptr);
  EXPECT_NE(s.synchronize_event, nullptr);
  EXPECT_NE(s.event_completed, nullptr);
  EXPECT_NE(s.elapsed_ms, nullptr);
  EXPECT_NE(s.allocator_stats, nullptr);
}

TEST(DeviceServicesTest, EveryBackendFillsEveryEntry) {
  expect_complete(cpu_services());
  EXPECT_EQ(cpu_services().execution, Execution::synchronous);
  if (const Backend* cuda = find_backend(DeviceType::cuda)) {  // a CUDA build; no GPU needed
    ASSERT_NE(cuda->services, nullptr);
    expect_complete(*cuda->services);
    EXPECT_EQ(cuda->services->execution, Execution::queued);
  }
}

TEST(DeviceServicesTest, StagingBufferIsAlignedWritableAndFreedOnce) {
  StagingBuffer b = cpu_services().allocate_staging(1000);
  ASSERT_TRUE(b);
  EXPECT_EQ(b.size(), 1000u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 64, 0u);
  std::memset(b.data(), 0x5a, b.size());
  StagingBuffer empty = cpu_services().allocate_staging(0);
  EXPECT_TRUE(empty);  // a unique pointer even for 0 bytes
  EXPECT_EQ(empty.size(), 0u);

  static int releases = 0;
  releases = 0;
  static std::byte storage[16];
  {
    StagingBuffer owner(storage, sizeof storage,
                        [](std::byte*, std::size_t) noexcept { ++releases; });
    StagingBuffer moved = std::move(owner);
    EXPECT_FALSE(owner);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    EXPECT_EQ(moved.data(), storage);
    StagingBuffer assigned;
    assigned = std::move(moved);
    EXPECT_EQ(assigned.size(), sizeof storage);
    EXPECT_EQ(releases, 0);
  }
  EXPECT_EQ(releases, 1);
}

TEST(DeviceServicesTest, UploadCopiesFromAnOffsetAndChecksTheRange) {
  const DeviceServices& s = cpu_services();
  StagingBuffer b = s.allocate_staging(64);
  std::vector<float> values = {1.5f, -2.0f, 3.25f};
  std::memcpy(b.data() + 16, values.data(), sizeof(float) * values.size());
  Tensor dst = zeros({3});
  s.upload(b, 16, dst);
  EXPECT_EQ(dst.to_vector<float>(), values);

  Tensor big = zeros({16});  // 64 bytes: fits only at offset 0
  s.upload(b, 0, big);
  expect_error<ValueError>([&] { s.upload(b, 4, big); }, {"outside a staging buffer"});
  expect_error<ValueError>([&] { s.upload(b, 65, dst); }, {"outside a staging buffer"});
  Tensor none = zeros({0});
  s.upload(b, 64, none);  // an empty copy at the end is in range
}

TEST(DeviceServicesTest, HostEventsTimeTheIntervalBetweenRecords) {
  const DeviceServices& s = cpu_services();
  Event start = s.create_event(Device::cpu(), EventTiming::enabled);
  Event end = s.create_event(Device::cpu(), EventTiming::enabled);
  EXPECT_EQ(start->device(), Device::cpu());
  EXPECT_TRUE(s.event_completed(*start));  // never recorded: complete
  expect_error<ValueError>([&] { s.elapsed_ms(*start, *end); }, {"recorded"});
  s.record_event(*start, Stream::compute);
  std::this_thread::sleep_for(20ms);
  s.record_event(*end, Stream::copy);  // one program order: the streams are the same on the CPU
  s.wait_event(Stream::compute, *end);
  s.synchronize_event(*end);
  EXPECT_TRUE(s.event_completed(*end));
  const double ms = s.elapsed_ms(*start, *end);
  EXPECT_GE(ms, 19.0);
  EXPECT_LT(ms, 5000.0);
  EXPECT_LE(s.elapsed_ms(*end, *start), -19.0);  // signed, like cudaEventElapsedTime

  Event untimed = s.create_event(Device::cpu(), EventTiming::disabled);
  s.record_event(*untimed, Stream::compute);
  expect_error<ValueError>([&] { s.elapsed_ms(*start, *untimed); }, {"EventTiming::enabled"});
  expect_error<DeviceError>([&] { s.create_event(Device::cuda(0), EventTiming::enabled); },
                            {"cpu backend"});
}

TEST(DeviceServicesTest, AllocatorStatsFollowTheHostAllocator) {
  const DeviceServices& s = cpu_services();
  const AllocatorStats before = s.allocator_stats(Device::cpu());
  EXPECT_EQ(before.reserved_bytes, before.allocated_bytes + before.cached_bytes);
  EXPECT_EQ(before.allocated_bytes, memory_stats(Device::cpu()).current_bytes);
  {
    const Tensor t = zeros({1 << 20});  // 4 MiB, a cached size class once freed
    const AllocatorStats during = s.allocator_stats(Device::cpu());
    EXPECT_GE(during.allocated_bytes - before.allocated_bytes, std::int64_t{4} << 20);
    EXPECT_EQ(during.reserved_bytes, during.allocated_bytes + during.cached_bytes);
  }
  const AllocatorStats after = s.allocator_stats(Device::cpu());
  EXPECT_EQ(after.cached_bytes, memory_stats(Device::cpu()).cached_bytes);
  empty_cache(Device::cpu());
  EXPECT_EQ(s.allocator_stats(Device::cpu()).cached_bytes, 0);
  expect_error<DeviceError>([&] { s.allocator_stats(Device::cuda(0)); }, {"cpu backend"});
}

// ---- the callers, on the CPU's entries ----

TEST(StepTimerTest, SynchronousDeviceTimesEachStepFromItsStart) {
  models::StepTimer timer(Device::cpu());
  EXPECT_TRUE(timer.take_times().empty());
  for (int i = 0; i < 2; ++i) {
    std::this_thread::sleep_for(40ms);  // between steps: not part of a step
    timer.step_started();
    std::this_thread::sleep_for(10ms);
    timer.step_finished();
  }
  const std::vector<double> ms = timer.take_times();
  ASSERT_EQ(ms.size(), 2u);
  for (double t : ms) {
    EXPECT_GE(t, 9.0);
    EXPECT_LT(t, 40.0);
  }
  EXPECT_TRUE(timer.take_times().empty());  // taken: the next epoch starts afresh
}

TEST(StepTimerTest, QueuedDeviceTimesEachStepFromThePreviousStepsEnd) {
  const DeviceServices queued = queued_cpu_services();
  models::StepTimer timer(Device::cpu(), queued);
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(i == 0 ? 50ms : 30ms);  // the first gap is before the start
      timer.step_started();
      std::this_thread::sleep_for(5ms);
      timer.step_finished();
    }
    const std::vector<double> ms = timer.take_times();
    ASSERT_EQ(ms.size(), 3u);
    EXPECT_LT(ms[0], 30.0) << "epoch " << epoch;  // from the first start
    EXPECT_GE(ms[1], 34.0) << "epoch " << epoch;  // the gap before a step is part of it
    EXPECT_GE(ms[2], 34.0) << "epoch " << epoch;
  }
}

// The overlapped copy's whole protocol (staging ring, events, uploads at offsets) on the host:
// the batches equal the synchronous prefetcher's, for more batches than the staging ring holds.
TEST(PrefetcherTest, OverlappedCopyOnAQueuedStandInDeliversTheSameBatches) {
  const DeviceServices queued = queued_cpu_services();
  constexpr std::int64_t kCount = 9;
  const data::Prefetcher::Source source = [](std::int64_t i) {
    std::vector<float> x;
    for (std::int64_t k = 0; k < 3 + i; ++k) x.push_back(static_cast<float>(100 * i + k));
    std::vector<std::int64_t> y(static_cast<std::size_t>(1 + i % 3), i);
    return data::Batch{from_vector(x, {3 + i}),
                       from_vector(y, {static_cast<std::int64_t>(y.size())})};
  };
  data::Prefetcher reference(kCount, source, {.device = Device::cpu()});
  data::Prefetcher overlapped(kCount, source,
                              {.device = Device::cpu(),
                               .mode = data::PrefetchMode::background,
                               .depth = 2,
                               .copy = data::DeviceCopy::overlapped,
                               .services = &queued});
  for (std::int64_t i = 0; i < kCount; ++i) {
    const data::Batch want = reference.next();
    const data::Batch got = overlapped.next();
    EXPECT_EQ(got.x.to_vector<float>(), want.x.to_vector<float>()) << "batch " << i;
    EXPECT_EQ(got.y.to_vector<std::int64_t>(), want.y.to_vector<std::int64_t>()) << "batch " << i;
    EXPECT_NE(got.x.data_ptr(), want.x.data_ptr()) << "staged into a new tensor";
  }
}

TEST(PrefetcherTest, OnlyASynchronousDeviceIsPrefetchedOnTheCallingThread) {
  EXPECT_EQ(data::prefetch_options_for(Device::cpu()).mode, data::PrefetchMode::synchronous);
  EXPECT_EQ(data::prefetch_options_for(Device::cuda(0)).mode, data::PrefetchMode::background);
}

}  // namespace
}  // namespace mixprec
