// Atomic file writes: data goes to a temporary file in the target's directory; commit() flushes
// it, fsyncs it, renames it over the target and fsyncs the directory, so a reader (or a process
// restarted after a crash or SIGKILL at any moment) sees either the old file or the complete new
// one, never a partial file under the target's name.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string_view>

namespace mixprec::io {

class AtomicFile {
 public:
  // Creates "<dir>/.<name>.tmp-XXXXXX" (mkstemp). IOError (with strerror) on failure.
  explicit AtomicFile(std::filesystem::path target);
  // Destroyed without commit(): the temporary file is removed and the target is untouched.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t bytes);
  void commit();

  // True for the names AtomicFile gives its temporary files (a cleaner may remove stale ones).
  static bool is_temporary_name(const std::filesystem::path& path);

 private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;
  bool committed_ = false;
};

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

}  // namespace mixprec::io
