// callbacks::TensorBoard (include/mixprec/callbacks/tensorboard.h).
#include "mixprec/callbacks/tensorboard.h"

#include <cmath>
#include <string>
#include <vector>

#include "callbacks/batch_count.h"
#include "callbacks/rank_zero.h"
#include "mixprec/error.h"
#include "mixprec/io/summary_writer.h"
#include "mixprec/models/model.h"
#include "models/training_state.h"

namespace mixprec::callbacks {

namespace {

std::int64_t parse_update_freq(const std::variant<std::string, std::int64_t>& f) {
  if (const auto* s = std::get_if<std::string>(&f)) {
    if (*s == "epoch") return 0;
    throw ValueError(
        "TensorBoard: update_freq must be \"epoch\" or a number of batches > 0, got \"" + *s +
        "\"");
  }
  const std::int64_t n = std::get<std::int64_t>(f);
  if (n <= 0) {
    throw ValueError("TensorBoard: update_freq must be \"epoch\" or a number of batches > 0, got " +
                     std::to_string(n));
  }
  return n;
}

// The finite entries of a gradient as float32 (a skipped step's gradient holds Inf/NaN).
std::vector<float> finite_values(const Tensor& t) {
  std::vector<float> out;
  for (float v : t.to(Device::cpu()).to(DType::float32).contiguous().to_vector<float>()) {
    if (std::isfinite(v)) out.push_back(v);
  }
  return out;
}

// "epoch_" + the log name, except for a name that already starts with it (epoch_seconds).
std::string epoch_tag(const std::string& name) {
  return name.rfind("epoch_", 0) == 0 ? name : "epoch_" + name;
}

}  // namespace

TensorBoard::TensorBoard(TensorBoardOptions options)
    : options_(std::move(options)), every_batches_(parse_update_freq(options_.update_freq)) {
  if (options_.log_dir.empty()) throw ValueError("TensorBoard: log_dir is empty");
  if (options_.histogram_freq < 0) {
    throw ValueError("TensorBoard: histogram_freq must be >= 0 (0: no histograms), got " +
                     std::to_string(options_.histogram_freq));
  }
  if (options_.write_gradients && options_.histogram_freq == 0) {
    throw ValueError(
        "TensorBoard: write_gradients needs histogram_freq > 0 (gradients are "
        "written with the histograms)");
  }
}

TensorBoard::TensorBoard(const TensorBoard& other)
    : Callback(other), options_(other.options_), every_batches_(other.every_batches_) {}

TensorBoard::~TensorBoard() = default;

void TensorBoard::on_train_begin(const Logs& logs) {
  (void)logs;
  batches_seen_ = 0;
  execution_begun_ = -1;
  validation_.reset();
  train_.reset();
  // Data-parallel: rank 0 writes; elsewhere no writer is open and every hook returns at once.
  if (!detail::writes_files()) return;
  train_ = std::make_unique<io::SummaryWriter>(options_.log_dir / "train");
  if (options_.write_gradients) {
    models::TrainingState& state = models::require_compiled(model(), "TensorBoard");
    state.keep_last_gradients = true;
  }
}

io::SummaryWriter& TensorBoard::validation_writer() {
  if (!validation_)
    validation_ = std::make_unique<io::SummaryWriter>(options_.log_dir / "validation");
  return *validation_;
}

void TensorBoard::on_train_batch_begin(std::int64_t batch, const Logs& logs) {
  (void)logs;
  detail::begin_batches(execution_begun_, batch);
}

void TensorBoard::on_train_batch_end(std::int64_t batch, const Logs& logs) {
  // Counted on every rank (the writer is rank 0's).
  if (!detail::end_batches(every_batches_, batches_seen_, execution_begun_, batch)) return;
  if (!train_) return;
  const std::int64_t step = model().optimizer().iterations();
  for (const auto& [name, value] : logs) train_->scalar("batch_" + name, step, value);
}

void TensorBoard::on_epoch_end(int epoch, const Logs& logs) {
  if (!train_) return;
  for (const auto& [name, value] : logs) {
    if (name.rfind("val_", 0) == 0) {
      validation_writer().scalar(epoch_tag(name.substr(4)), epoch, value);
    } else {
      train_->scalar(epoch_tag(name), epoch, value);
    }
  }
  if (options_.histogram_freq > 0 && epoch % options_.histogram_freq == 0) write_histograms(epoch);
  // Flushed at the end of every epoch (on the writer thread; this returns once it is written).
  train_->flush();
  if (validation_) validation_->flush();
}

void TensorBoard::write_histograms(int epoch) {
  std::vector<std::string> trainable_names;
  for (const layers::NamedVariable& v : model().named_variables()) {
    train_->histogram(v.name, epoch, v.value);
    if (v.trainable) trainable_names.push_back(v.name);
  }
  if (!options_.write_gradients) return;
  const models::TrainingState& state = models::require_compiled(model(), "TensorBoard");
  const std::vector<Tensor>& grads = state.last_gradients;
  for (std::size_t i = 0; i < grads.size() && i < trainable_names.size(); ++i) {
    if (!grads[i].defined()) continue;
    const std::vector<float> values = finite_values(grads[i]);
    if (values.empty()) continue;
    train_->histogram(trainable_names[i] + "/gradient", epoch, values);
  }
}

void TensorBoard::on_train_end(const Logs& logs) {
  (void)logs;
  if (options_.write_gradients && has_model()) {
    models::TrainingState& state = models::require_compiled(model(), "TensorBoard");
    state.keep_last_gradients = false;
    state.last_gradients.clear();
  }
  if (train_) train_->close();
  if (validation_) validation_->close();
}

}  // namespace mixprec::callbacks
