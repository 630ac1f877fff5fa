// Library logging: the few messages mixprec prints on its own (one-time compatibility warnings,
// informational notes). Everything goes through one replaceable handler so that applications can
// route messages into their own logs and tests can capture them.
#pragma once

#include <functional>
#include <string_view>

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

enum class LogLevel { info, warning };

// Receives every message. Called from whichever thread logs; calls are serialised by the library
// (a handler never runs concurrently with itself), so a handler needs no locking of its own.
using LogHandler = std::function<void(LogLevel, std::string_view)>;

// Sends `message` to the current handler. The default handler writes one line to stderr:
// "mixprec: warning: <message>" or "mixprec: info: <message>".
void log(LogLevel level, std::string_view message);

// Logs `message` as a warning the first time `key` is seen in this process; later calls with the
// same key do nothing. Thread-safe: of racing first calls, exactly one logs.
void warn_once(std::string_view key, std::string_view message);

// Installs `handler` and returns the previous one (so a caller can restore it). An empty handler
// restores the default stderr handler.
LogHandler set_log_handler(LogHandler handler);

// Forgets which warn_once keys have been seen, so that tests can observe one-time warnings again.
void reset_warn_once_for_testing();

}  // namespace mixprec

#pragma GCC visibility pop
