// A checked view of one JSON object of a config (model or compile settings): typed getters that
// throw mixprec::ValueError naming the place and the key ("layers[3] (dense_2): \"units\" must be
// a positive integer, got -4"), and finish(), which refuses keys nobody read. Internal to the
// config readers (model_config_reader.cpp, compile_config.cpp).
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace mixprec::models::config {

using nlohmann::json;

// A value as the error message shows it: its JSON text, cut to 40 characters.
std::string show(const json& value);
// ValueError "<where>: <what>" (just <what> when where is empty).
[[noreturn]] void fail(const std::string& where, const std::string& what);
// "\"key\"", with the key escaped as JSON (a hostile key may hold anything).
std::string quote(const std::string& key);

// `value` as an integer in [lo, hi]; `what` describes what is expected ("a positive integer").
std::int64_t to_integer(const json& value, std::int64_t lo, std::int64_t hi,
                        const std::string& where, const std::string& key, const char* what);

enum class Upper { inclusive, exclusive };

class Object {
 public:
  Object(const json& value, std::string where);

  const std::string& where() const { return where_; }
  void set_where(std::string where) { where_ = std::move(where); }
  bool has(const char* key) const { return value_.contains(key); }
  // The value of a required key (ValueError when missing).
  const json& get(const char* key);
  std::string string(const char* key, std::size_t max_length = 256);
  bool boolean(const char* key);
  std::int64_t integer(const char* key, std::int64_t lo, std::int64_t hi, const char* what);
  double number(const char* key, double lo, double hi, Upper upper, const char* what);
  // null, or a number in [lo, hi].
  std::optional<double> optional_number(const char* key, double lo, double hi, const char* what);
  // A JSON array (ValueError otherwise, or when longer than max_size).
  const json& array(const char* key, std::size_t max_size);
  // ValueError naming the first key that no getter asked for.
  void finish() const;
  [[noreturn]] void bad(const char* key, const std::string& expected, const json& got) const;

 private:
  const json& value_;
  std::string where_;
  std::set<std::string> used_;
};

}  // namespace mixprec::models::config
