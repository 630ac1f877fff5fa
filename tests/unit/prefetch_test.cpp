// data::Prefetcher on the CPU: the background producer delivers exactly the batches, in the order,
// that the test computes from the epoch's permutation; it runs concurrently with the consumer
// (proved with a handshake, not with timings); it stays within its depth; an exception reaches
// the consumer at the batch it belongs to; destruction mid-epoch stops and joins the producer.
#include "data/prefetch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/expect_error.h"

namespace mixprec::data {
namespace {

using namespace std::chrono_literals;
using testing::expect_error;

constexpr std::int64_t kSamples = 23;  // batches of 5: four full ones and a last one of 3
constexpr std::int64_t kBatch = 5;

// Row r of x is (r, 100 + r) as float32; y[r] = 1000 + r as int64.
Dataset numbered_dataset() {
  std::vector<float> x;
  std::vector<std::int64_t> y;
  for (std::int64_t r = 0; r < kSamples; ++r) {
    x.push_back(static_cast<float>(r));
    x.push_back(static_cast<float>(100 + r));
    y.push_back(1000 + r);
  }
  return Dataset(from_vector(x, {kSamples, 2}), from_vector(y, {kSamples}));
}

// A fixed permutation of 0..kSamples-1 (r -> 7r mod 23; 7 is coprime to 23).
std::vector<std::int64_t> permutation() {
  std::vector<std::int64_t> order;
  for (std::int64_t r = 0; r < kSamples; ++r) order.push_back((7 * r) % kSamples);
  return order;
}

// A source of `count` one-element batches whose x holds the index.
Prefetcher::Source indexed_source(std::atomic<std::int64_t>* calls = nullptr) {
  return [calls](std::int64_t i) {
    if (calls) calls->fetch_add(1);
    return Batch{from_vector(std::vector<float>{static_cast<float>(i)}, {1}), Tensor()};
  };
}

// Waits up to `limit` for `done()`.
template <typename F>
bool eventually(F done, std::chrono::milliseconds limit = 5000ms) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(PrefetcherTest, BackgroundDeliversThePipelinesBatchesInTheEpochsOrder) {
  const Dataset data = numbered_dataset();
  const std::vector<std::int64_t> order = permutation();
  const Epoch epoch(data, order, kBatch);
  const Pipeline pipeline = Pipeline(data).map(rescale(2.0, 1.0));  // x -> 2x + 1
  for (PrefetchMode mode : {PrefetchMode::synchronous, PrefetchMode::background}) {
    Prefetcher batches(pipeline, epoch, {.device = Device::cpu(), .mode = mode});
    ASSERT_EQ(batches.size(), 5);
    std::int64_t position = 0;  // in the epoch's order
    for (std::int64_t i = 0; i < batches.size(); ++i) {
      const Batch b = batches.next();
      const std::int64_t rows = i < 4 ? kBatch : kSamples - 4 * kBatch;
      ASSERT_EQ(b.x.shape(), Shape({rows, 2})) << "batch " << i;
      ASSERT_EQ(b.y.shape(), Shape({rows})) << "batch " << i;
      const std::vector<float> x = b.x.to_vector<float>();
      const std::vector<std::int64_t> y = b.y.to_vector<std::int64_t>();
      for (std::int64_t k = 0; k < rows; ++k, ++position) {
        const std::int64_t r = order[static_cast<std::size_t>(position)];
        EXPECT_EQ(x[static_cast<std::size_t>(2 * k)], 2.0f * static_cast<float>(r) + 1.0f);
        EXPECT_EQ(x[static_cast<std::size_t>(2 * k + 1)],
                  2.0f * static_cast<float>(100 + r) + 1.0f);
        EXPECT_EQ(y[static_cast<std::size_t>(k)], 1000 + r);
      }
    }
    EXPECT_EQ(position, kSamples);
    EXPECT_EQ(batches.delivered(), 5);
    expect_error<ValueError>([&] { batches.next(); }, {"delivered already"});
  }
}

TEST(PrefetcherTest, BackgroundProducesTheNextBatchWhileTheConsumerHoldsThisOne) {
  // The source of batch 1 must run while the consumer, holding batch 0, waits for it: a
  // synchronous loop could not get past this wait.
  std::atomic<bool> second_started{false};
  Prefetcher batches(
      3,
      [&](std::int64_t i) {
        if (i == 1) second_started = true;
        return Batch{from_vector(std::vector<float>{static_cast<float>(i)}, {1}), Tensor()};
      },
      {.mode = PrefetchMode::background});
  const Batch first = batches.next();
  EXPECT_EQ(first.x.item(), 0.0);
  EXPECT_TRUE(eventually([&] { return second_started.load(); }));
  EXPECT_EQ(batches.next().x.item(), 1.0);
  EXPECT_EQ(batches.next().x.item(), 2.0);
}

TEST(PrefetcherTest, SynchronousProducesOnTheCallingThreadOnlyWhenAsked) {
  std::atomic<std::int64_t> calls{0};
  std::thread::id producer;
  Prefetcher batches(4,
                     [&](std::int64_t i) {
                       calls.fetch_add(1);
                       producer = std::this_thread::get_id();
                       return Batch{scalar(static_cast<double>(i)), Tensor()};
                     },
                     {.mode = PrefetchMode::synchronous});
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(calls.load(), 0);
  EXPECT_EQ(batches.next().x.item(), 0.0);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(producer, std::this_thread::get_id());
}

TEST(PrefetcherTest, BackgroundStaysWithinItsDepth) {
  std::atomic<std::int64_t> calls{0};
  Prefetcher batches(10, indexed_source(&calls), {.mode = PrefetchMode::background, .depth = 2});
  ASSERT_TRUE(eventually([&] { return calls.load() == 2; }));
  std::this_thread::sleep_for(50ms);  // a producer ignoring the depth would have made all 10
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ(batches.next().x.item(), 0.0);  // one taken: room for one more
  ASSERT_TRUE(eventually([&] { return calls.load() == 3; }));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(calls.load(), 3);
}

TEST(PrefetcherTest, AnExceptionReachesTheConsumerAtItsBatch) {
  for (PrefetchMode mode : {PrefetchMode::synchronous, PrefetchMode::background}) {
    std::atomic<std::int64_t> calls{0};
    Prefetcher batches(8,
                       [&](std::int64_t i) {
                         calls.fetch_add(1);
                         if (i == 3) throw std::runtime_error("bad record in batch 3");
                         return Batch{scalar(static_cast<double>(i)), Tensor()};
                       },
                       {.mode = mode});
    for (int i = 0; i < 3; ++i) EXPECT_EQ(batches.next().x.item(), static_cast<double>(i));
    try {
      batches.next();
      ADD_FAILURE() << "batch 3 did not throw";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "bad record in batch 3");
    }
    EXPECT_EQ(batches.delivered(), 4);
    // Nothing after the failed batch is produced, and asking again is an error, not a hang.
    expect_error<ValueError>([&] { batches.next(); }, {"batch 3 failed"});
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(calls.load(), 4);
  }
}

TEST(PrefetcherTest, DestructionMidEpochStopsTheProducer) {
  std::atomic<std::int64_t> calls{0};
  {
    Prefetcher batches(1000, indexed_source(&calls), {.mode = PrefetchMode::background});
    EXPECT_EQ(batches.next().x.item(), 0.0);
    ASSERT_TRUE(eventually([&] { return calls.load() >= 3; }));  // the producer waits, queue full
  }  // joins here; a producer left running would keep calling the source
  const std::int64_t at_exit = calls.load();
  EXPECT_LE(at_exit, 4);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(calls.load(), at_exit);

  // An exception in the consumer's own step unwinds through the destructor the same way.
  std::atomic<std::int64_t> more{0};
  EXPECT_THROW(
      {
        Prefetcher batches(1000, indexed_source(&more), {.mode = PrefetchMode::background});
        batches.next();
        throw std::runtime_error("step failed");
      },
      std::runtime_error);
  EXPECT_LE(more.load(), 4);
}

TEST(PrefetcherTest, TheProducerMakesCpuTensorsWithoutAGraph) {
  // The default device and grad mode are per thread: whatever the consumer has set, the producer
  // sees the CPU and no-grad. (No GPU is touched: Device::cuda is only a default here.)
  DeviceScope consumer_default(Device::cuda(0));
  std::atomic<bool> saw_cpu{false}, saw_no_grad{false};
  Prefetcher batches(1,
                     [&](std::int64_t) {
                       saw_cpu = default_device() == Device::cpu();
                       saw_no_grad = !is_grad_enabled();
                       return Batch{zeros({2}, {.device = Device::cpu()}), Tensor()};
                     },
                     {.device = Device::cpu(), .mode = PrefetchMode::background});
  const Batch b = batches.next();
  EXPECT_TRUE(saw_cpu.load());
  EXPECT_TRUE(saw_no_grad.load());
  EXPECT_EQ(b.x.device(), Device::cpu());
  EXPECT_FALSE(b.y.defined());
}

TEST(PrefetcherTest, OptionsAreChecked) {
  expect_error<ValueError>([] { Prefetcher(-1, indexed_source()); }, {">= 0"});
  expect_error<ValueError>([] { Prefetcher(1, Prefetcher::Source()); }, {"empty function"});
  expect_error<ValueError>([] { Prefetcher(1, indexed_source(), {.depth = 0}); }, {"depth"});
  Prefetcher none(0, indexed_source(), {.mode = PrefetchMode::background});
  expect_error<ValueError>([&] { none.next(); }, {"delivered already"});
  EXPECT_EQ(prefetch_options_for(Device::cpu()).mode, PrefetchMode::synchronous);
  EXPECT_EQ(prefetch_options_for(Device::cuda(0)).mode, PrefetchMode::background);
  EXPECT_EQ(prefetch_options_for(Device::cuda(0)).device, Device::cuda(0));
}

}  // namespace
}  // namespace mixprec::data
