// callbacks::ModelCheckpoint (include/mixprec/callbacks/model_checkpoint.h).
#include "mixprec/callbacks/model_checkpoint.h"

#include <algorithm>
#include <iostream>
#include <system_error>

#include "callbacks/batch_count.h"
#include "callbacks/filepath_template.h"
#include "callbacks/rank_zero.h"
#include "io/checkpoint_state.h"
#include "mixprec/error.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/logging.h"
#include "mixprec/models/model.h"

namespace mixprec::callbacks {

ModelCheckpoint::ModelCheckpoint(ModelCheckpointOptions options)
    : options_(std::move(options)),
      monitor_(options_.monitor, options_.mode, 0.0, "ModelCheckpoint") {
  detail::check_filepath_template(options_.filepath);
  if (const auto* s = std::get_if<std::string>(&options_.save_freq)) {
    if (*s != "epoch") {
      throw ValueError(
          "ModelCheckpoint: save_freq must be \"epoch\" or a number of batches > 0, "
          "got \"" +
          *s + "\"");
    }
  } else {
    every_batches_ = std::get<std::int64_t>(options_.save_freq);
    if (every_batches_ <= 0) {
      throw ValueError(
          "ModelCheckpoint: save_freq must be \"epoch\" or a number of batches > 0, "
          "got " +
          std::to_string(every_batches_));
    }
  }
  if (options_.max_to_keep < 0) {
    throw ValueError("ModelCheckpoint: max_to_keep must be >= 0 (0 keeps every file), got " +
                     std::to_string(options_.max_to_keep));
  }
}

void ModelCheckpoint::on_train_begin(const Logs& logs) {
  (void)logs;
  batches_seen_ = 0;
  execution_begun_ = -1;
  monitor_.set_best(options_.initial_value_threshold);
}

void ModelCheckpoint::on_epoch_begin(int epoch, const Logs& logs) {
  (void)logs;
  epoch_ = epoch;
}

void ModelCheckpoint::on_epoch_end(int epoch, const Logs& logs) {
  if (every_batches_ == 0) save(epoch, params().steps - 1, logs);
}

void ModelCheckpoint::on_train_batch_begin(std::int64_t batch, const Logs& logs) {
  (void)logs;
  detail::begin_batches(execution_begun_, batch);
}

void ModelCheckpoint::on_train_batch_end(std::int64_t batch, const Logs& logs) {
  if (detail::end_batches(every_batches_, batches_seen_, execution_begun_, batch)) {
    save(epoch_, batch, logs);
  }
}

void ModelCheckpoint::save(int epoch, std::int64_t batch, const Logs& logs) {
  // Data-parallel: the group's running sums for rank 0's checkpoint, on every rank before any
  // rank decides (a collective).
  if (!options_.save_weights_only) io::detail::gather_running_sums(model());
  if (options_.save_best_only) {
    const std::optional<double> value = monitor_.read(logs);
    if (!value) {
      if (!warned_missing_) {
        log(LogLevel::warning, "ModelCheckpoint: can save the best model only with '" +
                                   monitor_.name() + "' available; skipping");
        warned_missing_ = true;
      }
      return;
    }
    if (!monitor_.improved(*value)) return;
    monitor_.set_best(*value);
  }
  if (!detail::writes_files()) return;  // data-parallel: rank 0 writes, every rank decides
  const std::filesystem::path path = detail::format_filepath(options_.filepath, epoch, batch, logs);
  if (path.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
      throw IOError("ModelCheckpoint: cannot create '" + path.parent_path().string() +
                    "': " + ec.message());
    }
  }
  if (options_.save_weights_only) {
    model().save_weights(path);
  } else {
    io::save_checkpoint(model(), path);
  }
  if (options_.verbose) std::cout << "Epoch " << epoch + 1 << ": saving model to " << path << "\n";
  kept_.erase(std::remove(kept_.begin(), kept_.end(), path), kept_.end());
  kept_.push_back(path);
  while (options_.max_to_keep > 0 &&
         kept_.size() > static_cast<std::size_t>(options_.max_to_keep)) {
    std::error_code ignored;  // a file already gone is not an error
    std::filesystem::remove(kept_.front(), ignored);
    kept_.pop_front();
  }
}

}  // namespace mixprec::callbacks
