// Errors the core raises. Every message names the offending values so a user
// can act on it; nothing in the core aborts the process.
#pragma once
#include <stdexcept>
#include <string>

namespace tl {

// Bad arguments: mismatched shapes, invalid axes, out-of-range slices.
struct ShapeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A kernel failed to compile; carries the source and the full compiler log.
struct CompileError : std::runtime_error {
  CompileError(const std::string& what, std::string source, std::string log)
      : std::runtime_error(what), source(std::move(source)), log(std::move(log)) {}
  std::string source, log;
};

// A device failed at run time (lost, out of resources, unavailable).
struct DeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A file could not be read or parsed (images, checkpoints, ONNX, data sets).
struct IOError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace tl
