// The OpenCL device: every (platform, device) pair the ICD loader lists,
// named "opencl:P:D". Built only when CMake finds OpenCL (TL_HAVE_OPENCL).
// This header needs no CL headers, so Qt code and tests can include it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/runtime/device.h"

namespace tl {

// "CL_OUT_OF_RESOURCES" for -5, "CL_ERROR(-1234)" for codes it does not know.
std::string cl_error_name(int code);

// The OpenCL C spellings the renderer uses.
const Dialect& opencl_dialect();

// Opens device `device` of platform `platform` as a new, independent Device
// (its own context, queue and in-memory state). The registry holds the shared
// ones from enumerate_opencl_devices(); this is for tools and tests that want
// a fresh object. Never throws for a missing platform/device: it returns a
// Device whose info() says unavailable and why. Returns nullptr only when the
// indices do not exist at all.
std::shared_ptr<Device> open_opencl_device(int platform, int device);

// Every (platform, device) pair, as new Device objects; what opencl.cpp
// registers with the Registry.
std::vector<std::shared_ptr<Device>> enumerate_opencl_devices();

// The options compile() passes to clBuildProgram for this device.
std::string opencl_build_options(const DeviceInfo& info);

}  // namespace tl
