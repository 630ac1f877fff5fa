// SIGINT and SIGTERM during `mixprec train` (stop_signal.h).
#include "stop_signal.h"

#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

namespace mixprec::cli {

namespace {

volatile std::sig_atomic_t g_signal = 0;
struct sigaction g_previous_int {};
struct sigaction g_previous_term {};

// Async-signal-safe only: write(2), signal(2), raise(3).
extern "C" void on_stop_signal(int signal) {
  if (g_signal != 0) {  // the second one: stop now, with the signal's own status (delivered
                        // again, by the default action, as soon as this handler returns)
    ::signal(signal, SIG_DFL);
    ::raise(signal);
    return;
  }
  g_signal = signal;
  static const char kMessage[] =
      "\nmixprec: stopping after the current step (send the signal again to stop at once)\n";
  const ssize_t ignored = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  (void)ignored;
}

class StopOnSignal : public callbacks::Callback {
 public:
  void on_epoch_end(int epoch, const callbacks::Logs& logs) override {
    (void)epoch, (void)logs;
    if (g_signal != 0) model().set_stop_training(true);
  }
  void on_train_batch_end(std::int64_t batch, const callbacks::Logs& logs) override {
    (void)batch, (void)logs;
    if (g_signal != 0) model().set_stop_training(true);
  }
};

}  // namespace

SignalStopScope::SignalStopScope() {
  g_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  // The two never interrupt each other's handler: the second one always sees the first's flag.
  sigemptyset(&action.sa_mask);
  sigaddset(&action.sa_mask, SIGINT);
  sigaddset(&action.sa_mask, SIGTERM);
  action.sa_flags = SA_RESTART;  // reads and writes in progress carry on
  ::sigaction(SIGINT, &action, &g_previous_int);
  ::sigaction(SIGTERM, &action, &g_previous_term);
}

SignalStopScope::~SignalStopScope() {
  ::sigaction(SIGINT, &g_previous_int, nullptr);
  ::sigaction(SIGTERM, &g_previous_term, nullptr);
}

int stop_signal() { return g_signal; }

const char* signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
  }
}

std::shared_ptr<callbacks::Callback> make_stop_on_signal() {
  return std::make_shared<StopOnSignal>();
}

}  // namespace mixprec::cli
