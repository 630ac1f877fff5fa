// IDX files (the format of MNIST and Fashion-MNIST): a 4-byte magic (two zero bytes, a type code,
// the number of dimensions), one big-endian uint32 per dimension, then the big-endian payload in
// row-major order. Files may be gzip-compressed; compression is detected from the content (the
// 1f 8b gzip magic), never from the file name.
//
// Bad files are rejected with a DataError naming the file and the problem before any allocation
// that trusts the header (DESIGN §2.7): the header is validated (magic, type code, 1..8
// dimensions, element count and byte count computed with overflow checks, a size cap), then the
// payload size is checked against the file (plain: the file size; gzip: the ISIZE trailer and the
// largest size deflate can expand the compressed bytes to). Only then is the tensor allocated, and
// the stream must deliver exactly the payload: a short, long or corrupt stream is an error.
// Reading never modifies the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/error.h"
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::data {

// A bad or missing data file. A ValueError, so `catch (const mixprec::ValueError&)` sees it too.
class DataError : public ValueError {
 public:
  using ValueError::ValueError;
};

// IDX type codes (the third magic byte) and the dtype read_idx returns for each:
// ubyte -> uint8, sbyte -> int32, int16 -> int32, int32 -> int32, float32 -> float32,
// float64 -> float64. sbyte and int16 are widened to int32 (exact) because mixprec has no 8- or
// 16-bit signed integer dtype.
enum class IdxType : std::uint8_t {
  ubyte = 0x08,
  sbyte = 0x09,
  int16 = 0x0B,
  int32 = 0x0C,
  float32 = 0x0D,
  float64 = 0x0E,
};

enum class IdxCompression { none, gzip };

// 16 GiB: larger payloads are refused as absurd unless the caller raises the cap.
inline constexpr std::uint64_t kIdxDefaultMaxBytes = std::uint64_t{16} << 30;

struct IdxReadOptions {
  std::uint64_t max_bytes = kIdxDefaultMaxBytes;  // refuse payloads (uncompressed) above this
};

// What the header of a validated IDX file says.
struct IdxInfo {
  IdxType type = IdxType::ubyte;
  std::vector<std::int64_t> dims;  // every extent < 2^32; zero extents are allowed (no samples)
  IdxCompression compression = IdxCompression::none;
  std::uint64_t header_bytes = 0;   // 4 + 4 * dims.size()
  std::uint64_t payload_bytes = 0;  // element count * element size, as stored in the file
};

// The dtype read_idx returns for a type code, its size in the file, and its name ("ubyte", ...).
DType idx_type_dtype(IdxType type);
std::size_t idx_type_size(IdxType type);
const char* idx_type_name(IdxType type);

// Reads and validates the header and checks the payload size against the file (for gzip: against
// the trailer and the compressed size) without decompressing the payload. Throws DataError.
IdxInfo read_idx_info(const std::string& path, IdxReadOptions options = {});

// Reads a whole IDX file (plain or gzip) into a contiguous CPU tensor with shape `dims` and the
// dtype of idx_type_dtype(type). Throws DataError for a missing, unreadable or bad file.
// Trailing bytes after the payload (plain) or after the gzip member are an error: they mean the
// header does not describe the file, so the data cannot be trusted.
Tensor read_idx(const std::string& path, IdxReadOptions options = {});

}  // namespace mixprec::data

#pragma GCC visibility pop
