// A built-in metric from its Keras config (Metric::get_config): the one place that maps a class
// name to its constructor, for the compile-config reader (load_model) and for evaluate()'s copies
// of the metrics given to compile().
#pragma once

#include <optional>

#include "mixprec/metrics.h"

namespace mixprec::metrics {

// A new metric (own state) of config's class, name and options; nullopt for a class name that is
// not a built-in metric.
std::optional<Metric> from_config(const Metric::Config& config);

}  // namespace mixprec::metrics
