// AtomicFile (src/io/atomic_file.h).
#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "mixprec/error.h"

namespace mixprec::io {

namespace {

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path) {
  throw IOError(what + " '" + path.string() + "': " + std::strerror(errno));
}

std::filesystem::path directory_of(const std::filesystem::path& target) {
  return target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
}

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path target) : target_(std::move(target)) {
  if (target_.filename().empty())
    throw IOError("AtomicFile: '" + target_.string() + "' names no file");
  std::string pattern =
      (directory_of(target_) / ("." + target_.filename().string() + ".tmp-XXXXXX")).string();
  fd_ = ::mkstemp(pattern.data());
  if (fd_ < 0) fail("cannot create a temporary file beside", target_);
  temp_ = pattern;
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFile::write(const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ::ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("writing", temp_);
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit() {
  if (committed_) return;
  if (::fsync(fd_) != 0) fail("fsync of", temp_);
  // mkstemp creates 0600; a saved file gets the usual permissions (0644 under the usual umask).
  const ::mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd_, 0666 & ~mask);
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail("closing", temp_);
  }
  fd_ = -1;
  if (::rename(temp_.c_str(), target_.c_str()) != 0)
    fail("renaming the temporary file to", target_);
  committed_ = true;
  // The rename is durable once the directory entry is on disk.
  const int dir = ::open(directory_of(target_).c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

bool AtomicFile::is_temporary_name(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  const std::size_t at = name.rfind(".tmp-");
  return !name.empty() && name[0] == '.' && at != std::string::npos && name.size() == at + 11;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes) {
  AtomicFile file(path);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

}  // namespace mixprec::io
