// Logs, Callback and CallbackRef (include/mixprec/callbacks/callback.h).
#include "mixprec/callbacks/callback.h"

#include <string>
#include <utility>

#include "mixprec/error.h"

namespace mixprec::callbacks {

Logs::Logs(Values values) : values_(std::move(values)) {}

Logs Logs::lazy(Provider provider) {
  if (!provider) throw ValueError("callbacks::Logs::lazy: the provider is empty");
  Logs logs;
  logs.lazy_ = std::make_shared<Lazy>(Lazy{std::move(provider), std::nullopt});
  return logs;
}

const Logs::Values& Logs::values() const {
  if (!lazy_) return values_;
  if (!lazy_->values) lazy_->values = lazy_->provider();
  return *lazy_->values;
}

std::optional<double> Logs::get(const std::string& name) const {
  for (const auto& [key, value] : values()) {
    if (key == name) return value;
  }
  return std::nullopt;
}

bool is_training_extra(const std::string& name) {
  for (const char* extra :
       {log_names::learning_rate, log_names::loss_scale, log_names::skipped_steps,
        log_names::epoch_seconds, log_names::step_ms, log_names::samples_per_s}) {
    if (name == extra) return true;
  }
  return false;
}

double Logs::at(const std::string& name) const {
  if (const std::optional<double> value = get(name)) return *value;
  std::string names;
  for (const auto& [key, value] : values()) names += (names.empty() ? "" : ", ") + key;
  throw ValueError("callbacks: no log named '" + name +
                   "'; the logs are: " + (names.empty() ? std::string("(none)") : names));
}

Model& Callback::model() const {
  if (model_ == nullptr) {
    throw ValueError(
        "callbacks::Callback::model(): the callback is not attached to a model; fit() and "
        "evaluate() attach their callbacks before the first hook");
  }
  return *model_;
}

void CallbackRef::throw_null() {
  throw ValueError("callbacks: a null std::shared_ptr<Callback> was passed as a callback");
}

}  // namespace mixprec::callbacks
