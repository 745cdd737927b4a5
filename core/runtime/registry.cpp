#include "core/runtime/registry.h"

#include <algorithm>
#include <mutex>

namespace tl {

namespace {
std::recursive_mutex registry_mutex;

struct Family {
  std::string name;
  int order;
  DeviceEnumerator enumerate;
};

// A function-local static: registrars run during static initialisation, in
// an order no one controls.
std::vector<Family>& families() {
  static std::vector<Family> f;
  return f;
}
}  // namespace

DeviceRegistrar::DeviceRegistrar(const char* family, int order, DeviceEnumerator enumerate) {
  families().push_back({family, order, std::move(enumerate)});
}

Registry& Registry::instance() {
  static Registry r;
  return r;
}

void Registry::enumerate() {
  if (enumerated_) return;
  enumerated_ = true;
  auto sorted = families();
  std::stable_sort(sorted.begin(), sorted.end(), [](const Family& a, const Family& b) { return a.order < b.order; });
  for (auto& family : sorted) {
    try {
      for (auto& d : family.enumerate()) devices_.push_back(d);
    } catch (const std::exception&) {
      // a broken driver must not take the other devices down with it
    }
  }
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
