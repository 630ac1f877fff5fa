// io::SummaryWriter: event files read back by the independent decoder (tests/support/
// tfevents_decoder.h, both CRCs checked), the file name, flush/close semantics, and errors: an
// unusable directory at once, a write failure on the writer thread at the next call.
#include "mixprec/io/summary_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <limits>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "io/histogram.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "support/tfevents_decoder.h"

namespace mixprec::io {
namespace {

namespace dec = testing::tfevents;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void expect_histo_equals(const dec::Histo& got, const Histogram& want) {
  EXPECT_EQ(got.min, want.min);
  EXPECT_EQ(got.max, want.max);
  EXPECT_EQ(got.num, want.num);
  EXPECT_EQ(got.sum, want.sum);
  EXPECT_EQ(got.sum_squares, want.sum_squares);
  EXPECT_EQ(got.bucket_limit, want.bucket_limit);
  EXPECT_EQ(got.bucket, want.bucket);
}

TEST(SummaryWriterTest, WritesScalarsAndHistogramsThatReadBack) {
  testing::TempDir dir;
  const double before = now_seconds();
  std::filesystem::path file;
  const std::vector<float> weights = {0.5f, -0.25f, 0.125f, 3.0f};
  {
    SummaryWriter writer(dir.path() / "logs" / "train");  // parents are created
    file = writer.path();
    writer.scalar("epoch_loss", 0, 0.75);
    writer.scalar("epoch_loss", 1, 0.5);
    writer.scalar("big", 1234567890123LL, 1e10);
    writer.scalar("negative_step", -3, -2.0);
    writer.histogram("dense/kernel", 2, weights);
    // A float16 tensor: converted to float32 on the caller's thread.
    writer.histogram("dense/bias", 2,
                     from_vector(std::vector<float>{1.0f, 2.0f}, {2}).to(DType::float16));
    writer.close();
    writer.close();  // idempotent
  }
  const double after = now_seconds();
  EXPECT_EQ(file.parent_path(), dir.path() / "logs" / "train");
  const std::vector<dec::Event> events = dec::read_events(file);
  ASSERT_EQ(events.size(), 7u);

  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_TRUE(events[0].values.empty());
  for (const dec::Event& e : events) {
    EXPECT_GE(e.wall_time, before - 1.0);
    EXPECT_LE(e.wall_time, after + 1.0);
  }
  const auto expect_scalar = [](const dec::Event& e, const std::string& tag, std::int64_t step,
                                float value) {
    EXPECT_FALSE(e.file_version.has_value());
    ASSERT_EQ(e.values.size(), 1u);
    EXPECT_EQ(e.values[0].tag, tag);
    EXPECT_EQ(e.step, step);
    ASSERT_TRUE(e.values[0].simple_value.has_value()) << tag;
    EXPECT_EQ(*e.values[0].simple_value, value);
    EXPECT_FALSE(e.values[0].histo.has_value());
  };
  expect_scalar(events[1], "epoch_loss", 0, 0.75f);
  expect_scalar(events[2], "epoch_loss", 1, 0.5f);
  expect_scalar(events[3], "big", 1234567890123LL, 1e10f);
  expect_scalar(events[4], "negative_step", -3, -2.0f);

  ASSERT_EQ(events[5].values.size(), 1u);
  EXPECT_EQ(events[5].step, 2);
  EXPECT_EQ(events[5].values[0].tag, "dense/kernel");
  ASSERT_TRUE(events[5].values[0].histo.has_value());
  EXPECT_FALSE(events[5].values[0].simple_value.has_value());
  expect_histo_equals(*events[5].values[0].histo, make_histogram(weights));
  EXPECT_EQ(events[5].values[0].histo->num, 4.0);
  EXPECT_EQ(events[5].values[0].histo->max, 3.0);

  ASSERT_EQ(events[6].values.size(), 1u);
  EXPECT_EQ(events[6].values[0].tag, "dense/bias");
  ASSERT_TRUE(events[6].values[0].histo.has_value());
  expect_histo_equals(*events[6].values[0].histo, make_histogram(std::vector<float>{1.0f, 2.0f}));
}

TEST(SummaryWriterTest, FileNameIsKerasLike) {
  testing::TempDir dir;
  SummaryWriter a(dir.path());
  SummaryWriter b(dir.path());  // same second, same directory: a different file
  EXPECT_NE(a.path(), b.path());
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  const std::regex pattern("events\\.out\\.tfevents\\.([0-9]+)\\." + std::string(host) + "\\." +
                           std::to_string(getpid()) + "\\.[0-9]+\\.v2");
  std::smatch m;
  const std::string name = a.path().filename().string();
  ASSERT_TRUE(std::regex_match(name, m, pattern)) << name;
  EXPECT_NEAR(std::stod(m[1].str()), now_seconds(), 60.0);
}

TEST(SummaryWriterTest, FlushMakesEverythingQueuedReadable) {
  testing::TempDir dir;
  SummaryWriter writer(dir.path());
  for (int i = 0; i < 100; ++i) writer.scalar("batch_loss", i, 1.0 / (i + 1));
  writer.histogram("h", 0, std::vector<float>(1000, 0.5f));
  writer.flush();
  // Still open: the file already holds every record.
  const std::vector<dec::Event> events = dec::read_events(writer.path());
  ASSERT_EQ(events.size(), 102u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(events[1 + i].step, i);
    EXPECT_EQ(*events[1 + i].values.at(0).simple_value, static_cast<float>(1.0 / (i + 1)));
  }
  EXPECT_EQ(events[101].values.at(0).histo->num, 1000.0);
  writer.scalar("after_flush", 7, 1.0);
  writer.close();
  EXPECT_EQ(dec::read_events(writer.path()).size(), 103u);
}

TEST(SummaryWriterTest, TheDestructorClosesAndFlushes) {
  testing::TempDir dir;
  std::filesystem::path file;
  {
    SummaryWriter writer(dir.path());
    file = writer.path();
    writer.scalar("x", 1, 2.0);
  }
  const std::vector<dec::Event> events = dec::read_events(file);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].values.at(0).tag, "x");
}

TEST(SummaryWriterTest, CallsOnlyEnqueueWhileTheDiskIsStuck) {
  // The "disk" is a FIFO nobody reads until the caller has made all its calls: the writer thread
  // blocks in write() once the pipe buffer (64 KiB) is full, and the caller must not. Had
  // scalar() written synchronously, the loop could never finish; the reader gives up waiting after
  // a while and drains, so such a failure shows as a failed expectation, not a hang.
  testing::TempDir dir;
  const std::filesystem::path fifo = dir.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // so the writer's open succeeds
  ASSERT_GE(reader, 0);
  ASSERT_EQ(::fcntl(reader, F_SETFL, 0), 0);  // blocking reads from here on

  std::mutex mutex;
  std::condition_variable cv;
  bool calls_done = false;
  bool reader_gave_up = false;
  std::string drained;
  std::thread drain([&] {
    {
      std::unique_lock<std::mutex> lock(mutex);
      reader_gave_up = !cv.wait_for(lock, std::chrono::seconds(30), [&] { return calls_done; });
    }
    char buffer[65536];
    for (::ssize_t n; (n = ::read(reader, buffer, sizeof(buffer))) > 0;) drained.append(buffer, n);
  });

  SummaryWriter writer(SummaryWriter::ExactFile{fifo});
  const std::string tag(1000, 't');
  for (int i = 0; i < 1000; ++i) writer.scalar(tag, i, i);  // about 1 MB of records
  {
    std::lock_guard<std::mutex> lock(mutex);
    calls_done = true;
  }
  cv.notify_one();
  writer.close();  // the reader drains now, so the writer thread can finish
  drain.join();
  ::close(reader);
  EXPECT_FALSE(reader_gave_up) << "scalar() waited for the writer thread";
  const std::vector<std::string> records = dec::split_records(drained);
  ASSERT_EQ(records.size(), 1001u);
  EXPECT_EQ(dec::parse_event(records[1000]).step, 999);
}

TEST(SummaryWriterTest, NonFiniteValues) {
  testing::TempDir dir;
  SummaryWriter writer(dir.path());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  writer.scalar("nan_loss", 0, std::nan(""));  // a scalar keeps what it was given
  writer.scalar("inf_loss", 0, -HUGE_VAL);
  writer.histogram("grads", 0, std::vector<float>{nan, inf, 1.0f});
  writer.histogram("all_nan", 0, std::vector<float>{nan});
  writer.close();
  const std::vector<dec::Event> events = dec::read_events(writer.path());
  ASSERT_EQ(events.size(), 5u);
  EXPECT_TRUE(std::isnan(*events[1].values.at(0).simple_value));
  EXPECT_EQ(*events[2].values.at(0).simple_value, -inf);
  const dec::Histo& h = *events[3].values.at(0).histo;
  EXPECT_EQ(h.num, 1.0);
  EXPECT_EQ(h.min, 1.0);
  EXPECT_EQ(h.max, 1.0);
  ASSERT_EQ(h.bucket.size(), 1u);
  EXPECT_EQ(h.bucket[0], 1.0);
  const dec::Histo& empty = *events[4].values.at(0).histo;
  EXPECT_EQ(empty.num, 0.0);
  EXPECT_EQ(empty.bucket, std::vector<double>{0.0});
}

TEST(SummaryWriterTest, UnusableDirectoryIsAnIOErrorNamingIt) {
  testing::TempDir dir;
  const std::filesystem::path blocker = dir.path() / "a_file";
  std::ofstream(blocker) << "not a directory";
  testing::expect_error<IOError>([&] { SummaryWriter w(blocker / "logs"); },
                                 {"cannot create the log directory", (blocker / "logs").string()});
  testing::expect_error<IOError>([&] { SummaryWriter w(blocker); }, {blocker.string()});
  testing::expect_error<IOError>(
      [&] { SummaryWriter w(SummaryWriter::ExactFile{dir.path() / "missing" / "events"}); },
      {"cannot create the event file", (dir.path() / "missing" / "events").string()});
}

TEST(SummaryWriterTest, AWriteFailureIsReportedByTheNextCall) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  {
    // flush() waits for the writer thread, so it must see the failed write of the first record.
    SummaryWriter writer(SummaryWriter::ExactFile{"/dev/full"});
    testing::expect_error<IOError>([&] { writer.flush(); }, {"/dev/full", "No space"});
    // Not lost after being reported once: every later write call says so too.
    testing::expect_error<IOError>([&] { writer.scalar("x", 0, 1.0); }, {"/dev/full"});
    testing::expect_error<IOError>([&] { writer.flush(); }, {"/dev/full"});
    writer.close();  // already reported: close() does not throw it again
    writer.close();
    testing::expect_error<ValueError>([&] { writer.scalar("x", 0, 1.0); }, {"closed"});
  }
  {
    // Without flush: scalar() only enqueues, so the error shows at the first call after the
    // writer thread failed.
    SummaryWriter writer(SummaryWriter::ExactFile{"/dev/full"});
    bool thrown = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!thrown && std::chrono::steady_clock::now() < deadline) {
      try {
        writer.scalar("x", 0, 1.0);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      } catch (const IOError& e) {
        thrown = true;
        EXPECT_NE(std::string(e.what()).find("/dev/full"), std::string::npos) << e.what();
      }
    }
    EXPECT_TRUE(thrown);
  }
  {
    // close() reports an error no call has reported yet.
    SummaryWriter writer(SummaryWriter::ExactFile{"/dev/full"});
    EXPECT_THROW(writer.close(), IOError);
    EXPECT_NO_THROW(writer.close());
  }
  {
    // The destructor never throws; it logs what nobody was told.
    std::vector<std::string> logged;
    const LogHandler previous =
        set_log_handler([&](LogLevel, std::string_view message) { logged.emplace_back(message); });
    { SummaryWriter writer(SummaryWriter::ExactFile{"/dev/full"}); }
    set_log_handler(previous);
    ASSERT_EQ(logged.size(), 1u);
    EXPECT_NE(logged[0].find("/dev/full"), std::string::npos) << logged[0];
  }
}

}  // namespace
}  // namespace mixprec::io
