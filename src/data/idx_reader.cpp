// IDX reader: header validation first, allocation second, then the payload is streamed straight
// into the tensor (same-size types) or through a fixed-size buffer (widened types) and converted
// from big-endian.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/tensor_impl.h"
#include "data/idx_stream.h"
#include "mixprec/data/idx.h"

namespace mixprec::data {

namespace {

constexpr int kMaxDims = 8;
// Deflate cannot expand its input by more than 1032:1 (zlib's documented limit), so a gzip file of
// C bytes cannot hold more than ~1032*C uncompressed bytes: a header claiming more is a lie, found
// before allocating. The bound is applied to the whole file (a little generous).
constexpr std::uint64_t kMaxDeflateRatio = 1032;
// Elements converted per chunk when the file type is narrower than the tensor dtype.
constexpr std::size_t kConvertChunk = std::size_t{1} << 16;
// Byte swaps of smaller payloads are not worth starting threads for.
constexpr std::int64_t kParallelSwapElements = std::int64_t{1} << 18;

bool known_type(std::uint8_t code) {
  switch (code) {
    case 0x08:
    case 0x09:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x0E: return true;
    default: return false;
  }
}

std::string hex_bytes(const unsigned char* bytes, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) out += ' ';
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 15];
  }
  return out;
}

std::string dims_text(const std::vector<std::int64_t>& dims) {
  std::string out;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) out += 'x';
    out += std::to_string(dims[i]);
  }
  return out;
}

std::string bytes_text(std::uint64_t bytes) {
  std::string out = std::to_string(bytes) + " bytes";
  if (bytes >= (std::uint64_t{1} << 30)) {
    out += " (" + std::to_string(bytes >> 30) + " GiB)";
  }
  return out;
}

std::uint32_t load_be32(const unsigned char* p) {
  return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 |
         std::uint32_t{p[3]};
}

// "60000x28x28 ubyte"
std::string describe(const IdxInfo& info) {
  return dims_text(info.dims) + " " + idx_type_name(info.type);
}

// Reads and validates the header from an open stream; checks the payload size against the file.
IdxInfo read_header(detail::IdxStream& stream, const IdxReadOptions& options) {
  unsigned char magic[4];
  const std::size_t got = stream.read(magic, 4);
  if (got < 4) {
    stream.fail("truncated: the data ends after " + std::to_string(got) +
                " bytes, before the end of the 4-byte IDX magic; is this an IDX file?");
  }
  if (magic[0] != 0 || magic[1] != 0) {
    stream.fail("not an IDX file: the magic is " + hex_bytes(magic, 4) +
                ", expected 00 00 <type code> <number of dimensions>");
  }
  if (!known_type(magic[2])) {
    stream.fail("unknown IDX type code 0x" + hex_bytes(magic + 2, 1) +
                " in the magic; expected 08 (ubyte), 09 (sbyte), 0b (short), 0c (int), "
                "0d (float) or 0e (double)");
  }
  const int ndims = magic[3];
  if (ndims < 1 || ndims > kMaxDims) {
    stream.fail("the header says " + std::to_string(ndims) +
                " dimensions, expected 1 to 8; the file is corrupt or not an IDX file");
  }

  IdxInfo info;
  info.type = static_cast<IdxType>(magic[2]);
  info.compression = stream.compression();
  info.header_bytes = 4 + 4 * static_cast<std::uint64_t>(ndims);
  unsigned char raw_dims[4 * kMaxDims];
  const std::size_t dim_bytes = 4 * static_cast<std::size_t>(ndims);
  const std::size_t got_dims = stream.read(raw_dims, dim_bytes);
  if (got_dims < dim_bytes) {
    stream.fail("truncated: the header has " + std::to_string(ndims) +
                " dimensions, but the data ends after " + std::to_string(4 + got_dims) +
                " of its " + std::to_string(info.header_bytes) + " bytes");
  }
  // Every extent is a uint32, so it fits an int64; the product may not fit anything.
  // A zero extent makes the count 0 whatever the others are, but a tensor is still made with all
  // of them: their product with zeros counted as one (the span) must fit an int64 as well.
  std::uint64_t count = 1, span = 1;
  bool overflow = false, span_overflow = false;
  for (int d = 0; d < ndims; ++d) {
    const std::uint32_t extent = load_be32(raw_dims + 4 * d);
    info.dims.push_back(extent);
    overflow = overflow || __builtin_mul_overflow(count, std::uint64_t{extent}, &count);
    span_overflow = span_overflow ||
                    __builtin_mul_overflow(span, std::uint64_t{extent == 0 ? 1u : extent}, &span) ||
                    span > static_cast<std::uint64_t>(INT64_MAX);
  }
  std::uint64_t payload = 0;
  overflow =
      overflow || __builtin_mul_overflow(count, std::uint64_t{idx_type_size(info.type)}, &payload);
  if (overflow) {
    stream.fail("the header's dimensions " + describe(info) +
                " hold more bytes than 2^64; the file is corrupt or not an IDX file");
  }
  if (span_overflow) {
    stream.fail("the header's dimensions " + describe(info) +
                " multiply (zeros aside) past 2^63; the file is corrupt or not an IDX file");
  }
  info.payload_bytes = payload;
  if (payload > options.max_bytes) {
    stream.fail("the header says " + describe(info) + " = " + bytes_text(payload) + ", above the " +
                bytes_text(options.max_bytes) +
                " limit; the file is likely corrupt (raise IdxReadOptions::max_bytes if not)");
  }

  // The payload size against what the file can hold, before anything trusts it.
  std::uint64_t expected_total = 0;
  if (__builtin_add_overflow(info.header_bytes, payload, &expected_total)) {
    stream.fail("the header's dimensions " + describe(info) + " hold more bytes than 2^64");
  }
  if (info.compression == IdxCompression::none) {
    const std::uint64_t available = stream.file_size() - info.header_bytes;
    if (available < payload) {
      stream.fail("truncated: header says " + describe(info) + " = " + std::to_string(payload) +
                  " bytes, the file holds " + std::to_string(available) + " after the " +
                  std::to_string(info.header_bytes) + "-byte header; re-download the file");
    }
    if (available > payload) {
      stream.fail("trailing data: header says " + describe(info) + " = " + std::to_string(payload) +
                  " bytes, the file holds " + std::to_string(available - payload) +
                  " more; the header does not match the file (wrong or damaged file)");
    }
  } else {
    const std::uint32_t expected_isize = static_cast<std::uint32_t>(expected_total);  // mod 2^32
    if (stream.gzip_isize() != expected_isize) {
      stream.fail("truncated or corrupt: header says " + describe(info) + " = " +
                  std::to_string(payload) + " bytes (" + std::to_string(expected_total) +
                  " with the header), but the gzip trailer (the file's last 4 bytes) gives " +
                  std::to_string(stream.gzip_isize()) +
                  " (mod 2^32); a cut-off file ends in compressed data, not in its trailer; "
                  "re-download the file");
    }
    std::uint64_t most = 0;
    if (!__builtin_mul_overflow(stream.file_size(), kMaxDeflateRatio, &most) &&
        expected_total > most) {
      stream.fail("truncated or corrupt: header says " + describe(info) + " = " +
                  bytes_text(payload) + ", but " + std::to_string(stream.file_size()) +
                  " gzip-compressed bytes can hold at most " + bytes_text(most));
    }
  }
  return info;
}

template <typename Word>
Word byte_swap(Word w) {
  if constexpr (sizeof(Word) == 2) return static_cast<Word>(__builtin_bswap16(w));
  if constexpr (sizeof(Word) == 4) return __builtin_bswap32(w);
  if constexpr (sizeof(Word) == 8) return __builtin_bswap64(w);
}

// Big-endian words to host order, in place.
template <typename Word>
void swap_in_place(void* data, std::int64_t n) {
  if constexpr (std::endian::native == std::endian::big) return;
  auto* w = static_cast<Word*>(data);
#pragma omp parallel for schedule(static) if (n >= kParallelSwapElements)
  for (std::int64_t i = 0; i < n; ++i) w[i] = byte_swap(w[i]);
}

void read_payload_exact(detail::IdxStream& stream, const IdxInfo& info, void* dst,
                        std::uint64_t bytes, std::uint64_t already) {
  const std::size_t got = stream.read(dst, static_cast<std::size_t>(bytes));
  if (got < bytes) {
    stream.fail("truncated: header says " + describe(info) + " = " +
                std::to_string(info.payload_bytes) + " bytes, the stream ended after " +
                std::to_string(already + got) + "; re-download the file");
  }
}

// sbyte / short -> int32 through a fixed-size buffer (no temporary of the payload's size).
template <typename Stored>
void read_widened(detail::IdxStream& stream, const IdxInfo& info, std::int32_t* out,
                  std::int64_t count) {
  std::vector<Stored> buffer(std::min<std::int64_t>(count, kConvertChunk));
  std::int64_t done = 0;
  while (done < count) {
    const std::int64_t n = std::min<std::int64_t>(count - done, kConvertChunk);
    read_payload_exact(stream, info, buffer.data(), static_cast<std::uint64_t>(n) * sizeof(Stored),
                       static_cast<std::uint64_t>(done) * sizeof(Stored));
    for (std::int64_t i = 0; i < n; ++i) {
      Stored v = buffer[static_cast<std::size_t>(i)];
      if constexpr (sizeof(Stored) > 1 && std::endian::native == std::endian::little) {
        v = static_cast<Stored>(byte_swap(static_cast<std::uint16_t>(v)));
      }
      out[done + i] = v;
    }
    done += n;
  }
}

}  // namespace

DType idx_type_dtype(IdxType type) {
  switch (type) {
    case IdxType::ubyte: return DType::uint8;
    case IdxType::sbyte:
    case IdxType::int16:
    case IdxType::int32: return DType::int32;
    case IdxType::float32: return DType::float32;
    case IdxType::float64: return DType::float64;
  }
  throw ValueError("idx_type_dtype: unknown IdxType " + std::to_string(static_cast<int>(type)));
}

std::size_t idx_type_size(IdxType type) {
  switch (type) {
    case IdxType::ubyte:
    case IdxType::sbyte: return 1;
    case IdxType::int16: return 2;
    case IdxType::int32:
    case IdxType::float32: return 4;
    case IdxType::float64: return 8;
  }
  throw ValueError("idx_type_size: unknown IdxType " + std::to_string(static_cast<int>(type)));
}

const char* idx_type_name(IdxType type) {
  switch (type) {
    case IdxType::ubyte: return "ubyte";
    case IdxType::sbyte: return "sbyte";
    case IdxType::int16: return "short";
    case IdxType::int32: return "int";
    case IdxType::float32: return "float";
    case IdxType::float64: return "double";
  }
  return "unknown";
}

IdxInfo read_idx_info(const std::string& path, IdxReadOptions options) {
  detail::IdxStream stream(path);
  return read_header(stream, options);
}

Tensor read_idx(const std::string& path, IdxReadOptions options) {
  detail::IdxStream stream(path);
  const IdxInfo info = read_header(stream, options);
  // Validated: the size is within the cap and what the file can deliver.
  Tensor out = core::make_tensor(Shape(info.dims), idx_type_dtype(info.type), Device::cpu());
  const std::int64_t count = out.numel();
  void* data = out.data_ptr();
  switch (info.type) {
    case IdxType::ubyte: read_payload_exact(stream, info, data, info.payload_bytes, 0); break;
    case IdxType::int32:
    case IdxType::float32:
      read_payload_exact(stream, info, data, info.payload_bytes, 0);
      swap_in_place<std::uint32_t>(data, count);
      break;
    case IdxType::float64:
      read_payload_exact(stream, info, data, info.payload_bytes, 0);
      swap_in_place<std::uint64_t>(data, count);
      break;
    case IdxType::sbyte:
      read_widened<std::int8_t>(stream, info, static_cast<std::int32_t*>(data), count);
      break;
    case IdxType::int16:
      read_widened<std::int16_t>(stream, info, static_cast<std::int32_t*>(data), count);
      break;
  }
  stream.expect_end(describe(info));
  return out;
}

}  // namespace mixprec::data
