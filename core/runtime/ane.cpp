// The Apple Neural Engine. It has no public programming interface and exists
// only on Apple silicon, so this device is listed but honestly unavailable.
#include "core/runtime/device.h"
#include "core/runtime/registry.h"

namespace tl {

namespace {

class AneDevice : public Device {
 public:
  AneDevice() {
    info_.name = "ane";
    info_.kind = "Accelerator";
    info_.description = "Apple Neural Engine";
    info_.vendor = "Apple";
    info_.platform = "Core ML";
    info_.available = false;
#if defined(__APPLE__) && defined(__aarch64__)
    info_.unavailable_reason = "the ANE has no public kernel interface; tinylens cannot compile kernels for it yet";
#else
    info_.unavailable_reason = "the Apple Neural Engine exists only on Apple silicon Macs; this machine is not one";
#endif
    dialect_.name = "none";
  }
  const DeviceInfo& info() const override { return info_; }
  const Dialect& dialect() const override { return dialect_; }
  std::shared_ptr<Buffer> allocate(size_t) override { throw DeviceError("ane: " + info_.unavailable_reason); }
  void copy_in(Buffer&, const void*, size_t) override { throw DeviceError("ane: " + info_.unavailable_reason); }
  void copy_out(const Buffer&, void*, size_t) override { throw DeviceError("ane: " + info_.unavailable_reason); }
  Built build(const std::string&, const std::string&) override { throw DeviceError("ane: " + info_.unavailable_reason); }
  std::shared_ptr<Program> load(const std::string&, const std::string&) override {
    throw DeviceError("ane: " + info_.unavailable_reason);
  }

 private:
  DeviceInfo info_;
  Dialect dialect_;
};

}  // namespace

static DeviceRegistrar registrar("ane", 90, [] { return std::vector<std::shared_ptr<Device>>{std::make_shared<AneDevice>()}; });

}  // namespace tl
