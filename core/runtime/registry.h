// All devices the machine has, enumerated once: cpu, every OpenCL device of
// every ICD platform, cuda (when built), ane (reports why it cannot run here).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "device.h"

namespace tl {

class Registry {
 public:
  static Registry& instance();
  const std::vector<std::shared_ptr<Device>>& devices();
  // Throws DeviceError naming the device and listing the known ones.
  Device& get(const std::string& name);
  // Throws DeviceError when the device exists but cannot run, with its reason.
  Device& get_available(const std::string& name);
  void add(std::shared_ptr<Device> device);

 private:
  Registry() = default;
  void enumerate();
  bool enumerated_ = false;
  std::vector<std::shared_ptr<Device>> devices_;
};

// Per-backend enumeration hooks, each in its own file.
std::vector<std::shared_ptr<Device>> enumerate_cpu_devices();
std::vector<std::shared_ptr<Device>> enumerate_opencl_devices();
std::vector<std::shared_ptr<Device>> enumerate_ane_devices();

}  // namespace tl
