// Internal: a read-only byte stream over a plain or gzip-compressed file, for the IDX reader.
// Compression is detected from the first two bytes (1f 8b). Memory use is fixed (one 1 MiB input
// buffer for gzip) and never depends on what the file claims.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "mixprec/data/idx.h"

namespace mixprec::data::detail {

class IdxStream {
 public:
  // Opens `path`; throws DataError when it is missing, not a regular file, or unreadable.
  explicit IdxStream(const std::string& path);
  ~IdxStream();
  IdxStream(const IdxStream&) = delete;
  IdxStream& operator=(const IdxStream&) = delete;

  const std::string& path() const { return path_; }
  IdxCompression compression() const { return compression_; }
  std::uint64_t file_size() const { return file_size_; }
  // gzip only: the ISIZE trailer (uncompressed size mod 2^32) of the last gzip member.
  std::uint32_t gzip_isize() const { return gzip_isize_; }

  // Reads up to n bytes of (uncompressed) data into dst. Returns fewer than n only when the data
  // ends (a truncated file: the caller reports it with the count). Throws DataError for a corrupt
  // gzip stream or an I/O error.
  std::size_t read(void* dst, std::size_t n);

  // Throws DataError unless the data ends exactly here: no more uncompressed bytes, and for gzip a
  // complete member (trailer present, CRC-32 and length verified) with nothing after it.
  // `what` describes what was expected so far, for the message ("60000x28x28 ubyte").
  void expect_end(const std::string& what);

  [[noreturn]] void fail(const std::string& problem) const;

 private:
  std::size_t read_plain(void* dst, std::size_t n);
  std::size_t read_gzip(void* dst, std::size_t n);
  bool refill();  // gzip: reads the next input chunk; false at end of file

  struct CloseFile {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };

  std::string path_;
  std::unique_ptr<std::FILE, CloseFile> owned_file_;  // closed even when the constructor throws
  std::FILE* file_ = nullptr;                         // owned_file_.get()
  IdxCompression compression_ = IdxCompression::none;
  std::uint64_t file_size_ = 0;
  std::uint32_t gzip_isize_ = 0;

  struct Gzip;  // zlib state, kept out of this header
  std::unique_ptr<Gzip> gz_;
};

}  // namespace mixprec::data::detail
