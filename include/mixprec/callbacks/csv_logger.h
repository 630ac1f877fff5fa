// keras.callbacks.CSVLogger: one CSV row per epoch: "epoch" (0-based, as Keras) then every log in
// sorted order (the metrics, val_ metrics, learning_rate, loss_scale, ...). The file is flushed
// after every row, so a crashed run keeps its rows.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mixprec/callbacks/callback.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::callbacks {

struct CSVLoggerOptions {
  char separator = ',';
  // Append to an existing file (a resumed run) instead of overwriting it; the header is written
  // only when the file is empty.
  bool append = false;
};

class CSVLogger : public Callback {
 public:
  explicit CSVLogger(std::filesystem::path filename, CSVLoggerOptions options = {});

  // IOError when the file cannot be opened.
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_end(const Logs& logs) override;

 private:
  std::filesystem::path filename_;
  CSVLoggerOptions options_;
  std::ofstream out_;
  std::vector<std::string> keys_;  // the columns after "epoch", fixed by the first row
  bool header_needed_ = true;
};

}  // namespace mixprec::callbacks

#pragma GCC visibility pop
