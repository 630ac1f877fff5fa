// callbacks::TerminateOnNaN (include/mixprec/callbacks/terminate_on_nan.h).
#include "mixprec/callbacks/terminate_on_nan.h"

#include <cmath>
#include <iostream>

#include "mixprec/models/model.h"

namespace mixprec::callbacks {

void TerminateOnNaN::on_train_batch_end(std::int64_t batch, const Logs& logs) {
  const std::optional<double> loss = logs.get("loss");
  if (!loss || std::isfinite(*loss)) return;
  std::cout << "Batch " << batch << ": Invalid loss, terminating training\n";
  terminated_ = true;
  model().set_stop_training(true);
}

}  // namespace mixprec::callbacks
