// IDX reader: round trips of every type code, plain and gzip (files written here, byte by byte,
// big-endian, with zlib's gzwrite for gzip), and one rejection test per kind of bad file. The
// "claims more than the file has" tests check that nothing of the claimed size was allocated.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "mixprec/data/idx.h"
#include "mixprec/mixprec.h"
#include "support/temp_dir.h"

namespace mixprec::data {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;

using testing::TempDir;

void put_be(Bytes& out, std::uint64_t value, int nbytes) {
  for (int i = nbytes - 1; i >= 0; --i) out.push_back(static_cast<unsigned char>(value >> (8 * i)));
}

// The IDX header: 00 00 type ndims, then each extent as a big-endian uint32.
Bytes header(unsigned char type, const std::vector<std::uint32_t>& dims) {
  Bytes out = {0, 0, type, static_cast<unsigned char>(dims.size())};
  for (std::uint32_t d : dims) put_be(out, d, 4);
  return out;
}

void append(Bytes& a, const Bytes& b) { a.insert(a.end(), b.begin(), b.end()); }

void write_plain(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

Bytes read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// mode "wb" (default level) or "wb0" (stored blocks: the compressed bytes are the data itself).
void write_gzip(const std::string& path, const Bytes& bytes, const char* mode = "wb") {
  gzFile f = gzopen(path.c_str(), mode);
  ASSERT_NE(f, nullptr) << path;
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
  }
  ASSERT_EQ(gzclose(f), Z_OK);
}

enum class Compression { plain, gzip };

void write_idx(const std::string& path, const Bytes& bytes, Compression c) {
  if (c == Compression::gzip) {
    write_gzip(path, bytes);
  } else {
    write_plain(path, bytes);
  }
}

// Expects read_idx(path) to throw DataError whose message names the file and contains `needle`.
void expect_rejected(const std::string& path, const std::string& needle,
                     IdxReadOptions options = {}) {
  try {
    read_idx(path, options);
    ADD_FAILURE() << "read_idx accepted " << path;
  } catch (const DataError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(needle), std::string::npos)
        << "expected '" << needle << "' in: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
  }
}

class IdxRoundTrip : public ::testing::TestWithParam<Compression> {
 protected:
  TempDir dir_;
  std::string path() const {
    return dir_.file(GetParam() == Compression::gzip ? "data.gz" : "data");
  }
};

TEST_P(IdxRoundTrip, Ubyte) {
  Bytes bytes = header(0x08, {2, 3});
  append(bytes, {0, 1, 127, 128, 200, 255});
  write_idx(path(), bytes, GetParam());
  const Tensor t = read_idx(path());
  EXPECT_EQ(t.dtype(), DType::uint8);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.to_vector<int>(), (std::vector<int>{0, 1, 127, 128, 200, 255}));
}

TEST_P(IdxRoundTrip, SbyteWidensToInt32) {
  Bytes bytes = header(0x09, {5});
  append(bytes, {0x80, 0xff, 0x00, 0x01, 0x7f});  // -128, -1, 0, 1, 127 in two's complement
  write_idx(path(), bytes, GetParam());
  const Tensor t = read_idx(path());
  EXPECT_EQ(t.dtype(), DType::int32);
  EXPECT_EQ(t.to_vector<int>(), (std::vector<int>{-128, -1, 0, 1, 127}));
}

TEST_P(IdxRoundTrip, ShortWidensToInt32) {
  Bytes bytes = header(0x0B, {3, 2});
  for (std::uint32_t v : {0x8000u, 0xffffu, 0x0000u, 0x0001u, 0x7fffu, 0x0102u})
    put_be(bytes, v, 2);
  write_idx(path(), bytes, GetParam());
  const Tensor t = read_idx(path());
  EXPECT_EQ(t.dtype(), DType::int32);
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(t.to_vector<int>(), (std::vector<int>{-32768, -1, 0, 1, 32767, 258}));
}

TEST_P(IdxRoundTrip, Int) {
  Bytes bytes = header(0x0C, {1, 2, 3});
  for (std::uint32_t v : {0x80000000u, 0xffffffffu, 0u, 1u, 0x7fffffffu, 0x01020304u}) {
    put_be(bytes, v, 4);
  }
  write_idx(path(), bytes, GetParam());
  const Tensor t = read_idx(path());
  EXPECT_EQ(t.dtype(), DType::int32);
  EXPECT_EQ(t.shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(t.to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{-2147483648LL, -1, 0, 1, 2147483647, 0x01020304}));
}

TEST_P(IdxRoundTrip, FloatBitExact) {
  const std::vector<float> values = {
      -1.5f, 0.0f, -0.0f, 1e-30f, 3.4e38f, std::numeric_limits<float>::infinity(), 0x1p-149f, 0.1f};
  Bytes bytes = header(0x0D, {2, 4});
  for (float v : values) put_be(bytes, std::bit_cast<std::uint32_t>(v), 4);
  write_idx(path(), bytes, GetParam());
  const Tensor t = read_idx(path());
  ASSERT_EQ(t.dtype(), DType::float32);
  EXPECT_EQ(t.shape(), (Shape{2, 4}));
  const float* got = t.data<float>();
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(values[i])) << i;
  }
}

TEST_P(IdxRoundTrip, DoubleBitExact) {
  const std::vector<double> values = {-1.5,   0.1,       1e-300,
                                      -1e300, 0x1p-1074, std::numeric_limits<double>::quiet_NaN()};
  Bytes bytes = header(0x0E, {1, 1, 1, 1, 1, 1, 2, 3});  // 8 dimensions: the most allowed
  for (double v : values) put_be(bytes, std::bit_cast<std::uint64_t>(v), 8);
  write_idx(path(), bytes, GetParam());
  const Tensor t = read_idx(path());
  ASSERT_EQ(t.dtype(), DType::float64);
  EXPECT_EQ(t.shape(), (Shape{1, 1, 1, 1, 1, 1, 2, 3}));
  const double* got = t.data<double>();
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(std::bit_cast<std::uint64_t>(got[i]), std::bit_cast<std::uint64_t>(values[i])) << i;
  }
}

TEST_P(IdxRoundTrip, LargeFloatPayloadUsesEveryElement) {
  // Big enough for the parallel byte swap and several zlib output rounds: value i at element i.
  const std::uint32_t n = 300000;
  Bytes bytes = header(0x0D, {n});
  for (std::uint32_t i = 0; i < n; ++i) put_be(bytes, std::bit_cast<std::uint32_t>(float(i)), 4);
  write_idx(path(), bytes, GetParam());
  const Tensor t = read_idx(path());
  ASSERT_EQ(t.numel(), n);
  const float* got = t.data<float>();
  std::uint32_t wrong = 0;
  for (std::uint32_t i = 0; i < n; ++i) wrong += got[i] != float(i);
  EXPECT_EQ(wrong, 0u);
}

TEST_P(IdxRoundTrip, ZeroExtentIsAnEmptyTensor) {
  write_idx(path(), header(0x08, {0, 28, 28}), GetParam());
  const Tensor t = read_idx(path());
  EXPECT_EQ(t.shape(), (Shape{0, 28, 28}));
}

TEST_P(IdxRoundTrip, InfoReportsTheHeader) {
  Bytes bytes = header(0x0B, {4, 5});
  append(bytes, Bytes(40, 0));
  write_idx(path(), bytes, GetParam());
  const IdxInfo info = read_idx_info(path());
  EXPECT_EQ(info.type, IdxType::int16);
  EXPECT_EQ(info.dims, (std::vector<std::int64_t>{4, 5}));
  EXPECT_EQ(info.header_bytes, 12u);
  EXPECT_EQ(info.payload_bytes, 40u);
  EXPECT_EQ(info.compression,
            GetParam() == Compression::gzip ? IdxCompression::gzip : IdxCompression::none);
}

INSTANTIATE_TEST_SUITE_P(PlainAndGzip, IdxRoundTrip,
                         ::testing::Values(Compression::plain, Compression::gzip),
                         [](const auto& info) {
                           return info.param == Compression::gzip ? "gzip" : "plain";
                         });

TEST(IdxReaderTest, CompressionIsDetectedFromContentNotName) {
  TempDir dir;
  Bytes bytes = header(0x08, {3});
  append(bytes, {7, 8, 9});
  write_gzip(dir.file("named-plain"), bytes);
  write_plain(dir.file("named.gz"), bytes);
  EXPECT_EQ(read_idx(dir.file("named-plain")).to_vector<int>(), (std::vector<int>{7, 8, 9}));
  EXPECT_EQ(read_idx(dir.file("named.gz")).to_vector<int>(), (std::vector<int>{7, 8, 9}));
}

// ---- rejections ----

TEST(IdxReaderTest, RejectsWrongMagic) {
  TempDir dir;
  Bytes bytes = {0x01, 0x00, 0x08, 0x01};
  put_be(bytes, 2, 4);
  append(bytes, {1, 2});
  write_plain(dir.file("bad"), bytes);
  expect_rejected(dir.file("bad"), "not an IDX file");
  write_gzip(dir.file("bad.gz"), bytes);
  expect_rejected(dir.file("bad.gz"), "not an IDX file");
}

TEST(IdxReaderTest, RejectsUnknownTypeCode) {
  TempDir dir;
  Bytes bytes = header(0x0A, {2});
  append(bytes, {1, 2});
  write_plain(dir.file("bad"), bytes);
  expect_rejected(dir.file("bad"), "unknown IDX type code 0x0a");
}

TEST(IdxReaderTest, RejectsZeroDimensions) {
  TempDir dir;
  write_plain(dir.file("bad"), header(0x08, {}));
  expect_rejected(dir.file("bad"), "0 dimensions, expected 1 to 8");
}

TEST(IdxReaderTest, RejectsMoreThanEightDimensions) {
  TempDir dir;
  Bytes bytes = header(0x08, {1, 1, 1, 1, 1, 1, 1, 1, 1});
  append(bytes, {5});
  write_plain(dir.file("bad"), bytes);
  expect_rejected(dir.file("bad"), "9 dimensions, expected 1 to 8");
}

TEST(IdxReaderTest, RejectsEmptyAndShortFiles) {
  TempDir dir;
  write_plain(dir.file("empty"), {});
  expect_rejected(dir.file("empty"), "truncated");
  write_plain(dir.file("short-header"), {0, 0, 0x08, 3, 0, 0, 0, 1});  // 3 dims, 1 present
  expect_rejected(dir.file("short-header"), "truncated");
}

TEST(IdxReaderTest, RejectsTruncatedPlainPayload) {
  TempDir dir;
  Bytes bytes = header(0x08, {10, 10});
  append(bytes, Bytes(50, 1));
  write_plain(dir.file("bad"), bytes);
  expect_rejected(dir.file("bad"),
                  "truncated: header says 10x10 ubyte = 100 bytes, the file "
                  "holds 50");
}

TEST(IdxReaderTest, RejectsTruncatedGzipByTrailerPrecheck) {
  TempDir dir;
  Bytes bytes = header(0x08, {1000});
  std::uint32_t state = 12345;  // incompressible bytes, so that the cut falls in the payload
  for (int i = 0; i < 1000; ++i) {
    state = state * 1664525u + 1013904223u;
    bytes.push_back(static_cast<unsigned char>(state >> 24));
  }
  write_gzip(dir.file("full.gz"), bytes);
  Bytes gz = read_file(dir.file("full.gz"));
  gz.resize(gz.size() / 2);
  write_plain(dir.file("cut.gz"), gz);
  expect_rejected(dir.file("cut.gz"), "gzip trailer");
}

TEST(IdxReaderTest, RejectsTruncatedGzipStreamWithAPlausibleTrailer) {
  // Stored (level-0) deflate blocks, cut in the middle, then a forged ISIZE that matches the
  // header: the pre-check passes and the stream itself must run dry.
  TempDir dir;
  Bytes bytes = header(0x08, {100, 100});
  for (int i = 0; i < 10000; ++i) bytes.push_back(static_cast<unsigned char>(i * 7));
  write_gzip(dir.file("full.gz"), bytes, "wb0");
  Bytes gz = read_file(dir.file("full.gz"));
  gz.resize(gz.size() / 2);
  const std::uint32_t isize = static_cast<std::uint32_t>(bytes.size());
  for (int i = 0; i < 4; ++i) gz.push_back(static_cast<unsigned char>(isize >> (8 * i)));
  write_plain(dir.file("cut.gz"), gz);
  expect_rejected(dir.file("cut.gz"),
                  "truncated: header says 100x100 ubyte = 10000 bytes, the "
                  "stream ended after");
}

TEST(IdxReaderTest, RejectsCorruptGzipData) {
  TempDir dir;
  Bytes bytes = header(0x08, {4000});
  for (int i = 0; i < 4000; ++i) bytes.push_back(static_cast<unsigned char>(i));
  write_gzip(dir.file("ok.gz"), bytes, "wb0");
  Bytes gz = read_file(dir.file("ok.gz"));
  gz[gz.size() / 2] ^= 0x40;  // one flipped payload bit: only the CRC-32 can notice
  write_plain(dir.file("flipped.gz"), gz);
  expect_rejected(dir.file("flipped.gz"), "corrupt gzip stream");

  Bytes bad_block = read_file(dir.file("ok.gz"));
  bad_block[10] = 0x07;  // first deflate block: BFINAL=1, BTYPE=11 (reserved)
  write_plain(dir.file("bad-block.gz"), bad_block);
  expect_rejected(dir.file("bad-block.gz"), "corrupt gzip stream");
}

TEST(IdxReaderTest, RejectsTrailingBytesInPlainFile) {
  TempDir dir;
  Bytes bytes = header(0x08, {4});
  append(bytes, {1, 2, 3, 4, 9, 9, 9});
  write_plain(dir.file("bad"), bytes);
  expect_rejected(dir.file("bad"), "trailing data");
}

TEST(IdxReaderTest, RejectsDataAfterTheGzipMember) {
  // Two members with the same ISIZE: the trailer pre-check passes, the bytes after the first
  // member are refused (concatenated members are not supported).
  TempDir dir;
  Bytes bytes = header(0x08, {4});
  append(bytes, {1, 2, 3, 4});
  write_gzip(dir.file("one.gz"), bytes);
  Bytes gz = read_file(dir.file("one.gz"));
  Bytes twice = gz;
  append(twice, gz);
  write_plain(dir.file("two.gz"), twice);
  expect_rejected(dir.file("two.gz"), "after the end of the gzip stream");
}

TEST(IdxReaderTest, RejectsGzipHoldingMoreThanTheHeaderSays) {
  TempDir dir;
  Bytes bytes = header(0x08, {4});
  append(bytes, {1, 2, 3, 4, 5, 6});
  write_gzip(dir.file("long.gz"), bytes);
  expect_rejected(dir.file("long.gz"), "gzip trailer");
}

TEST(IdxReaderTest, RejectsDimensionsWhoseProductOverflows) {
  TempDir dir;
  write_plain(dir.file("bad"), header(0x08, {0xffffffffu, 0xffffffffu, 0xffffffffu}));
  expect_rejected(dir.file("bad"), "more bytes than 2^64");
  // The element count fits in 64 bits, the byte count (x8 for double) does not.
  write_plain(dir.file("bad2"), header(0x0E, {0x80000000u, 0x80000000u, 4}));
  expect_rejected(dir.file("bad2"), "more bytes than 2^64");
  // No elements (a zero extent), but the other extents multiply past int64: found by idx_fuzz
  // (the tensor's strides overflowed).
  write_plain(dir.file("empty-huge"), header(0x08, {0, 0xfb001500u, 0x5a, 0xfefa0426u}));
  expect_rejected(dir.file("empty-huge"), "multiply (zeros aside) past 2^63");
  // An empty tensor with modest extents still loads.
  write_plain(dir.file("empty"), header(0x08, {0, 28, 28}));
  EXPECT_EQ(read_idx(dir.file("empty")).shape(), Shape({0, 28, 28}));
}

// Peak tensor memory while `fn` runs, above what was live before.
template <typename Fn>
std::int64_t peak_growth(Fn fn) {
  reset_peak_memory_stats(Device::cpu());
  const std::int64_t before = memory_stats(Device::cpu()).current_bytes;
  fn();
  return memory_stats(Device::cpu()).peak_bytes - before;
}

TEST(IdxReaderTest, HeaderClaimingMoreThanThePlainFileFailsWithoutAllocatingIt) {
  TempDir dir;
  Bytes bytes = header(0x08, {1u << 16, 1u << 17});  // 8 GiB, under the default 16 GiB cap
  append(bytes, Bytes(100, 0));
  write_plain(dir.file("liar"), bytes);
  const std::int64_t grown = peak_growth([&] { expect_rejected(dir.file("liar"), "truncated"); });
  EXPECT_LT(grown, 1 << 20);
}

TEST(IdxReaderTest, HeaderAboveTheCapFailsWithoutAllocatingIt) {
  TempDir dir;
  write_plain(dir.file("huge"), header(0x08, {1u << 20, 1u << 20}));  // 2^40 bytes
  const std::int64_t grown = peak_growth([&] { expect_rejected(dir.file("huge"), "limit"); });
  EXPECT_LT(grown, 1 << 20);
  // A lower cap applies to honest files too.
  Bytes small = header(0x08, {100});
  append(small, Bytes(100, 0));
  write_plain(dir.file("small"), small);
  expect_rejected(dir.file("small"), "limit", IdxReadOptions{.max_bytes = 99});
  EXPECT_EQ(read_idx(dir.file("small"), IdxReadOptions{.max_bytes = 100}).numel(), 100);
}

TEST(IdxReaderTest, GzipClaimingMoreThanItCanHoldFailsWithoutAllocatingIt) {
  // 1 GiB claimed by a ~50-byte gzip file whose ISIZE trailer was forged to agree: deflate cannot
  // expand 50 bytes to 1 GiB, so the reader must refuse before allocating.
  TempDir dir;
  Bytes bytes = header(0x08, {1u << 15, 1u << 15});
  append(bytes, Bytes(1000, 0));  // some payload, so the header is read before the trailer
  write_gzip(dir.file("liar.gz"), bytes);
  Bytes gz = read_file(dir.file("liar.gz"));
  const std::uint32_t isize = static_cast<std::uint32_t>(12 + (std::size_t{1} << 30));
  for (int i = 0; i < 4; ++i) gz[gz.size() - 4 + i] = static_cast<unsigned char>(isize >> (8 * i));
  write_plain(dir.file("liar.gz"), gz);
  const std::int64_t grown =
      peak_growth([&] { expect_rejected(dir.file("liar.gz"), "can hold at most"); });
  EXPECT_LT(grown, 1 << 20);
}

TEST(IdxReaderTest, MissingFileAndDirectory) {
  TempDir dir;
  expect_rejected(dir.file("nope"), "file not found");
  fs::create_directories(dir.file("subdir"));
  expect_rejected(dir.file("subdir"), "not a regular file");
}

TEST(IdxReaderTest, ErrorsAreValueErrors) {
  TempDir dir;
  EXPECT_THROW(read_idx(dir.file("nope")), ValueError);
  EXPECT_THROW(read_idx_info(dir.file("nope")), Error);
}

TEST(IdxReaderTest, ReadingLeavesTheFileUntouched) {
  TempDir dir;
  Bytes bytes = header(0x08, {4});
  append(bytes, {1, 2, 3, 4, 5});  // trailing byte: rejected
  write_plain(dir.file("bad"), bytes);
  EXPECT_THROW(read_idx(dir.file("bad")), DataError);
  EXPECT_EQ(read_file(dir.file("bad")), bytes);
}

}  // namespace
}  // namespace mixprec::data
