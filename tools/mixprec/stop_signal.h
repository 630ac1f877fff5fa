// Graceful stop of `mixprec train` on SIGINT or SIGTERM (a ^C, a preempted cloud job): the first
// signal lets the current optimisation step finish, fit() then stops (StopOnSignal sets
// stop_training after the batch), the run's callbacks write a checkpoint when --checkpoint-dir is
// set (run_callbacks.h: the final checkpoint of ResumeReport), the command says where and how to
// resume and exits with 128 + the signal (130 for SIGINT, 143 for SIGTERM). A second signal stops
// the process at once (the default action: the signal's own exit status).
#pragma once

#include <memory>

#include "mixprec/mixprec.h"

namespace mixprec::cli {

// Installs the handlers for SIGINT and SIGTERM while it lives (the previous ones come back in the
// destructor). One at a time.
class SignalStopScope {
 public:
  SignalStopScope();
  ~SignalStopScope();
  SignalStopScope(const SignalStopScope&) = delete;
  SignalStopScope& operator=(const SignalStopScope&) = delete;
};

// The signal received since the scope began (SIGINT, SIGTERM), 0 for none.
int stop_signal();
// "SIGINT", "SIGTERM".
const char* signal_name(int signal);

// Thrown by `train` once a stopped run has written what it could; main() returns 128 + signal.
struct StoppedBySignal {
  int signal = 0;
};

// The fit() callback: sets stop_training after the batch during which a signal arrived (or at the
// end of the epoch, for one that came during validation).
std::shared_ptr<callbacks::Callback> make_stop_on_signal();

}  // namespace mixprec::cli
