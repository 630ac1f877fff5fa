// callbacks::BackupAndRestore (include/mixprec/callbacks/backup_and_restore.h).
#include "mixprec/callbacks/backup_and_restore.h"

#include <algorithm>
#include <iostream>
#include <system_error>
#include <utility>

#include "callbacks/batch_count.h"
#include "callbacks/rank_zero.h"
#include "io/checkpoint_state.h"
#include "mixprec/error.h"
#include "mixprec/logging.h"
#include "mixprec/models/model.h"

namespace mixprec::callbacks {

namespace {

constexpr const char* kPrefix = "ckpt-";
constexpr const char* kSuffix = ".safetensors";

// n for "ckpt-<n>.safetensors", nothing for any other name (temporary files included).
std::optional<std::int64_t> checkpoint_number(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  const std::string prefix = kPrefix, suffix = kSuffix;
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return std::nullopt;
  }
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 15 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) {
    return std::nullopt;
  }
  return std::stoll(digits);
}

std::int64_t parse_save_freq(const std::variant<std::string, std::int64_t>& f) {
  if (const auto* s = std::get_if<std::string>(&f)) {
    if (*s == "epoch") return 0;
    throw ValueError(
        "BackupAndRestore: save_freq must be \"epoch\" or a number of batches > 0, "
        "got \"" +
        *s + "\"");
  }
  const std::int64_t n = std::get<std::int64_t>(f);
  if (n <= 0) {
    throw ValueError(
        "BackupAndRestore: save_freq must be \"epoch\" or a number of batches > 0, "
        "got " +
        std::to_string(n));
  }
  return n;
}

}  // namespace

BackupAndRestore::BackupAndRestore(BackupAndRestoreOptions options)
    : options_(std::move(options)), every_batches_(parse_save_freq(options_.save_freq)) {
  if (options_.backup_dir.empty()) throw ValueError("BackupAndRestore: backup_dir is empty");
  if (options_.max_to_keep < 1) {
    throw ValueError("BackupAndRestore: max_to_keep must be >= 1, got " +
                     std::to_string(options_.max_to_keep));
  }
}

std::vector<std::filesystem::path> BackupAndRestore::checkpoints() const {
  std::vector<std::pair<std::int64_t, std::filesystem::path>> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(options_.backup_dir, ec)) {
    if (const auto n = checkpoint_number(entry.path()); n && entry.is_regular_file(ec)) {
      found.emplace_back(*n, entry.path());
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<std::filesystem::path> out;
  for (auto& [n, p] : found) out.push_back(std::move(p));
  return out;
}

void BackupAndRestore::on_train_begin(const Logs& logs) {
  (void)logs;
  restored_.reset();
  restored_from_.reset();
  deletable_.clear();
  kept_.clear();
  batches_seen_ = 0;
  execution_begun_ = -1;
  std::error_code ec;
  std::filesystem::create_directories(options_.backup_dir, ec);
  if (ec) {
    throw IOError("BackupAndRestore: cannot create '" + options_.backup_dir.string() +
                  "': " + ec.message());
  }
  const std::vector<std::filesystem::path> files = checkpoints();
  next_number_ = files.empty() ? 1 : *checkpoint_number(files.back()) + 1;
  if (options_.restart) {
    kept_.insert(files.begin(), files.end());
    return;
  }
  // Newest first; an unreadable file (IOError) falls back to the one before it.
  std::vector<std::string> failures;
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    try {
      restored_ = io::load_checkpoint(model(), *it, options_.load_options);
      restored_from_ = *it;
      deletable_.insert(*it);
      break;
    } catch (const IOError& e) {
      kept_.insert(*it);
      failures.emplace_back(e.what());
      log(LogLevel::warning,
          std::string("BackupAndRestore: skipping an unreadable checkpoint: ") + e.what());
    }
  }
  if (!files.empty() && !restored_) {
    // Asked to resume and nothing to resume from: starting over would lose the run (and the
    // rotation used to delete the files). Every file's reason, on one line.
    std::string message = "BackupAndRestore: " + options_.backup_dir.string() + " holds " +
                          std::to_string(files.size()) + " checkpoint" +
                          (files.size() == 1 ? "" : "s") + " and none can be restored (";
    for (std::size_t i = 0; i < failures.size(); ++i) {
      message += (i ? "; " : "") + failures[i];
    }
    message +=
        "); nothing was changed. To start a new run, use another directory, or restart in this "
        "one (--restart; BackupAndRestoreOptions::restart), which keeps these files";
    throw IOError(message);
  }
  if (restored_ && options_.verbose) {
    std::cout << "BackupAndRestore: resuming from " << restored_from_->string() << " (epoch "
              << restored_->epoch + 1 << ", batch " << restored_->step << ")\n";
  }
}

void BackupAndRestore::on_epoch_end(int epoch, const Logs& logs) {
  (void)epoch, (void)logs;
  if (every_batches_ == 0) backup();
}

void BackupAndRestore::on_train_batch_begin(std::int64_t batch, const Logs& logs) {
  (void)logs;
  detail::begin_batches(execution_begun_, batch);
}

void BackupAndRestore::on_train_batch_end(std::int64_t batch, const Logs& logs) {
  (void)logs;
  if (detail::end_batches(every_batches_, batches_seen_, execution_begun_, batch)) backup();
}

void BackupAndRestore::backup() { (void)backup_now(); }

std::filesystem::path BackupAndRestore::backup_now() {
  ++next_number_;                            // the same numbering on every rank
  io::detail::gather_running_sums(model());  // data-parallel: a collective, on every rank
  const std::filesystem::path path =
      options_.backup_dir / (kPrefix + std::to_string(next_number_ - 1) + kSuffix);
  if (!detail::writes_files()) return path;  // data-parallel: rank 0 writes, every rank restores
  io::save_checkpoint(model(), path);
  deletable_.insert(path);
  kept_.erase(path);
  if (options_.verbose) std::cout << "BackupAndRestore: saved " << path.string() << "\n";
  remove_old(static_cast<std::size_t>(options_.max_to_keep));
  return path;
}

bool BackupAndRestore::may_delete(const std::filesystem::path& p) {
  if (deletable_.contains(p)) return true;
  if (kept_.contains(p)) return false;
  // Neither written nor tried by this run (an older checkpoint of it): deleted only when it can
  // be read; the verdict is remembered.
  try {
    (void)io::read_checkpoint_info(p);
    deletable_.insert(p);
    return true;
  } catch (const Error&) {
    kept_.insert(p);
    return false;
  }
}

void BackupAndRestore::remove_old(std::size_t keep) {
  const std::vector<std::filesystem::path> files = checkpoints();
  for (std::size_t i = 0; i + keep < files.size(); ++i) {
    if (!may_delete(files[i])) continue;
    std::error_code ignored;
    std::filesystem::remove(files[i], ignored);
    deletable_.erase(files[i]);
  }
}

void BackupAndRestore::on_train_end(const Logs& logs) {
  (void)logs;
  if (!options_.delete_checkpoint || !detail::writes_files()) return;
  remove_old(0);
}

}  // namespace mixprec::callbacks
