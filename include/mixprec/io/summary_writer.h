// A TensorBoard event-file writer (tf.summary.create_file_writer): scalars and histograms, written
// by a background thread so that the caller (a training step) never waits on the disk.
//
//   mp::io::SummaryWriter writer("logs/run1/train");
//   writer.scalar("epoch_loss", epoch, loss);
//   writer.histogram("dense_1/kernel", epoch, kernel);
//   writer.flush();  // everything so far is on disk
//   $ tensorboard --logdir logs
//
// The file is <dir>/events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n>.v2 (the name Keras
// gives it; n counts the writers of this process), a sequence of TFRecords each holding one Event
// protocol buffer, the first one {wall_time, file_version: "brain.Event:2"}.
//
// scalar() and histogram() may be called from any thread; records keep the order of the calls.
//
// Errors: IOError naming the directory or file. The constructor reports what it can see at once
// (the directory or file cannot be created); a failure on the writer thread (disk full, I/O error)
// is kept and thrown by the next scalar(), histogram(), flush() or close(), and by every later
// call but close(): once a write has failed nothing more is written. The destructor closes and
// logs (never throws) an error that no call reported.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#pragma GCC visibility push(default)

namespace mixprec {
class Tensor;
}

namespace mixprec::io {

class SummaryWriter {
 public:
  // Creates `dir` (and its parents) and a new event file in it.
  explicit SummaryWriter(std::filesystem::path dir);
  // Writes to exactly `path` (created or truncated; its directory must exist) instead of a new
  // file with a generated name. For tools and tests (e.g. /dev/full to see a write error).
  struct ExactFile {
    std::filesystem::path path;
  };
  explicit SummaryWriter(ExactFile file);
  ~SummaryWriter();
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;
  SummaryWriter(SummaryWriter&&) = delete;
  SummaryWriter& operator=(SummaryWriter&&) = delete;

  // Summary.Value.simple_value (float32, as TensorBoard stores scalars). Only enqueues.
  void scalar(const std::string& tag, std::int64_t step, double value);
  // A HistogramProto of the values (src/io/histogram.h: exponential buckets; non-finite values
  // are left out). The tensor (any dtype, any device) is copied to host float32 now, so the
  // caller may change it right after; bucketing and writing happen on the writer thread.
  void histogram(const std::string& tag, std::int64_t step, const Tensor& values);
  void histogram(const std::string& tag, std::int64_t step, const std::vector<float>& values);

  // Returns once everything enqueued before it is written and fsync'd.
  void flush();
  // flush(), then stops the writer thread and closes the file. Idempotent. Writing after close()
  // is a ValueError.
  void close();

  // The event file.
  const std::filesystem::path& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mixprec::io

#pragma GCC visibility pop
