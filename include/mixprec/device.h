// Devices: the CPU and CUDA GPUs. Tensors live on one device; ops dispatch on it.
#pragma once

#include <string>

namespace mixprec {

enum class DeviceType { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  std::string to_string() const;  // "cpu", "cuda:0"
  // Parses "cpu", "cuda", "cuda:1"; anything else throws ValueError.
  static Device parse(const std::string& text);
  bool operator==(const Device& other) const = default;
};

}  // namespace mixprec
