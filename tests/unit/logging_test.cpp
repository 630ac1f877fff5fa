// The logging facility: handler replacement and restoration, the default stderr format, warn_once
// keys (including under concurrent first calls) and their reset.
#include "mixprec/logging.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace mixprec {
namespace {

// Installs a capturing handler for its lifetime and restores the previous one afterwards.
class CapturedLog {
 public:
  CapturedLog()
      : previous_(set_log_handler([this](LogLevel level, std::string_view message) {
          messages_.emplace_back(level, std::string(message));
        })) {}
  ~CapturedLog() { set_log_handler(std::move(previous_)); }
  const std::vector<std::pair<LogLevel, std::string>>& messages() const { return messages_; }

 private:
  std::vector<std::pair<LogLevel, std::string>> messages_;
  LogHandler previous_;
};

class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override { reset_warn_once_for_testing(); }
  void TearDown() override { reset_warn_once_for_testing(); }
};

TEST_F(LoggingTest, HandlerReceivesLevelAndMessage) {
  CapturedLog log_capture;
  log(LogLevel::info, "loaded 3 layers");
  log(LogLevel::warning, "scale stuck at 1");
  ASSERT_EQ(log_capture.messages().size(), 2u);
  EXPECT_EQ(log_capture.messages()[0].first, LogLevel::info);
  EXPECT_EQ(log_capture.messages()[0].second, "loaded 3 layers");
  EXPECT_EQ(log_capture.messages()[1].first, LogLevel::warning);
  EXPECT_EQ(log_capture.messages()[1].second, "scale stuck at 1");
}

TEST_F(LoggingTest, SetLogHandlerReturnsThePreviousHandler) {
  std::vector<std::string> first, second;
  LogHandler original =
      set_log_handler([&](LogLevel, std::string_view m) { first.emplace_back(m); });
  LogHandler returned =
      set_log_handler([&](LogLevel, std::string_view m) { second.emplace_back(m); });
  log(LogLevel::warning, "to second");
  // `returned` is the first handler: calling it directly and reinstalling it both reach `first`.
  ASSERT_TRUE(returned);
  returned(LogLevel::warning, "direct");
  set_log_handler(returned);
  log(LogLevel::warning, "to first");
  set_log_handler(original);
  EXPECT_EQ(second, std::vector<std::string>{"to second"});
  EXPECT_EQ(first, (std::vector<std::string>{"direct", "to first"}));
}

TEST_F(LoggingTest, DefaultHandlerWritesOneTaggedLineToStderr) {
  LogHandler previous = set_log_handler(nullptr);  // empty: the default handler
  ::testing::internal::CaptureStderr();
  log(LogLevel::warning, "float16 may be slow here");
  log(LogLevel::info, "picked mixed_bfloat16");
  const std::string err = ::testing::internal::GetCapturedStderr();
  set_log_handler(std::move(previous));
  EXPECT_EQ(err,
            "mixprec: warning: float16 may be slow here\n"
            "mixprec: info: picked mixed_bfloat16\n");
}

TEST_F(LoggingTest, WarnOnceLogsEachKeyOnce) {
  CapturedLog log_capture;
  warn_once("a", "first a");
  warn_once("a", "second a");
  warn_once("b", "first b");
  warn_once("a", "third a");
  ASSERT_EQ(log_capture.messages().size(), 2u);
  EXPECT_EQ(log_capture.messages()[0], std::make_pair(LogLevel::warning, std::string("first a")));
  EXPECT_EQ(log_capture.messages()[1], std::make_pair(LogLevel::warning, std::string("first b")));
}

TEST_F(LoggingTest, ResetLetsAKeyWarnAgain) {
  CapturedLog log_capture;
  warn_once("k", "once");
  warn_once("k", "suppressed");
  reset_warn_once_for_testing();
  warn_once("k", "again");
  ASSERT_EQ(log_capture.messages().size(), 2u);
  EXPECT_EQ(log_capture.messages()[1].second, "again");
}

TEST_F(LoggingTest, ConcurrentFirstCallsWarnExactlyOnce) {
  CapturedLog log_capture;  // calls are serialised by the library, so the vector needs no lock
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i) {
        warn_once("shared", "shared key");
        warn_once("thread-" + std::to_string(t), "own key");
        log(LogLevel::info, "noise");
      }
    });
  }
  for (auto& th : threads) th.join();
  int shared = 0, own = 0, noise = 0;
  for (const auto& [level, message] : log_capture.messages()) {
    if (message == "shared key") ++shared;
    if (message == "own key") ++own;
    if (message == "noise") ++noise;
  }
  EXPECT_EQ(shared, 1);
  EXPECT_EQ(own, 8);
  EXPECT_EQ(noise, 8 * 200);
}

TEST_F(LoggingTest, AHandlerMayLogItself) {
  std::vector<std::string> seen;
  LogHandler previous = set_log_handler([&](LogLevel, std::string_view m) {
    seen.emplace_back(m);
    if (m == "outer") log(LogLevel::info, "inner");  // must not deadlock
  });
  log(LogLevel::warning, "outer");
  set_log_handler(std::move(previous));
  EXPECT_EQ(seen, (std::vector<std::string>{"outer", "inner"}));
}

}  // namespace
}  // namespace mixprec
