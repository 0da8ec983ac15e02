#include <privdiff/engine/device.hpp>

#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/nn/module.h>

namespace privdiff::sdk::engine {

bool cuda_usable() { return torch::cuda::is_available(); }

c10::Device resolve_device(const std::string& requested) {
  if (requested == "cpu") return c10::Device(c10::kCPU);
  if (requested == "auto") return cuda_usable() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  if (requested != "cuda" && requested.rfind("cuda:", 0) != 0) {
    throw std::invalid_argument("device \"" + requested + "\": expected \"auto\", \"cpu\", \"cuda\" or \"cuda:N\"");
  }
  long index = 0;  // parsed here: c10::DeviceIndex is narrow (8 bits) in some LibTorch versions
  if (requested != "cuda") {
    const std::string digits = requested.substr(5);
    if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) {
      throw std::invalid_argument("device \"" + requested + "\": expected \"cuda:N\" with N a GPU number");
    }
    index = std::stol(digits);
  }
  if (!at::hasCUDA()) {
    throw DeviceUnavailable("device \"" + requested + "\": this privdiff was built against a CPU-only LibTorch "
                            "(rebuild with a CUDA LibTorch: PRIVDIFF_TORCH=python scripts/build.sh -DPRIVDIFF_CUDA=ON), "
                            "or use device = \"cpu\"");
  }
  const auto count = static_cast<long>(torch::cuda::device_count());
  if (count == 0) {
    throw DeviceUnavailable("device \"" + requested + "\": LibTorch has CUDA but sees no GPU (check nvidia-smi and "
                            "CUDA_VISIBLE_DEVICES), or use device = \"cpu\"");
  }
  if (index >= count) {
    throw DeviceUnavailable("device \"" + requested + "\": only " + std::to_string(count) + " GPU(s) visible (cuda:0" +
                            (count > 1 ? " to cuda:" + std::to_string(count - 1) : std::string()) + ")");
  }
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
}

c10::Device module_device(const torch::nn::Module& module) {
  for (const auto& p : module.parameters()) return p.device();
  for (const auto& b : module.buffers()) return b.device();
  return c10::Device(c10::kCPU);
}

}  // namespace privdiff::sdk::engine
