#include "mixprec/device.h"

#include <string>

#include "mixprec/error.h"

namespace mixprec {

std::string Device::to_string() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5 &&
      text.find_first_not_of("0123456789", 5) == std::string::npos && text.size() < 10) {
    return cuda(std::stoi(text.substr(5)));
  }
  throw ValueError("unknown device '" + text + "'; expected cpu, cuda or cuda:N");
}

namespace {
thread_local Device current_default = Device::cpu();
}  // namespace

Device default_device() { return current_default; }
void set_default_device(Device device) { current_default = device; }

DeviceScope::DeviceScope(Device device) : previous_(current_default) { current_default = device; }
DeviceScope::~DeviceScope() { current_default = previous_; }

}  // namespace mixprec
