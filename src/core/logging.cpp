#include "mixprec/logging.h"

#include <cstdio>
#include <mutex>
#include <set>
#include <string>

namespace mixprec {

namespace {

void default_handler(LogLevel level, std::string_view message) {
  const char* tag = level == LogLevel::warning ? "warning" : "info";
  // One fprintf per message keeps the line whole when several processes share stderr.
  std::fprintf(stderr, "mixprec: %s: %.*s\n", tag, static_cast<int>(message.size()),
               message.data());
}

struct LogState {
  std::mutex handler_mutex;  // guards `handler`
  LogHandler handler = default_handler;
  // Serialises handler calls; recursive so that a handler that itself logs does not deadlock.
  std::recursive_mutex call_mutex;
  std::mutex once_mutex;  // guards `seen`
  std::set<std::string, std::less<>> seen;
};

LogState& state() {
  static LogState s;
  return s;
}

}  // namespace

void log(LogLevel level, std::string_view message) {
  LogState& s = state();
  LogHandler handler;
  {
    // Copied out so that a handler may itself call set_log_handler without deadlocking.
    std::lock_guard lock(s.handler_mutex);
    handler = s.handler;
  }
  std::lock_guard call(s.call_mutex);
  handler(level, message);
}

void warn_once(std::string_view key, std::string_view message) {
  LogState& s = state();
  {
    std::lock_guard lock(s.once_mutex);
    if (!s.seen.emplace(key).second) return;
  }
  log(LogLevel::warning, message);
}

LogHandler set_log_handler(LogHandler handler) {
  LogState& s = state();
  std::lock_guard lock(s.handler_mutex);
  LogHandler previous = std::move(s.handler);
  s.handler = handler ? std::move(handler) : LogHandler(default_handler);
  return previous;
}

void reset_warn_once_for_testing() {
  LogState& s = state();
  std::lock_guard lock(s.once_mutex);
  s.seen.clear();
}

}  // namespace mixprec
