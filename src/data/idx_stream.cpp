#include "data/idx_stream.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

namespace mixprec::data::detail {

namespace {
constexpr std::size_t kInputChunk = std::size_t{1} << 20;  // compressed bytes per fread
constexpr unsigned kGzipOnlyWindowBits = 16 + MAX_WBITS;   // zlib: gzip wrapper, 32 KiB window
constexpr std::uint64_t kGzipMinBytes = 18;                // 10-byte header + 8-byte trailer
}  // namespace

struct IdxStream::Gzip {
  z_stream zs{};
  bool initialised = false;
  bool input_eof = false;   // fread reached the end of the file
  bool stream_end = false;  // inflate reached the end of the gzip member (trailer verified)
  std::uint64_t delivered = 0;
  std::vector<unsigned char> input = std::vector<unsigned char>(kInputChunk);
  ~Gzip() {
    if (initialised) inflateEnd(&zs);
  }
};

IdxStream::IdxStream(const std::string& path) : path_(path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) fail("cannot access: " + ec.message());
  if (!fs::exists(status)) fail("file not found; check the path");
  if (!fs::is_regular_file(status)) fail("not a regular file");
  owned_file_.reset(std::fopen(path.c_str(), "rb"));
  file_ = owned_file_.get();
  if (file_ == nullptr) fail(std::string("cannot open: ") + std::strerror(errno));
  if (fseeko(file_, 0, SEEK_END) != 0) fail(std::string("cannot seek: ") + std::strerror(errno));
  file_size_ = static_cast<std::uint64_t>(ftello(file_));

  unsigned char magic[2] = {0, 0};
  std::rewind(file_);
  const std::size_t got = std::fread(magic, 1, 2, file_);
  if (got == 2 && magic[0] == 0x1f && magic[1] == 0x8b) compression_ = IdxCompression::gzip;
  if (compression_ == IdxCompression::gzip) {
    if (file_size_ < kGzipMinBytes) {
      fail("truncated: a gzip file is at least 18 bytes (header and trailer), this one has " +
           std::to_string(file_size_) + "; re-download it");
    }
    // ISIZE: the last 4 bytes, little-endian (RFC 1952).
    unsigned char trailer[4];
    if (fseeko(file_, -4, SEEK_END) != 0 || std::fread(trailer, 1, 4, file_) != 4) {
      fail(std::string("cannot read the gzip trailer: ") + std::strerror(errno));
    }
    gzip_isize_ = std::uint32_t{trailer[0]} | std::uint32_t{trailer[1]} << 8 |
                  std::uint32_t{trailer[2]} << 16 | std::uint32_t{trailer[3]} << 24;
    gz_ = std::make_unique<Gzip>();
    if (inflateInit2(&gz_->zs, static_cast<int>(kGzipOnlyWindowBits)) != Z_OK) {
      fail("zlib could not start a gzip stream (out of memory?)");
    }
    gz_->initialised = true;
  }
  std::rewind(file_);
}

IdxStream::~IdxStream() = default;

void IdxStream::fail(const std::string& problem) const { throw DataError(path_ + ": " + problem); }

std::size_t IdxStream::read(void* dst, std::size_t n) {
  return compression_ == IdxCompression::gzip ? read_gzip(dst, n) : read_plain(dst, n);
}

std::size_t IdxStream::read_plain(void* dst, std::size_t n) {
  const std::size_t got = std::fread(dst, 1, n, file_);
  if (got < n && std::ferror(file_)) fail(std::string("read error: ") + std::strerror(errno));
  return got;
}

bool IdxStream::refill() {
  z_stream& zs = gz_->zs;
  const std::size_t got = std::fread(gz_->input.data(), 1, gz_->input.size(), file_);
  if (got == 0) {
    if (std::ferror(file_)) fail(std::string("read error: ") + std::strerror(errno));
    gz_->input_eof = true;
    return false;
  }
  zs.next_in = gz_->input.data();
  zs.avail_in = static_cast<uInt>(got);
  return true;
}

std::size_t IdxStream::read_gzip(void* dst, std::size_t n) {
  z_stream& zs = gz_->zs;
  auto* out = static_cast<unsigned char*>(dst);
  std::size_t done = 0;
  // avail_out is a 32-bit uInt: hand zlib at most 1 GiB of output at a time.
  constexpr std::size_t kMaxOut = std::size_t{1} << 30;
  while (done < n && !gz_->stream_end) {
    if (zs.avail_in == 0 && !gz_->input_eof) refill();
    const std::size_t chunk = std::min(n - done, kMaxOut);
    zs.next_out = out + done;
    zs.avail_out = static_cast<uInt>(chunk);
    const int ret = inflate(&zs, Z_NO_FLUSH);
    const std::size_t produced = chunk - zs.avail_out;
    done += produced;
    gz_->delivered += produced;
    if (ret == Z_STREAM_END) {
      gz_->stream_end = true;
    } else if (ret == Z_BUF_ERROR) {
      if (zs.avail_in == 0 && gz_->input_eof) break;  // input ran out mid-stream: truncated
    } else if (ret != Z_OK) {
      fail("corrupt gzip stream after " + std::to_string(gz_->delivered) +
           " uncompressed bytes (zlib: " +
           (zs.msg != nullptr ? zs.msg : "error " + std::to_string(ret)) +
           "); re-download the file");
    }
  }
  return done;
}

void IdxStream::expect_end(const std::string& what) {
  if (compression_ == IdxCompression::none) {
    const long long position = static_cast<long long>(ftello(file_));
    if (std::fgetc(file_) != EOF) {
      fail("trailing data: " + std::to_string(static_cast<long long>(file_size_) - position) +
           " bytes after the " + what +
           " payload the header describes; the header does not "
           "match the file (wrong or damaged file)");
    }
    return;
  }
  // gzip: inflate to the end of the member so that zlib verifies the CRC-32 and length trailer.
  unsigned char scratch[4096];
  while (!gz_->stream_end) {
    const std::size_t extra = read_gzip(scratch, sizeof scratch);
    if (extra > 0) {
      fail("trailing data: the gzip stream holds more than the " + what +
           " payload the header describes; the header does not match the file");
    }
    if (!gz_->stream_end) {
      fail("truncated: the gzip stream ends without its trailer (CRC-32 and length) after the " +
           what + " payload; re-download the file");
    }
  }
  std::uint64_t after = gz_->zs.avail_in;
  if (!gz_->input_eof) {
    const long long position = static_cast<long long>(ftello(file_));
    after += file_size_ - static_cast<std::uint64_t>(position);
  }
  if (after > 0) {
    fail("trailing data: " + std::to_string(after) +
         " bytes after the end of the gzip stream (concatenated gzip members are not supported)");
  }
}

}  // namespace mixprec::data::detail
