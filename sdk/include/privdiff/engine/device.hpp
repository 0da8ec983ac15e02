#pragma once
/// @file
/// Where a run computes: `[run] device` = "auto" (CUDA when LibTorch sees a GPU, else the CPU),
/// "cpu", "cuda" or "cuda:N". Asking for CUDA where there is none is an error, never a silent CPU
/// run: a recipe tuned for a GPU would otherwise take days.

#include <privdiff/sdk_api.hpp>

#include <c10/core/Device.h>

#include <stdexcept>
#include <string>

namespace torch::nn {
class Module;
}

namespace privdiff::sdk::engine {

/// Thrown by resolve_device when the requested device does not exist on this machine.
class PRIVDIFF_SDK_API DeviceUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// "auto" | "cpu" | "cuda" | "cuda:N" -> a device that exists here. Throws std::invalid_argument
/// for any other text and DeviceUnavailable for a CUDA device this machine lacks (naming why:
/// a CPU-only LibTorch, or no visible GPU).
PRIVDIFF_SDK_API c10::Device resolve_device(const std::string& requested);

/// The device of a module's first parameter or buffer (the CPU for a module with neither).
PRIVDIFF_SDK_API c10::Device module_device(const torch::nn::Module& module);

/// True when this LibTorch was built with CUDA and sees at least one GPU.
PRIVDIFF_SDK_API bool cuda_usable();

}  // namespace privdiff::sdk::engine
