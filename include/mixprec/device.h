// Devices: the CPU and CUDA GPUs. Tensors live on one device; ops dispatch on it.
#pragma once

#include <string>

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

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

// The device that new tensors go to when TensorOptions names none, and so where layers create
// their variables (like `with tf.device(...)` or torch.set_default_device): the CPU unless set.
// Per thread, so that input-pipeline threads keep making CPU tensors.
Device default_device();
void set_default_device(Device device);

// Sets the default device for its lifetime and restores the previous one:
//   { mp::DeviceScope on_gpu(mp::Device::cuda()); auto model = build(); model.fit(...); }
class DeviceScope {
 public:
  explicit DeviceScope(Device device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  Device previous_;
};

}  // namespace mixprec

#pragma GCC visibility pop
