// All devices the machine has, enumerated once. The registry lists no device
// itself: each device file registers an enumerator with a static
// DeviceRegistrar (cpu.cpp, opencl.cpp, cuda.cpp, ane.cpp). The core library
// is linked whole-archive (CMakeLists.txt) so no registrar is dropped.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/runtime/device.h"

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

// Lists the devices of one family. An enumerator that throws lists none (a
// broken driver must not take the other devices down); a device that exists
// but cannot run is listed with available = false and its reason.
using DeviceEnumerator = std::function<std::vector<std::shared_ptr<Device>>()>;

// At namespace scope in a device's file:
//   static DeviceRegistrar registrar("cuda", 20, [] { return ...; });
// `order` sorts the families in listings (cpu 0, opencl 10, cuda 20, ane 90).
struct DeviceRegistrar {
  DeviceRegistrar(const char* family, int order, DeviceEnumerator enumerate);
};

}  // namespace tl
