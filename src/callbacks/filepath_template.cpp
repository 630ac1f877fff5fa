// Keras-style file name templates (src/callbacks/filepath_template.h).
#include "callbacks/filepath_template.h"

#include <cstdio>
#include <optional>

#include "mixprec/error.h"

namespace mixprec::callbacks::detail {

namespace {

struct Field {
  std::string name;
  std::string spec;  // without the ':'
};

[[noreturn]] void bad(const std::string& pattern, const std::string& problem) {
  throw ValueError("ModelCheckpoint: filepath '" + pattern + "': " + problem +
                   "; fields look like {epoch:02d} or {val_loss:.4f}");
}

// The spec's printf conversion: flags/width/precision of [0-9.+-] then d, f, e or g.
char conversion(const std::string& pattern, const std::string& spec) {
  if (spec.empty()) return 0;
  for (std::size_t i = 0; i + 1 < spec.size(); ++i) {
    const char c = spec[i];
    if (!((c >= '0' && c <= '9') || c == '.' || c == '+' || c == '-')) {
      bad(pattern, "unsupported format spec '" + spec + "'");
    }
  }
  const char last = spec.back();
  if (last != 'd' && last != 'f' && last != 'e' && last != 'g') {
    bad(pattern, "unsupported format spec '" + spec + "'");
  }
  if (spec.size() > 8) bad(pattern, "format spec '" + spec + "' is too long");
  return last;
}

std::string format_value(const std::string& pattern, const Field& f, double value, bool integer) {
  const char conv = conversion(pattern, f.spec);
  char text[64];
  if (conv == 'd' || (conv == 0 && integer)) {
    const std::string fmt = "%" + (conv ? f.spec.substr(0, f.spec.size() - 1) : "") + "lld";
    std::snprintf(text, sizeof text, fmt.c_str(), static_cast<long long>(value));
  } else {
    const std::string fmt = "%" + (conv ? f.spec : std::string("g"));
    std::snprintf(text, sizeof text, fmt.c_str(), value);
  }
  return text;
}

// Walks the pattern; calls `on_field` for each field and returns the text with the fields
// replaced by what it returns.
template <typename F>
std::string walk(const std::string& pattern, F&& on_field) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '}') bad(pattern, "a '}' without its '{'");
    if (c != '{') {
      out += c;
      continue;
    }
    const std::size_t close = pattern.find('}', i);
    if (close == std::string::npos) bad(pattern, "a '{' without its '}'");
    const std::string inside = pattern.substr(i + 1, close - i - 1);
    const std::size_t colon = inside.find(':');
    Field f{inside.substr(0, colon), colon == std::string::npos ? "" : inside.substr(colon + 1)};
    if (f.name.empty()) bad(pattern, "an empty field name");
    (void)conversion(pattern, f.spec);
    out += on_field(f);
    i = close;
  }
  return out;
}

}  // namespace

std::string format_filepath(const std::string& pattern, int epoch, std::int64_t batch,
                            const Logs& logs) {
  return walk(pattern, [&](const Field& f) {
    if (f.name == "epoch") return format_value(pattern, f, epoch + 1, true);
    if (f.name == "batch") return format_value(pattern, f, static_cast<double>(batch + 1), true);
    const std::optional<double> v = logs.get(f.name);
    if (!v) bad(pattern, "no log named '" + f.name + "' to fill {" + f.name + "}");
    return format_value(pattern, f, *v, false);
  });
}

void check_filepath_template(const std::string& pattern) {
  if (pattern.empty()) throw ValueError("ModelCheckpoint: filepath is empty");
  walk(pattern, [](const Field&) { return std::string(); });
}

}  // namespace mixprec::callbacks::detail
