#pragma once
/// @file
/// Mixed precision where the privacy analysis is untouched. The forward pass (and so the backward
/// to the layer outputs) may run in bfloat16 (autocast) or with TF32 matrix products on a GPU; the
/// per-example norms, the clipping, the noise and the optimizer stay in float32: the engine casts
/// what the layers captured back to their parameters' dtype before any norm is taken, so the
/// sensitivity bound C holds exactly as in float32 (a lower-precision forward changes the gradient
/// being clipped, never how it is clipped). The engine takes the norms and clipped sums inside a
/// StrictFloat32Scope whatever the precision.
///   float32  float32 tensors with LibTorch's own settings (the default; on CUDA cuDNN may use TF32
///            in the forward, as in PyTorch)
///   tf32     float32 tensors, TF32 tensor-core products on CUDA (cuBLAS and cuDNN); no effect on a CPU
///   bf16     autocast to bfloat16 on the tensors' device (CUDA; on a CPU too, rarely faster there)

#include <privdiff/sdk_api.hpp>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>

namespace privdiff::sdk::engine {

enum class Precision { float32, tf32, bf16 };

/// "float32" / "tf32" / "bf16" -> Precision; throws std::invalid_argument.
PRIVDIFF_SDK_API Precision precision_from_string(const std::string& name);
PRIVDIFF_SDK_API std::string to_string(Precision precision);

/// RAII: computations on `device` inside the scope run at `precision`; the previous settings come
/// back when it ends. Scopes nest.
class PRIVDIFF_SDK_API PrecisionScope {
 public:
  PrecisionScope(Precision precision, c10::Device device);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Precision precision_;
  bool cuda_;
  bool autocast_was_enabled_ = false;
  c10::ScalarType autocast_dtype_ = c10::ScalarType::BFloat16;
  bool tf32_cublas_ = false, tf32_cudnn_ = false;
};

/// RAII: no TF32 in cuBLAS's and cuDNN's float32 products inside the scope (LibTorch lets cuDNN use
/// TF32 by default); the previous settings come back when it ends. The engine takes per-example
/// norms and clipped sums inside one: both come from the captured inputs and output gradients by
/// different kernels, and only products rounded alike in both keep each example's clipped
/// contribution within C (TF32's 10-bit products would let it exceed C by ~1e-3 relative).
class PRIVDIFF_SDK_API StrictFloat32Scope {
 public:
  StrictFloat32Scope();
  ~StrictFloat32Scope();
  StrictFloat32Scope(const StrictFloat32Scope&) = delete;
  StrictFloat32Scope& operator=(const StrictFloat32Scope&) = delete;

 private:
  bool tf32_cublas_, tf32_cudnn_;
};

}  // namespace privdiff::sdk::engine
