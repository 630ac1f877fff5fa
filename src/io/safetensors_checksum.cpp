// Checksums in safetensors metadata (safetensors_checksum.h).
#include "io/safetensors_checksum.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "io/crc32c.h"
#include "io/json_limits.h"

namespace mixprec::io::detail {

namespace {

// Each field ends with a NUL, so that ("ab", "c") and ("a", "bc") differ.
std::uint32_t add_field(std::uint32_t crc, std::string_view field) {
  crc = crc32c(field, crc);
  const char end = '\0';
  return crc32c(&end, 1, crc);
}

}  // namespace

std::uint32_t tensor_description_crc(const std::string& name, const char* dtype_code,
                                     const Shape& shape) {
  std::uint32_t crc = add_field(0, name);
  crc = add_field(crc, dtype_code);
  std::string dims;
  for (const std::int64_t d : shape.dims()) dims += std::to_string(d) + ",";
  return add_field(crc, dims);
}

std::uint32_t metadata_crc(const Metadata& metadata) {
  std::uint32_t crc = 0;
  for (const auto& [key, value] : metadata) {  // std::map: key order
    if (key == kChecksumKey) continue;
    crc = add_field(crc, key);
    crc = add_field(crc, value);
  }
  return crc;
}

bool looks_like_checksum_entry(std::string_view key, std::string_view value) {
  // Levenshtein distance to kChecksumKey, for keys short enough to be a damaged one.
  const std::string_view target = kChecksumKey;
  if (key.size() <= target.size() + 3) {
    std::vector<std::size_t> row(target.size() + 1);
    for (std::size_t j = 0; j <= target.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= key.size(); ++i) {
      std::size_t diagonal = row[0];
      row[0] = i;
      for (std::size_t j = 1; j <= target.size(); ++j) {
        const std::size_t above = row[j];
        row[j] = std::min(
            {row[j] + 1, row[j - 1] + 1, diagonal + (key[i - 1] == target[j - 1] ? 0 : 1)});
        diagonal = above;
      }
    }
    if (row[target.size()] <= 3) return true;
  }
  // A value holding `":"` then 8 hexadecimal digits and a quote: an entry of a table.
  if (value.empty() || value.front() != '{') return false;
  for (std::size_t at = value.find("\":\""); at != std::string_view::npos;
       at = value.find("\":\"", at + 1)) {
    const std::string_view digits = value.substr(at + 3, 9);
    if (digits.size() == 9 && digits[8] == '"' &&
        digits.substr(0, 8).find_first_not_of("0123456789abcdef") == std::string_view::npos) {
      return true;
    }
  }
  return false;
}

std::string crc_text(std::uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", static_cast<unsigned>(crc));
  return text;
}

std::string checksum_table_text(const std::map<std::string, std::uint32_t>& table) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, crc] : table) j[name] = crc_text(crc);
  return j.dump();
}

std::optional<std::map<std::string, std::uint32_t>> parse_checksum_table(std::string_view text,
                                                                         std::string& problem) {
  if (json_nesting_depth(text, 1) > 1) {
    problem = "is not a flat JSON object";
    return std::nullopt;
  }
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    problem = "is not a JSON object";
    return std::nullopt;
  }
  std::map<std::string, std::uint32_t> table;
  for (const auto& [name, value] : j.items()) {
    const std::string* s = value.is_string() ? value.get_ptr<const std::string*>() : nullptr;
    if (!s || s->size() != 8 || s->find_first_not_of("0123456789abcdef") != std::string::npos) {
      problem = "has an entry for '" + name + "' that is not 8 hexadecimal digits";
      return std::nullopt;
    }
    table[name] = static_cast<std::uint32_t>(std::stoul(*s, nullptr, 16));
  }
  return table;
}

}  // namespace mixprec::io::detail
