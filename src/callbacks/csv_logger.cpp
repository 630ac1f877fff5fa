// callbacks::CSVLogger (include/mixprec/callbacks/csv_logger.h).
#include "mixprec/callbacks/csv_logger.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include "callbacks/rank_zero.h"
#include "mixprec/error.h"

namespace mixprec::callbacks {

namespace {
// Shortest text that reads back as the same double ("0.5", "3.2768e+04" as "32768").
std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char text[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(text, sizeof text, "%.*g", precision, v);
    if (std::strtod(text, nullptr) == v) break;
  }
  return text;
}
}  // namespace

CSVLogger::CSVLogger(std::filesystem::path filename, CSVLoggerOptions options)
    : filename_(std::move(filename)), options_(options) {
  if (filename_.empty()) throw ValueError("CSVLogger: the filename is empty");
}

void CSVLogger::on_train_begin(const Logs& logs) {
  (void)logs;
  keys_.clear();
  header_needed_ = true;
  out_.close();
  if (!detail::writes_files()) return;  // data-parallel: rank 0 writes (on_epoch_end: not open)
  std::error_code ec;
  if (options_.append && std::filesystem::exists(filename_, ec) &&
      std::filesystem::file_size(filename_, ec) > 0) {
    header_needed_ = false;
  }
  out_.close();
  out_.clear();
  out_.open(filename_, options_.append ? std::ios::app : std::ios::trunc);
  if (!out_) {
    throw IOError("CSVLogger: cannot open '" + filename_.string() +
                  "' for writing: " + std::strerror(errno));
  }
}

void CSVLogger::on_epoch_end(int epoch, const Logs& logs) {
  if (!out_.is_open()) return;
  if (keys_.empty()) {
    for (const auto& [name, value] : logs) keys_.push_back(name);
    std::sort(keys_.begin(), keys_.end());
    if (header_needed_) {
      out_ << "epoch";
      for (const std::string& k : keys_) out_ << options_.separator << k;
      out_ << '\n';
      header_needed_ = false;
    }
  }
  out_ << epoch;
  // A column missing from this epoch's logs is left empty (Keras writes "NA").
  for (const std::string& k : keys_) {
    const std::optional<double> v = logs.get(k);
    out_ << options_.separator << (v ? format_double(*v) : std::string("NA"));
  }
  out_ << '\n';
  out_.flush();
  if (!out_) throw IOError("CSVLogger: writing '" + filename_.string() + "' failed");
}

void CSVLogger::on_train_end(const Logs& logs) {
  (void)logs;
  out_.close();
}

}  // namespace mixprec::callbacks
