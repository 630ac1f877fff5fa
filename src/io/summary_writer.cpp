// io::SummaryWriter (include/mixprec/io/summary_writer.h).
//
// Threads: the caller's thread only takes a timestamp, copies the values and appends an Item to
// the queue under a mutex. The writer thread takes the whole queue at once, encodes each item
// (histogram bucketing included), frames it as a TFRecord and write()s the batch with one system
// call; a flush item also fsyncs and then wakes the flush() waiting for it. The first failure is
// kept in `error` and reported to the caller by its next call (never thrown on the writer thread);
// after it the thread drops what it is given, so a broken file does not grow half-written records.
#include "mixprec/io/summary_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "io/histogram.h"
#include "io/tensorboard_event.h"
#include "io/tfrecord.h"
#include "mixprec/error.h"
#include "mixprec/logging.h"
#include "mixprec/tensor.h"

namespace mixprec::io {

namespace {

double unix_seconds_now() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration<double>(now).count();
}

std::string hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n>.v2, n counting this process's writers
// (two writers in one directory within a second get different names, as with Keras).
std::string event_file_name() {
  static std::atomic<std::int64_t> counter{0};
  const auto seconds = static_cast<std::int64_t>(unix_seconds_now());
  return "events.out.tfevents." + std::to_string(seconds) + "." + hostname() + "." +
         std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1)) + ".v2";
}

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

struct SummaryWriter::Impl {
  enum class Kind { file_version, scalar, histogram, flush, stop };
  struct Item {
    Kind kind = Kind::scalar;
    double wall_time = 0.0;
    std::int64_t step = 0;
    std::string tag;
    double value = 0.0;
    std::vector<float> values;
    std::uint64_t flush_id = 0;
  };

  std::filesystem::path file;
  int fd = -1;

  std::mutex mutex;
  std::condition_variable work_ready;   // the writer thread waits for items
  std::condition_variable flush_done;   // flush() waits for its flush item
  std::deque<Item> queue;               // guarded by mutex
  std::uint64_t flushes_requested = 0;  // guarded by mutex
  std::uint64_t flushes_done = 0;       // guarded by mutex
  std::optional<std::string> error;     // guarded by mutex; the first failure
  bool error_reported = false;          // guarded by mutex
  std::atomic<bool> closed{false};      // set by close()
  std::thread thread;

  // Writer-thread state.
  bool failed = false;

  void open(const std::filesystem::path& path, int flags) {
    file = path;
    fd = ::open(path.c_str(), flags | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) {
      throw IOError("SummaryWriter: cannot create the event file '" + path.string() +
                    "': " + errno_text(errno));
    }
    Item first;
    first.kind = Kind::file_version;
    first.wall_time = unix_seconds_now();
    queue.push_back(std::move(first));
    thread = std::thread([this] { run(); });
  }

  void enqueue(Item item) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      queue.push_back(std::move(item));
    }
    work_ready.notify_one();
  }

  // Throws the writer thread's error, if any (every call but close() sees it again).
  void throw_if_failed() {
    std::lock_guard<std::mutex> lock(mutex);
    if (!error) return;
    error_reported = true;
    throw IOError(*error);
  }

  void check_open(const char* what) {
    if (closed) {
      throw ValueError(std::string("SummaryWriter::") + what + ": the writer of '" + file.string() +
                       "' is closed");
    }
    throw_if_failed();
  }

  void wait_for_flush() {
    std::unique_lock<std::mutex> lock(mutex);
    const std::uint64_t id = ++flushes_requested;
    Item item;
    item.kind = Kind::flush;
    item.flush_id = id;
    queue.push_back(std::move(item));
    work_ready.notify_one();
    flush_done.wait(lock, [&] { return flushes_done >= id; });
  }

  // ---- writer thread ----

  void fail(const std::string& message) {
    failed = true;
    std::lock_guard<std::mutex> lock(mutex);
    if (!error) error = message;
  }

  void write_all(const std::string& bytes) {
    const char* p = bytes.data();
    std::size_t left = bytes.size();
    while (left > 0 && !failed) {
      const ::ssize_t n = ::write(fd, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail("SummaryWriter: writing the event file '" + file.string() +
             "' failed: " + errno_text(errno));
        return;
      }
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }

  void sync() {
    if (failed) return;
    if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
      // EINVAL/EROFS: a file that cannot be synced (a pipe, a device such as /dev/null).
      fail("SummaryWriter: fsync of the event file '" + file.string() +
           "' failed: " + errno_text(errno));
    }
  }

  std::string encode(const Item& item) const {
    switch (item.kind) {
      case Kind::file_version: return encode_file_version_event(item.wall_time);
      case Kind::scalar:
        return encode_scalar_event(item.wall_time, item.step, item.tag,
                                   static_cast<float>(item.value));
      case Kind::histogram:
        return encode_histogram_event(item.wall_time, item.step, item.tag,
                                      make_histogram(item.values));
      default: return {};
    }
  }

  void run() {
    bool stop = false;
    while (!stop) {
      std::deque<Item> batch;
      {
        std::unique_lock<std::mutex> lock(mutex);
        work_ready.wait(lock, [&] { return !queue.empty(); });
        batch.swap(queue);
      }
      std::string bytes;
      for (const Item& item : batch) {
        if (item.kind == Kind::stop) {
          stop = true;
        } else if (item.kind == Kind::flush) {
          write_all(bytes);
          bytes.clear();
          sync();
          {
            std::lock_guard<std::mutex> lock(mutex);
            flushes_done = item.flush_id;
          }
          flush_done.notify_all();
        } else if (!failed) {
          try {
            append_tfrecord(bytes, encode(item));
          } catch (const std::exception& e) {
            fail("SummaryWriter: encoding '" + item.tag + "' for '" + file.string() +
                 "' failed: " + e.what());
          }
        }
      }
      write_all(bytes);
    }
  }
};

SummaryWriter::SummaryWriter(std::filesystem::path dir) : impl_(std::make_unique<Impl>()) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    throw IOError("SummaryWriter: cannot create the log directory '" + dir.string() +
                  "': " + (ec ? ec.message() : std::string("a file of that name exists")));
  }
  // O_EXCL: never append to (or truncate) another writer's file.
  impl_->open(dir / event_file_name(), O_CREAT | O_EXCL);
}

SummaryWriter::SummaryWriter(ExactFile file) : impl_(std::make_unique<Impl>()) {
  impl_->open(file.path, O_CREAT | O_TRUNC);
}

SummaryWriter::~SummaryWriter() {
  try {
    close();
  } catch (const std::exception& e) {
    log(LogLevel::warning, e.what());
  }
}

void SummaryWriter::scalar(const std::string& tag, std::int64_t step, double value) {
  impl_->check_open("scalar");
  Impl::Item item;
  item.kind = Impl::Kind::scalar;
  item.wall_time = unix_seconds_now();
  item.step = step;
  item.tag = tag;
  item.value = value;
  impl_->enqueue(std::move(item));
}

void SummaryWriter::histogram(const std::string& tag, std::int64_t step, const Tensor& values) {
  impl_->check_open("histogram");
  if (!values.defined()) {
    throw ValueError("SummaryWriter::histogram: the tensor for '" + tag + "' is undefined");
  }
  // to_vector copies a device tensor to the host and converts any dtype to float32.
  histogram(tag, step, values.to_vector<float>());
}

void SummaryWriter::histogram(const std::string& tag, std::int64_t step,
                              const std::vector<float>& values) {
  impl_->check_open("histogram");
  Impl::Item item;
  item.kind = Impl::Kind::histogram;
  item.wall_time = unix_seconds_now();
  item.step = step;
  item.tag = tag;
  item.values = values;
  impl_->enqueue(std::move(item));
}

void SummaryWriter::flush() {
  impl_->check_open("flush");
  impl_->wait_for_flush();
  impl_->throw_if_failed();
}

void SummaryWriter::close() {
  Impl& s = *impl_;
  if (s.closed) return;
  s.closed = true;
  if (s.thread.joinable()) {
    s.wait_for_flush();
    Impl::Item stop;
    stop.kind = Impl::Kind::stop;
    s.enqueue(std::move(stop));
    s.thread.join();
  }
  if (s.fd >= 0) {
    if (::close(s.fd) != 0) {
      std::lock_guard<std::mutex> lock(s.mutex);
      if (!s.error) {
        s.error = "SummaryWriter: closing the event file '" + s.file.string() +
                  "' failed: " + errno_text(errno);
      }
    }
    s.fd = -1;
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.error && !s.error_reported) {
    s.error_reported = true;
    throw IOError(*s.error);
  }
}

const std::filesystem::path& SummaryWriter::path() const { return impl_->file; }

}  // namespace mixprec::io
