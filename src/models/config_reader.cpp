// Checked JSON object access for the config readers (config_reader.h).
#include "models/config_reader.h"

#include <cmath>

#include "mixprec/error.h"

namespace mixprec::models::config {

namespace {

constexpr std::size_t kShown = 40;  // characters of a value an error message shows

// Appends `value`'s JSON text to `out` until it holds more than kShown characters. Never deeper
// than a few levels nor longer than the message needs, whatever the value (dump() would recurse
// through all of it).
void append_shown(const json& value, int depth, std::string& out) {
  if (out.size() > kShown) return;
  if (!value.is_structured()) {
    out += value.dump();
    return;
  }
  const bool object = value.is_object();
  out += object ? '{' : '[';
  if (depth >= 4 && !value.empty()) {
    out += "...";
  } else {
    bool first = true;
    for (auto it = value.begin(); it != value.end() && out.size() <= kShown; ++it) {
      if (!first) out += ',';
      first = false;
      if (object) out += json(it.key()).dump() + ':';
      append_shown(*it, depth + 1, out);
    }
  }
  out += object ? '}' : ']';
}

}  // namespace

std::string show(const json& value) {
  std::string s;
  append_shown(value, 0, s);
  if (s.size() > kShown) s = s.substr(0, kShown - 3) + "...";
  return s;
}

void fail(const std::string& where, const std::string& what) {
  throw ValueError(where.empty() ? what : where + ": " + what);
}

std::string quote(const std::string& key) {
  std::string s = json(key).dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::int64_t to_integer(const json& value, std::int64_t lo, std::int64_t hi,
                        const std::string& where, const std::string& key, const char* what) {
  const auto bad = [&](const std::string& expected) {
    fail(where, quote(key) + " must be " + expected + ", got " + show(value));
  };
  if (!value.is_number_integer()) bad(what);
  if (value.is_number_unsigned()) {
    const auto u = value.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi)) {
      bad(std::string(what) + " at most " + std::to_string(hi));
    }
    const auto v = static_cast<std::int64_t>(u);
    if (v < lo) bad(what);
    return v;
  }
  const auto v = value.get<std::int64_t>();
  if (v < lo) bad(what);
  if (v > hi) bad(std::string(what) + " at most " + std::to_string(hi));
  return v;
}

Object::Object(const json& value, std::string where) : value_(value), where_(std::move(where)) {
  if (!value_.is_object()) {
    fail(where_,
         std::string("expected a JSON object, got ") + value_.type_name() + " " + show(value_));
  }
}

const json& Object::get(const char* key) {
  const auto it = value_.find(key);
  if (it == value_.end()) fail(where_, "missing key " + quote(key));
  used_.insert(key);
  return *it;
}

void Object::bad(const char* key, const std::string& expected, const json& got) const {
  fail(where_, quote(key) + " must be " + expected + ", got " + show(got));
}

std::string Object::string(const char* key, std::size_t max_length) {
  const json& v = get(key);
  if (!v.is_string()) bad(key, "a string", v);
  const auto& s = v.get_ref<const std::string&>();
  if (s.size() > max_length) {
    bad(key, "a string of at most " + std::to_string(max_length) + " bytes", v);
  }
  return s;
}

bool Object::boolean(const char* key) {
  const json& v = get(key);
  if (!v.is_boolean()) bad(key, "true or false", v);
  return v.get<bool>();
}

std::int64_t Object::integer(const char* key, std::int64_t lo, std::int64_t hi, const char* what) {
  return to_integer(get(key), lo, hi, where_, key, what);
}

double Object::number(const char* key, double lo, double hi, Upper upper, const char* what) {
  const json& v = get(key);
  if (!v.is_number()) bad(key, what, v);
  const double d = v.get<double>();
  const bool above = upper == Upper::inclusive ? d > hi : d >= hi;
  if (!std::isfinite(d) || d < lo || above) bad(key, what, v);
  return d;
}

std::optional<double> Object::optional_number(const char* key, double lo, double hi,
                                              const char* what) {
  if (get(key).is_null()) return std::nullopt;
  return number(key, lo, hi, Upper::inclusive, what);
}

const json& Object::array(const char* key, std::size_t max_size) {
  const json& v = get(key);
  if (!v.is_array()) bad(key, "an array", v);
  if (v.size() > max_size) {
    fail(where_, quote(key) + " has " + std::to_string(v.size()) + " entries, more than the " +
                     std::to_string(max_size) + " allowed");
  }
  return v;
}

void Object::finish() const {
  for (auto it = value_.begin(); it != value_.end(); ++it) {
    if (!used_.contains(it.key())) fail(where_, "unknown key " + quote(it.key()));
  }
}

}  // namespace mixprec::models::config
