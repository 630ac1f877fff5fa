#include "layers/variable_names.h"

#include <memory>
#include <mutex>
#include <unordered_map>

namespace mixprec::layers::detail {

namespace {

struct Entry {
  std::weak_ptr<TensorImpl> variable;  // the address may be reused once this expires
  std::string name;
};

struct Registry {
  std::mutex mutex;
  std::unordered_map<const TensorImpl*, Entry> names;
  std::size_t next_sweep = 64;  // drop expired entries when the table doubles
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_variable_name(const Tensor& variable, const std::string& name) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  r.names[variable.impl()] = Entry{variable.impl_ptr(), name};
  if (r.names.size() >= r.next_sweep) {
    std::erase_if(r.names, [](const auto& item) { return item.second.variable.expired(); });
    r.next_sweep = 2 * r.names.size() + 64;
  }
}

std::string variable_name(const Tensor& variable) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.names.find(variable.impl());
  if (it == r.names.end() || it->second.variable.lock() != variable.impl_ptr()) return {};
  return it->second.name;
}

}  // namespace mixprec::layers::detail
