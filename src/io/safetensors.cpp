// safetensors reading and writing (include/mixprec/io/safetensors.h).
#include "mixprec/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "io/atomic_file.h"
#include "io/crc32c.h"
#include "io/json_limits.h"
#include "io/safetensors_checksum.h"
#include "mixprec/creation.h"
#include "mixprec/error.h"

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swapping here");

namespace mixprec::io {

namespace {

using nlohmann::json;

constexpr std::size_t kMaxHeaderDepth = 8;

struct Entry {
  std::string name;
  DType dtype = DType::float32;
  Shape shape;
  std::uint64_t begin = 0, end = 0;
  std::optional<std::uint32_t> crc;  // the stored checksum (files written by mixprec)
};

struct Header {
  std::vector<Entry> entries;  // sorted by begin
  Metadata metadata;           // without the checksum table
};

constexpr std::pair<const char*, DType> kDTypes[] = {
    {"F64", DType::float64},   {"F32", DType::float32}, {"F16", DType::float16},
    {"BF16", DType::bfloat16}, {"I64", DType::int64},   {"I32", DType::int32},
    {"U8", DType::uint8},      {"BOOL", DType::bool_}};

const char* dtype_code(DType d) {
  for (const auto& [code, dtype] : kDTypes) {
    if (dtype == d) return code;
  }
  throw DTypeError("safetensors: no dtype code for " + std::string(dtype_name(d)));
}

std::optional<DType> dtype_of(const std::string& code) {
  for (const auto& [c, dtype] : kDTypes) {
    if (code == c) return dtype;
  }
  return std::nullopt;
}

[[noreturn]] void bad(std::string_view source, const std::string& problem) {
  throw IOError(std::string(source) + ": " + problem);
}

// The JSON text, refusing repeated names at the top level (nlohmann would keep the last one).
json parse_json(std::string_view text, std::string_view source) {
  // A header is {"name": {"shape": [...]}, "__metadata__": {...}}: three levels. The bound is
  // checked on the text, before the parser or any walk of the document sees a deep value.
  if (const std::string deep = json_depth_problem(text, kMaxHeaderDepth); !deep.empty()) {
    bad(source, "the header " + deep + " (a safetensors header has 3 levels)");
  }
  std::set<std::string> names;
  std::string repeated;
  const json::parser_callback_t check = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1) {
      const std::string key = parsed.get<std::string>();
      if (!names.insert(key).second && repeated.empty()) repeated = key;
    }
    return true;
  };
  json j = json::parse(text.begin(), text.end(), check, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad(source, "the header is not well-formed JSON");
  if (!repeated.empty()) bad(source, "the header names '" + repeated + "' twice");
  if (!j.is_object()) bad(source, "the header is not a JSON object");
  return j;
}

Entry parse_entry(const std::string& name, const json& e, std::string_view source) {
  const std::string where = "tensor '" + name + "': ";
  if (!e.is_object() || e.size() != 3 || !e.contains("dtype") || !e.contains("shape") ||
      !e.contains("data_offsets")) {
    bad(source, where + "expected an object with exactly dtype, shape and data_offsets");
  }
  Entry out;
  out.name = name;
  if (!e["dtype"].is_string()) bad(source, where + "dtype is not a string");
  const std::optional<DType> dtype = dtype_of(e["dtype"].get<std::string>());
  if (!dtype) bad(source, where + "unsupported dtype '" + e["dtype"].get<std::string>() + "'");
  out.dtype = *dtype;
  if (!e["shape"].is_array() || e["shape"].size() > 16) bad(source, where + "bad shape");
  std::uint64_t elements = 1, span = 1;
  bool overflow = false, span_overflow = false;
  std::vector<std::int64_t> dims;
  for (const json& d : e["shape"]) {
    if (!d.is_number_unsigned() || d.get<std::uint64_t>() > (std::uint64_t{1} << 62)) {
      bad(source, where + "a dimension is not a non-negative integer below 2^62");
    }
    const std::uint64_t v = d.get<std::uint64_t>();
    overflow = overflow || (v != 0 && elements > UINT64_MAX / v);
    elements *= v;
    // With a zero extent there are no elements whatever the others are, but the tensor is made
    // with all of them: their product with zeros counted as one must fit an int64 too.
    const std::uint64_t w = v == 0 ? 1 : v;
    span_overflow = span_overflow || span > static_cast<std::uint64_t>(INT64_MAX) / w;
    span *= span_overflow ? 1 : w;
    dims.push_back(static_cast<std::int64_t>(v));
  }
  const std::uint64_t size = dtype_size(out.dtype);
  overflow = overflow || elements > UINT64_MAX / size;
  const json& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
      !off[1].is_number_unsigned()) {
    bad(source, where + "data_offsets must be two non-negative integers");
  }
  out.begin = off[0].get<std::uint64_t>();
  out.end = off[1].get<std::uint64_t>();
  if (out.end < out.begin) bad(source, where + "data_offsets end before they begin");
  if (overflow || elements * size != out.end - out.begin) {
    bad(source, where + "shape and dtype need " +
                    (overflow ? std::string("more than 2^64") : std::to_string(elements * size)) +
                    " bytes, data_offsets give " + std::to_string(out.end - out.begin));
  }
  if (span_overflow) {
    bad(source, where + "the product of the shape's extents does not fit a 64-bit integer");
  }
  out.shape = Shape(dims);
  return out;
}

// Takes the checksum table out of the metadata, verifies the metadata's own entry and gives each
// tensor its stored checksum (checked when its bytes are read). A file without a table is left
// unchecked; a table that does not name exactly the file's tensors is an error.
void attach_checksums(Header& h, std::string_view source) {
  const auto it = h.metadata.find(detail::kChecksumKey);
  if (it == h.metadata.end()) {
    // A damaged key must not turn the checks off: an entry whose name is a few edits from the
    // table's, or whose value is a checksum table, is the table with a changed byte.
    for (const auto& [key, value] : h.metadata) {
      if (detail::looks_like_checksum_entry(key, value)) {
        bad(source, "__metadata__ entry '" + key.substr(0, 40) + "' is a damaged " +
                        detail::kChecksumKey + " (the file is corrupt); restore it from a copy " +
                        "or write it again");
      }
    }
    return;
  }
  std::string problem;
  const auto table = detail::parse_checksum_table(it->second, problem);
  if (!table) bad(source, std::string("__metadata__.") + detail::kChecksumKey + " " + problem);
  h.metadata.erase(it);
  const auto own = table->find(detail::kMetadataEntry);
  if (own == table->end()) {
    bad(source, std::string("__metadata__.") + detail::kChecksumKey + " has no entry for " +
                    "__metadata__ (the file is corrupt)");
  }
  if (const std::uint32_t computed = detail::metadata_crc(h.metadata); computed != own->second) {
    bad(source, "__metadata__ does not match its checksum (stored " +
                    detail::crc_text(own->second) + ", computed " + detail::crc_text(computed) +
                    "): the file is corrupt; restore it from a copy or write it again");
  }
  for (Entry& e : h.entries) {
    const auto c = table->find(e.name);
    if (c == table->end()) {
      bad(source, "tensor '" + e.name + "' has no entry in __metadata__." + detail::kChecksumKey +
                      " (the file is corrupt: a changed name?)");
    }
    e.crc = c->second;
  }
  if (table->size() != h.entries.size() + 1) {
    bad(source, std::string("__metadata__.") + detail::kChecksumKey + " names " +
                    std::to_string(table->size() - 1) + " tensors, the file has " +
                    std::to_string(h.entries.size()) + " (the file is corrupt)");
  }
}

// IOError naming the tensor when its bytes (or its description) differ from the stored checksum.
void verify(const Entry& e, const Tensor& t, std::string_view source) {
  if (!e.crc) return;
  std::uint32_t crc = detail::tensor_description_crc(e.name, dtype_code(e.dtype), e.shape);
  if (e.end > e.begin) crc = crc32c(t.data_ptr(), e.end - e.begin, crc);
  if (crc != *e.crc) {
    bad(source, "tensor '" + e.name + "' does not match its checksum (stored " +
                    detail::crc_text(*e.crc) + ", computed " + detail::crc_text(crc) +
                    "): the file is corrupt; restore it from a copy or write it again");
  }
}

Header parse_header(std::string_view text, std::uint64_t data_bytes, std::string_view source) {
  const json j = parse_json(text, source);
  Header h;
  for (const auto& [name, value] : j.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) bad(source, "__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) bad(source, "__metadata__ value '" + k + "' is not a string");
        h.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    if (name.empty()) bad(source, "a tensor has an empty name");
    h.entries.push_back(parse_entry(name, value, source));
  }
  attach_checksums(h, source);
  std::sort(h.entries.begin(), h.entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  std::uint64_t at = 0;
  for (const Entry& e : h.entries) {
    if (e.begin != at) {
      bad(source, "tensor '" + e.name + "' starts at byte " + std::to_string(e.begin) + " of the " +
                      "data, expected " + std::to_string(at) +
                      (e.begin < at ? " (it overlaps the one before)" : " (a hole before it)"));
    }
    at = e.end;
  }
  if (at != data_bytes) {
    bad(source, "the tensors cover " + std::to_string(at) + " bytes but the data is " +
                    std::to_string(data_bytes) + " bytes" +
                    (at > data_bytes ? " (the file is truncated)" : " (trailing bytes)"));
  }
  return h;
}

std::uint64_t read_u64_le(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Header length from the first 8 bytes, checked against the cap and the file size.
std::uint64_t header_length(const unsigned char* prefix, std::uint64_t total,
                            std::string_view source) {
  const std::uint64_t n = read_u64_le(prefix);
  if (n > kMaxSafetensorsHeaderBytes) {
    bad(source, "header length " + std::to_string(n) + " exceeds the 100 MB limit");
  }
  if (n > total - 8) {
    bad(source, "header length " + std::to_string(n) + " is more than the " +
                    std::to_string(total - 8) + " bytes after it (truncated file?)");
  }
  return n;
}

Tensor make_tensor(const Entry& e) {
  return empty(e.shape, {.dtype = e.dtype, .device = Device::cpu()});
}

}  // namespace

SafetensorsContents parse_safetensors(std::span<const std::byte> bytes, std::string_view source) {
  if (bytes.size() < 8)
    bad(source, "too short for a safetensors file (" + std::to_string(bytes.size()) + " bytes)");
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::uint64_t n = header_length(p, bytes.size(), source);
  const Header h = parse_header(std::string_view(reinterpret_cast<const char*>(p + 8), n),
                                bytes.size() - 8 - n, source);
  SafetensorsContents out;
  out.metadata = h.metadata;
  for (const Entry& e : h.entries) {
    Tensor t = make_tensor(e);
    if (e.end > e.begin) std::memcpy(t.data_ptr(), p + 8 + n + e.begin, e.end - e.begin);
    verify(e, t, source);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

SafetensorsContents load_safetensors(const std::filesystem::path& path) {
  const std::string source = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(source, std::string("cannot open: ") + std::strerror(errno));
  std::error_code ec;
  const std::uint64_t total = std::filesystem::file_size(path, ec);
  if (ec) bad(source, "cannot read its size: " + ec.message());
  if (total < 8)
    bad(source, "too short for a safetensors file (" + std::to_string(total) + " bytes)");
  unsigned char prefix[8];
  in.read(reinterpret_cast<char*>(prefix), 8);
  const std::uint64_t n = header_length(prefix, total, source);
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  if (!in) bad(source, "reading the header failed");
  const Header h = parse_header(text, total - 8 - n, source);
  SafetensorsContents out;
  out.metadata = h.metadata;
  for (const Entry& e : h.entries) {  // sorted: the data is read front to back
    Tensor t = make_tensor(e);
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(e.end - e.begin));
    if (!in) bad(source, "reading tensor '" + e.name + "' failed (truncated?)");
    verify(e, t, source);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

void save_safetensors(const std::filesystem::path& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const Metadata& metadata) {
  if (metadata.contains(detail::kChecksumKey)) {
    throw ValueError(std::string("save_safetensors: the metadata key '") + detail::kChecksumKey +
                     "' is reserved (the writer stores the file's checksums under it); rename it");
  }
  json header = json::object();
  std::vector<Tensor> host;
  std::map<std::string, std::uint32_t> checksums;
  std::uint64_t at = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__" || header.contains(name)) {
      throw ValueError(
          "save_safetensors: tensor names must be non-empty, unique and not "
          "__metadata__, got '" +
          name + "'");
    }
    if (!t.defined()) throw ValueError("save_safetensors: tensor '" + name + "' is undefined");
    Tensor c = t.to(Device::cpu()).contiguous();
    std::vector<std::int64_t> dims(c.shape().dims().begin(), c.shape().dims().end());
    header[name] = {
        {"dtype", dtype_code(c.dtype())}, {"shape", dims}, {"data_offsets", {at, at + c.nbytes()}}};
    std::uint32_t crc = detail::tensor_description_crc(name, dtype_code(c.dtype()), c.shape());
    if (c.nbytes() > 0) crc = crc32c(c.data_ptr(), c.nbytes(), crc);
    checksums[name] = crc;
    at += c.nbytes();
    host.push_back(std::move(c));
  }
  checksums[detail::kMetadataEntry] = detail::metadata_crc(metadata);
  Metadata stored = metadata;
  stored[detail::kChecksumKey] = detail::checksum_table_text(checksums);
  header["__metadata__"] = stored;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i)
    prefix[i] = static_cast<unsigned char>((text.size() >> (8 * i)) & 0xff);
  AtomicFile file(path);
  file.write(prefix, 8);
  file.write(text.data(), text.size());
  for (const Tensor& t : host) {
    if (t.nbytes() > 0) file.write(t.data_ptr(), t.nbytes());
  }
  file.commit();
}

}  // namespace mixprec::io
