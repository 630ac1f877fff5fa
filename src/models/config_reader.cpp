// Checked JSON object access for the config readers (config_reader.h).
#include "models/config_reader.h"

#include <cmath>

#include "mixprec/error.h"

namespace mixprec::models::config {

std::string show(const json& value) {
  std::string s = value.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
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
