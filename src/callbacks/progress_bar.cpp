// Keras-style progress bar and per-pass line (see the header for the formats).
#include "mixprec/callbacks/progress_bar.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>

#include "mixprec/error.h"

namespace mixprec::callbacks {

namespace {

std::string printf_string(const char* format, double value) {
  char buffer[64];
  const int n = std::snprintf(buffer, sizeof buffer, format, value);
  return std::string(buffer, n > 0 ? static_cast<std::size_t>(n) : 0);
}

int digits(std::int64_t n) {
  int d = 1;
  for (; n >= 10; n /= 10) ++d;
  return d;
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

ProgressBar::ProgressBar(ProgressBarOptions options)
    : options_(std::move(options)), out_(options_.stream ? options_.stream : &std::cout) {
  if (options_.width < 1) {
    throw ValueError("ProgressBar: width must be at least 1, got " +
                     std::to_string(options_.width));
  }
  if (!(options_.min_redraw_seconds >= 0.0)) {
    throw ValueError("ProgressBar: min_redraw_seconds must be >= 0, got " +
                     std::to_string(options_.min_redraw_seconds));
  }
}

double ProgressBar::now() const { return options_.clock ? options_.clock() : steady_seconds(); }

void ProgressBar::start(std::int64_t steps, std::string_view title) {
  if (steps < 0) {
    throw ValueError("ProgressBar: a pass needs steps >= 0, got " + std::to_string(steps));
  }
  steps_ = steps;
  title_ = std::string(title);
  started_ = true;
  drawn_ = false;
  last_width_ = 0;
  start_time_ = now();
  last_draw_ = start_time_;
  if (options_.style == ProgressStyle::bar && !title_.empty()) {
    *out_ << title_ << '\n' << std::flush;
  }
}

bool ProgressBar::due() const {
  if (options_.style != ProgressStyle::bar || !started_) return false;
  return !drawn_ || now() - last_draw_ >= options_.min_redraw_seconds;
}

std::string ProgressBar::bar_text(std::int64_t step) const {
  // " 12/235 [=>.....]": the count right-aligned to the width of the total, as Keras.
  const int w = digits(steps_ > 0 ? steps_ : 1);
  std::string count = std::to_string(step);
  std::string text(static_cast<std::size_t>(
                       w > static_cast<int>(count.size()) ? w - static_cast<int>(count.size()) : 0),
                   ' ');
  text += count + "/" + std::to_string(steps_) + " [";
  const double fraction =
      steps_ > 0 ? static_cast<double>(step) / static_cast<double>(steps_) : 1.0;
  int filled = static_cast<int>(options_.width * std::min(fraction, 1.0));
  if (filled > 0) {
    text.append(static_cast<std::size_t>(filled - 1), '=');
    text += step < steps_ ? '>' : '=';
  }
  text.append(static_cast<std::size_t>(options_.width - filled), '.');
  text += ']';
  return text;
}

void ProgressBar::write_in_place(const std::string& line) {
  *out_ << '\r' << line;
  if (line.size() < last_width_) *out_ << std::string(last_width_ - line.size(), ' ');
  last_width_ = line.size();
}

void ProgressBar::update(std::int64_t step, const std::vector<ProgressValue>& values) {
  if (!due()) return;
  const double t = now();
  std::string line = bar_text(step);
  if (step < steps_) {
    const double per_step = step > 0 ? (t - start_time_) / static_cast<double>(step) : 0.0;
    line += " - ETA: " + format_eta(per_step * static_cast<double>(steps_ - step));
  } else {
    line += " - " + printf_string("%.0fs", t - start_time_);
  }
  for (const ProgressValue& v : values) line += " - " + format_value(v);
  write_in_place(line);
  *out_ << std::flush;
  drawn_ = true;
  last_draw_ = t;
}

void ProgressBar::finish(const std::vector<ProgressValue>& values) {
  const double elapsed = now() - start_time_;
  const double per_step = steps_ > 0 ? elapsed / static_cast<double>(steps_) : 0.0;
  std::string timing = printf_string("%.0fs", elapsed) + " " + format_per_step(per_step);
  std::string line;
  if (options_.style == ProgressStyle::bar) {
    line = bar_text(steps_) + " - " + timing;
  } else {
    if (!title_.empty()) line = title_ + " - ";
    line += std::to_string(steps_) + "/" + std::to_string(steps_) + " - " + timing;
  }
  for (const ProgressValue& v : values) line += " - " + format_value(v);
  if (options_.style == ProgressStyle::bar) {
    write_in_place(line);
  } else {
    *out_ << line;
  }
  *out_ << '\n' << std::flush;
  started_ = false;
}

void ProgressBar::interrupt() {
  if (started_ && drawn_ && options_.style == ProgressStyle::bar) *out_ << '\n' << std::flush;
  started_ = false;
}

std::string ProgressBar::format_value(const ProgressValue& value) {
  const double v = value.value;
  if (value.format == ValueFormat::count) {
    // Loss scales are powers of two and step counts integers: print them whole while a double
    // still holds every integer exactly.
    if (std::isfinite(v) && std::fabs(v) < 1e15 && std::floor(v) == v) {
      return value.name + ": " + printf_string("%.0f", v);
    }
    return value.name + ": " + printf_string("%.4g", v);
  }
  return value.name + ": " + printf_string(std::fabs(v) > 1e-3 ? "%.4f" : "%.4e", v);
}

std::string ProgressBar::format_eta(double seconds) {
  const auto s = static_cast<long long>(seconds > 0.0 && std::isfinite(seconds) ? seconds : 0.0);
  char buffer[48];
  if (s > 3600) {
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld:%02lld", s / 3600, (s % 3600) / 60, s % 60);
  } else if (s > 60) {
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld", s / 60, s % 60);
  } else {
    std::snprintf(buffer, sizeof buffer, "%llds", s);
  }
  return buffer;
}

std::string ProgressBar::format_per_step(double seconds_per_step) {
  if (seconds_per_step >= 1.0 || seconds_per_step <= 0.0) {
    return printf_string("%.0fs/step", seconds_per_step > 0.0 ? seconds_per_step : 0.0);
  }
  if (seconds_per_step >= 1e-3) return printf_string("%.0fms/step", seconds_per_step * 1e3);
  return printf_string("%.0fus/step", seconds_per_step * 1e6);
}

}  // namespace mixprec::callbacks
