#include "layers/naming.h"

#include <cctype>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

#include "mixprec/layers/layer.h"

namespace mixprec {

namespace layers::detail {
namespace {

struct Registry {
  std::mutex mutex;
  std::unordered_map<std::string, int> next;  // prefix -> next suffix to try (0 = no suffix)
  std::set<std::string, std::less<>> used;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::string snake_case(std::string_view class_name) {
  std::string out;
  for (std::size_t i = 0; i < class_name.size(); ++i) {
    const char c = class_name[i];
    const bool upper = std::isupper(static_cast<unsigned char>(c)) != 0;
    if (upper && i > 0) {
      const bool prev_lower = std::islower(static_cast<unsigned char>(class_name[i - 1])) != 0;
      const bool next_lower = i + 1 < class_name.size() &&
                              std::islower(static_cast<unsigned char>(class_name[i + 1])) != 0;
      // "InputLayer" -> input_layer; "ReLU" -> re_lu is avoided only for runs of capitals.
      if (prev_lower ||
          (next_lower && std::isupper(static_cast<unsigned char>(class_name[i - 1])))) {
        out += '_';
      }
    }
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::string unique_name(const std::string& prefix) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  int& n = r.next[prefix];
  for (;; ++n) {
    std::string candidate = n == 0 ? prefix : prefix + "_" + std::to_string(n);
    if (r.used.insert(candidate).second) {
      ++n;
      return candidate;
    }
  }
}

void reserve_name(const std::string& name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.used.insert(name);
}

}  // namespace layers::detail

void clear_session() {
  layers::detail::Registry& r = layers::detail::registry();
  std::lock_guard lock(r.mutex);
  r.next.clear();
  r.used.clear();
}

}  // namespace mixprec
