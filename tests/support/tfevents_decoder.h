// An independent reader of TensorBoard event files for tests: TFRecord framing with both CRCs
// checked (a bit-by-bit CRC-32C, deliberately not the library's table), and a generic protobuf
// field parser for Event / Summary / Summary.Value / HistogramProto. Shares no code with
// src/io; every problem is a std::runtime_error saying where.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mixprec::testing::tfevents {

inline std::uint32_t crc32c_bitwise(std::string_view bytes) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : bytes) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return crc ^ 0xFFFFFFFFu;
}

inline std::uint32_t masked(std::uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

inline std::uint64_t read_le(std::string_view bytes, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i)
    v |= std::uint64_t(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

// The records of a TFRecord stream; throws on a bad CRC, a truncated record or trailing bytes.
inline std::vector<std::string> split_records(std::string_view bytes) {
  std::vector<std::string> records;
  std::size_t at = 0;
  while (at < bytes.size()) {
    if (bytes.size() - at < 12)
      throw std::runtime_error("truncated record header at " + std::to_string(at));
    const std::uint64_t length = read_le(bytes, at, 8);
    if (masked(crc32c_bitwise(bytes.substr(at, 8))) != read_le(bytes, at + 8, 4))
      throw std::runtime_error("bad length CRC at " + std::to_string(at));
    if (length > bytes.size() - at - 12 || bytes.size() - at - 12 - length < 4)
      throw std::runtime_error("truncated record at " + std::to_string(at));
    const std::string_view data = bytes.substr(at + 12, length);
    if (masked(crc32c_bitwise(data)) != read_le(bytes, at + 12 + length, 4))
      throw std::runtime_error("bad data CRC at " + std::to_string(at));
    records.emplace_back(data);
    at += 12 + length + 4;
  }
  return records;
}

struct Field {
  std::uint32_t number = 0;
  int wire_type = 0;
  std::uint64_t scalar = 0;  // varint, fixed64 or fixed32 value
  std::string_view bytes;    // length-delimited payload
};

inline std::uint64_t read_varint(std::string_view m, std::size_t& at) {
  std::uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (at >= m.size()) throw std::runtime_error("truncated varint");
    const auto b = static_cast<unsigned char>(m[at++]);
    v |= std::uint64_t(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
  throw std::runtime_error("varint longer than 10 bytes");
}

inline std::vector<Field> parse_fields(std::string_view m) {
  std::vector<Field> fields;
  std::size_t at = 0;
  while (at < m.size()) {
    const std::uint64_t key = read_varint(m, at);
    Field f;
    f.number = static_cast<std::uint32_t>(key >> 3);
    f.wire_type = static_cast<int>(key & 7);
    if (f.number == 0) throw std::runtime_error("field number 0");
    switch (f.wire_type) {
      case 0: f.scalar = read_varint(m, at); break;
      case 1:
        if (m.size() - at < 8) throw std::runtime_error("truncated fixed64");
        f.scalar = read_le(m, at, 8);
        at += 8;
        break;
      case 5:
        if (m.size() - at < 4) throw std::runtime_error("truncated fixed32");
        f.scalar = read_le(m, at, 4);
        at += 4;
        break;
      case 2: {
        const std::uint64_t n = read_varint(m, at);
        if (n > m.size() - at) throw std::runtime_error("truncated length-delimited field");
        f.bytes = m.substr(at, n);
        at += n;
        break;
      }
      default: throw std::runtime_error("unexpected wire type " + std::to_string(f.wire_type));
    }
    fields.push_back(f);
  }
  return fields;
}

inline double as_double(const Field& f) {
  if (f.wire_type != 1)
    throw std::runtime_error("field " + std::to_string(f.number) + " is not fixed64");
  double d;
  std::memcpy(&d, &f.scalar, 8);
  return d;
}

struct Histo {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit, bucket;
};

struct Value {
  std::string tag;
  std::optional<float> simple_value;
  std::optional<Histo> histo;
};

struct Event {
  double wall_time = 0;
  std::int64_t step = 0;
  std::optional<std::string> file_version;
  std::vector<Value> values;
};

inline void append_doubles(const Field& f, std::vector<double>& out) {
  if (f.wire_type == 1) {
    out.push_back(as_double(f));
    return;
  }
  if (f.wire_type != 2 || f.bytes.size() % 8 != 0) throw std::runtime_error("bad packed doubles");
  for (std::size_t i = 0; i < f.bytes.size(); i += 8) {
    const std::uint64_t bits = read_le(f.bytes, i, 8);
    double d;
    std::memcpy(&d, &bits, 8);
    out.push_back(d);
  }
}

inline Histo parse_histo(std::string_view m) {
  Histo h;
  for (const Field& f : parse_fields(m)) {
    switch (f.number) {
      case 1: h.min = as_double(f); break;
      case 2: h.max = as_double(f); break;
      case 3: h.num = as_double(f); break;
      case 4: h.sum = as_double(f); break;
      case 5: h.sum_squares = as_double(f); break;
      case 6: append_doubles(f, h.bucket_limit); break;
      case 7: append_doubles(f, h.bucket); break;
      default:
        throw std::runtime_error("unexpected HistogramProto field " + std::to_string(f.number));
    }
  }
  return h;
}

inline Value parse_value(std::string_view m) {
  Value v;
  for (const Field& f : parse_fields(m)) {
    if (f.number == 1 && f.wire_type == 2) {
      v.tag = std::string(f.bytes);
    } else if (f.number == 2 && f.wire_type == 5) {
      const auto bits = static_cast<std::uint32_t>(f.scalar);
      float x;
      std::memcpy(&x, &bits, 4);
      v.simple_value = x;
    } else if (f.number == 5 && f.wire_type == 2) {
      v.histo = parse_histo(f.bytes);
    } else {
      throw std::runtime_error("unexpected Summary.Value field " + std::to_string(f.number));
    }
  }
  return v;
}

inline Event parse_event(std::string_view m) {
  Event e;
  for (const Field& f : parse_fields(m)) {
    if (f.number == 1) {
      e.wall_time = as_double(f);
    } else if (f.number == 2 && f.wire_type == 0) {
      e.step = static_cast<std::int64_t>(f.scalar);
    } else if (f.number == 3 && f.wire_type == 2) {
      e.file_version = std::string(f.bytes);
    } else if (f.number == 5 && f.wire_type == 2) {
      for (const Field& sv : parse_fields(f.bytes)) {
        if (sv.number != 1 || sv.wire_type != 2)
          throw std::runtime_error("unexpected Summary field");
        e.values.push_back(parse_value(sv.bytes));
      }
    } else {
      throw std::runtime_error("unexpected Event field " + std::to_string(f.number));
    }
  }
  return e;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::vector<Event> read_events(const std::filesystem::path& path) {
  std::vector<Event> events;
  for (const std::string& r : split_records(read_file(path))) events.push_back(parse_event(r));
  return events;
}

// The one events.out.tfevents.* file in `dir` (throws unless there is exactly one).
inline std::filesystem::path only_event_file(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
      found.push_back(entry.path());
  }
  if (found.size() != 1)
    throw std::runtime_error(std::to_string(found.size()) + " event files in " + dir.string());
  return found[0];
}

}  // namespace mixprec::testing::tfevents
