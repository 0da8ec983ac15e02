#include <privdiff/engine/precision.hpp>

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <stdexcept>

// LibTorch 2.4 keys autocast by device type; 1.13 has one switch for CUDA and one for the CPU.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define PRIVDIFF_AUTOCAST_BY_DEVICE_TYPE 1
#endif

namespace privdiff::sdk::engine {

namespace {

bool autocast_enabled(bool cuda) {
#ifdef PRIVDIFF_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::is_autocast_enabled(cuda ? at::kCUDA : at::kCPU);
#else
  return cuda ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

void set_autocast(bool cuda, bool enabled, at::ScalarType dtype) {
#ifdef PRIVDIFF_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_dtype(cuda ? at::kCUDA : at::kCPU, dtype);
  at::autocast::set_autocast_enabled(cuda ? at::kCUDA : at::kCPU, enabled);
#else
  if (cuda) {
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}

at::ScalarType autocast_dtype(bool cuda) {
#ifdef PRIVDIFF_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::get_autocast_dtype(cuda ? at::kCUDA : at::kCPU);
#else
  return cuda ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
#endif
}

}  // namespace

Precision precision_from_string(const std::string& name) {
  if (name == "float32") return Precision::float32;
  if (name == "tf32") return Precision::tf32;
  if (name == "bf16") return Precision::bf16;
  throw std::invalid_argument("precision must be \"float32\", \"tf32\" or \"bf16\", got \"" + name + "\"");
}

std::string to_string(Precision precision) {
  switch (precision) {
    case Precision::float32: return "float32";
    case Precision::tf32: return "tf32";
    case Precision::bf16: return "bf16";
  }
  return "unknown";
}

PrecisionScope::PrecisionScope(Precision precision, c10::Device device)
    : precision_(precision), cuda_(device.is_cuda()) {
  if (precision_ == Precision::bf16) {
    autocast_was_enabled_ = autocast_enabled(cuda_);
    autocast_dtype_ = autocast_dtype(cuda_);
    at::autocast::increment_nesting();
    set_autocast(cuda_, true, at::kBFloat16);
  } else if (precision_ == Precision::tf32 && cuda_) {
    auto& context = at::globalContext();
    tf32_cublas_ = context.allowTF32CuBLAS();
    tf32_cudnn_ = context.allowTF32CuDNN();
    context.setAllowTF32CuBLAS(true);
    context.setAllowTF32CuDNN(true);
  }
}

PrecisionScope::~PrecisionScope() {
  if (precision_ == Precision::bf16) {
    // As torch.autocast's exit: the cached low-precision weight copies go with the outermost scope.
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    set_autocast(cuda_, autocast_was_enabled_, autocast_dtype_);
  } else if (precision_ == Precision::tf32 && cuda_) {
    at::globalContext().setAllowTF32CuBLAS(tf32_cublas_);
    at::globalContext().setAllowTF32CuDNN(tf32_cudnn_);
  }
}

StrictFloat32Scope::StrictFloat32Scope()
    : tf32_cublas_(at::globalContext().allowTF32CuBLAS()), tf32_cudnn_(at::globalContext().allowTF32CuDNN()) {
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
}

StrictFloat32Scope::~StrictFloat32Scope() {
  at::globalContext().setAllowTF32CuBLAS(tf32_cublas_);
  at::globalContext().setAllowTF32CuDNN(tf32_cudnn_);
}

}  // namespace privdiff::sdk::engine
