#include "registry.h"

#include <mutex>

namespace tl {

static std::recursive_mutex registry_mutex;

Registry& Registry::instance() {
  static Registry r;
  return r;
}

void Registry::enumerate() {
  if (enumerated_) return;
  enumerated_ = true;
  for (auto& d : enumerate_cpu_devices()) devices_.push_back(d);
#ifdef TL_HAVE_OPENCL
  try {
    for (auto& d : enumerate_opencl_devices()) devices_.push_back(d);
  } catch (const std::exception&) {
    // a broken ICD must not take the other devices down with it
  }
#endif
  for (auto& d : enumerate_ane_devices()) devices_.push_back(d);
}

const std::vector<std::shared_ptr<Device>>& Registry::devices() {
  std::lock_guard lock(registry_mutex);
  enumerate();
  return devices_;
}

void Registry::add(std::shared_ptr<Device> device) {
  std::lock_guard lock(registry_mutex);
  enumerate();
  devices_.push_back(std::move(device));
}

Device& Registry::get(const std::string& name) {
  std::lock_guard lock(registry_mutex);
  enumerate();
  for (auto& d : devices_)
    if (d->name() == name) return *d;
  std::string known;
  for (auto& d : devices_) known += (known.empty() ? "" : ", ") + d->name();
  throw DeviceError("no device named '" + name + "' (known devices: " + known + ")");
}

Device& Registry::get_available(const std::string& name) {
  Device& d = get(name);
  if (!d.available())
    throw DeviceError("device '" + name + "' (" + d.info().description + ") cannot run: " + d.info().unavailable_reason);
  return d;
}

}  // namespace tl
