// safetensors: the bytes we write against the format, byte by byte; a file built here from the
// format's description (as the Hugging Face library writes one) read by our reader; round trips
// of every dtype; and every kind of bad file refused with an IOError naming it.
#include "mixprec/io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/temp_dir.h"

namespace mixprec {
namespace {

using io::load_safetensors;
using io::parse_safetensors;
using io::save_safetensors;

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A file as the format describes it: u64 little-endian header length, the header, the data.
std::string file_bytes(const std::string& header, const std::string& data) {
  std::string out;
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

TEST(SafetensorsTest, WrittenBytesFollowTheFormat) {
  testing::TempDir dir;
  const Tensor a = from_vector(std::vector<float>{1.0f, -2.0f, 0.5f}, {3});
  const Tensor b = from_vector(std::vector<std::int64_t>{7, 8}, {2, 1});
  save_safetensors(dir.path() / "t.safetensors", {{"a", a}, {"b", b}}, {{"k", "v"}});
  const std::string bytes = read_all(dir.path() / "t.safetensors");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  ASSERT_EQ(n % 8, 0u) << "header padded to 8 bytes";
  ASSERT_EQ(bytes.size(), 8 + n + 12 + 16);
  std::string header = bytes.substr(8, n);
  while (!header.empty() && header.back() == ' ') header.pop_back();
  // The metadata carries the writer's checksums (issue 33): CRC-32C of {"k": "v"}, and of each
  // tensor's name, dtype code and shape (NUL-terminated fields) followed by its bytes; pinned here
  // so that the format cannot drift (the CRC itself is tested in crc32c_test.cpp).
  EXPECT_EQ(header,
            "{\"__metadata__\":{\"k\":\"v\",\"mixprec_crc32c\":"
            "\"{\\\"__metadata__\\\":\\\"76146fc1\\\",\\\"a\\\":\\\"001b934a\\\","
            "\\\"b\\\":\\\"2fa6f62b\\\"}\"},"
            "\"a\":{\"data_offsets\":[0,12],\"dtype\":\"F32\",\"shape\":[3]},"
            "\"b\":{\"data_offsets\":[12,28],\"dtype\":\"I64\",\"shape\":[2,1]}}");
  float f[3];
  std::memcpy(f, bytes.data() + 8 + n, 12);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], -2.0f);
  EXPECT_EQ(f[2], 0.5f);
  std::int64_t i[2];
  std::memcpy(i, bytes.data() + 8 + n + 12, 16);
  EXPECT_EQ(i[0], 7);
  EXPECT_EQ(i[1], 8);
}

TEST(SafetensorsTest, ReadsAFileWrittenFromTheSpecification) {
  // What the Hugging Face writer produces for {"w": float16 [[1, 2]], "s": bfloat16 scalar 3}:
  // tensors ordered by its own rule, header padded with spaces, no __metadata__.
  const std::string header = R"({"w":{"dtype":"F16","shape":[1,2],"data_offsets":[0,4]},)"
                             R"("s":{"dtype":"BF16","shape":[],"data_offsets":[4,6]}}  )";
  std::string data;
  data += std::string("\x00\x3c", 2);  // 1.0 in float16
  data += std::string("\x00\x40", 2);  // 2.0
  data += std::string("\x40\x40", 2);  // 3.0 in bfloat16
  const io::SafetensorsContents c = parse_safetensors(as_bytes(file_bytes(header, data)), "spec");
  ASSERT_EQ(c.tensors.size(), 2u);
  EXPECT_EQ(c.tensors[0].first, "w");
  EXPECT_EQ(c.tensors[0].second.dtype(), DType::float16);
  EXPECT_EQ(c.tensors[0].second.to(DType::float32).to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(c.tensors[1].first, "s");
  EXPECT_EQ(c.tensors[1].second.rank(), 0);
  EXPECT_EQ(c.tensors[1].second.to(DType::float32).to_vector<float>(), (std::vector<float>{3}));
  EXPECT_TRUE(c.metadata.empty());
}

TEST(SafetensorsTest, EveryDTypeRoundTrips) {
  testing::TempDir dir;
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (DType d : {DType::float64, DType::float32, DType::float16, DType::bfloat16, DType::int64,
                  DType::int32, DType::uint8, DType::bool_}) {
    tensors.emplace_back(std::string(dtype_name(d)),
                         from_vector(std::vector<double>{1, 0, 3, 1, 5, 0}, {2, 3}).to(d));
  }
  tensors.emplace_back("empty", zeros({0, 4}));
  tensors.emplace_back("scalar", full({}, 2.5));
  tensors.emplace_back("view", from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}).transpose(0, 1));
  save_safetensors(dir.path() / "all.safetensors", tensors, {{"format", "test"}});
  const io::SafetensorsContents c = load_safetensors(dir.path() / "all.safetensors");
  ASSERT_EQ(c.tensors.size(), tensors.size());
  EXPECT_EQ(c.metadata.at("format"), "test");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    SCOPED_TRACE(tensors[i].first);
    EXPECT_EQ(c.tensors[i].first, tensors[i].first);
    EXPECT_EQ(c.tensors[i].second.dtype(), tensors[i].second.dtype());
    EXPECT_EQ(c.tensors[i].second.shape(), tensors[i].second.shape());
    EXPECT_EQ(c.tensors[i].second.to(DType::float64).to_vector<double>(),
              tensors[i].second.to(DType::float64).to_vector<double>());
  }
  EXPECT_THROW(
      save_safetensors(dir.path() / "x.safetensors", {{"a", zeros({1})}, {"a", zeros({1})}}),
      ValueError);
  EXPECT_THROW(save_safetensors(dir.path() / "x.safetensors", {{"__metadata__", zeros({1})}}),
               ValueError);
}

// Parses `header` with `data` and returns the IOError's message ("" when it parsed).
std::string error_of(const std::string& header, const std::string& data = std::string(8, '\0')) {
  try {
    parse_safetensors(as_bytes(file_bytes(header, data)), "bad.safetensors");
  } catch (const IOError& e) {
    return e.what();
  }
  return "";
}

TEST(SafetensorsTest, BadHeadersAreIOErrorsNamingTheProblem) {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(error_of(ok), "");
  const std::pair<std::string, std::string> cases[] = {
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", "well-formed JSON"},
      {R"([1, 2])", "not a JSON object"},
      {R"({"a":{"dtype":"I16","shape":[4],"data_offsets":[0,8]}})", "unsupported dtype 'I16'"},
      {R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "need 12 bytes"},
      {R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", "non-negative integer"},
      {R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", "non-negative integer"},
      {R"({"a":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904],"data_offsets":[0,8]}})",
       "more than 2^64"},
      {R"({"a":{"dtype":"F32","shape":[0,1099511627776,1099511627776],"data_offsets":[0,0]}})",
       "does not fit a 64-bit integer"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", "a hole before it"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       "overlaps"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "trailing bytes"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "truncated"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", "end before they begin"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       "names 'a' twice"},
      {R"({"a":{"dtype":"F32","shape":[2]}})", "exactly dtype, shape and data_offsets"},
      {R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       "is not a string"},
  };
  for (const auto& [header, expected] : cases) {
    const std::string message = error_of(header);
    EXPECT_NE(message.find("bad.safetensors: "), std::string::npos) << header << " -> " << message;
    EXPECT_NE(message.find(expected), std::string::npos) << header << " -> " << message;
  }
  // The length prefix: past the end of the file, and over the 100 MB cap.
  std::string huge = file_bytes(ok, std::string(8, '\0'));
  huge[3] = 0x7f;
  EXPECT_THROW(parse_safetensors(as_bytes(huge), "x"), IOError);
  huge = file_bytes(ok, std::string(8, '\0'));
  const std::uint64_t over = io::kMaxSafetensorsHeaderBytes + 1;
  for (int i = 0; i < 8; ++i)
    huge[static_cast<std::size_t>(i)] = static_cast<char>((over >> (8 * i)) & 0xff);
  EXPECT_NE(std::string([&] {
              try {
                parse_safetensors(as_bytes(huge), "x");
              } catch (const IOError& e) {
                return std::string(e.what());
              }
              return std::string();
            }())
                .find("100 MB"),
            std::string::npos);
  EXPECT_THROW(parse_safetensors(as_bytes(std::string("abc")), "x"), IOError);
}

TEST(SafetensorsTest, ATruncatedFileOnDiskIsRefusedAndAFailedWriteKeepsTheOldFile) {
  testing::TempDir dir;
  const auto path = dir.path() / "w.safetensors";
  save_safetensors(path, {{"a", ones({100})}});
  const std::string before = read_all(path);
  std::filesystem::resize_file(path, before.size() - 1);
  EXPECT_THROW(load_safetensors(path), IOError);
  save_safetensors(path, {{"a", ones({100})}});
  // An undefined tensor fails before the file is replaced; no temporary file is left behind.
  EXPECT_THROW(save_safetensors(path, {{"a", Tensor()}}), ValueError);
  EXPECT_EQ(read_all(path), before);
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1u);
  EXPECT_THROW(load_safetensors(dir.path() / "missing.safetensors"), IOError);
}

}  // namespace
}  // namespace mixprec
