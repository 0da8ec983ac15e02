#pragma once
/// @file
/// Sampler: generates samples from a model's denoiser.

#include <privdiff/components/component.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace privdiff::sdk {

class Model;

struct SampleRequest {
  std::int64_t count = 0;
  /// int64 [count] class labels, or undefined for unconditional sampling.
  at::Tensor labels;
  /// One prompt per sample (UTF-8), for a model that conditions on text (Model::conditions_on_text);
  /// empty otherwise. Classifier-free guidance's unconditional branch gets the empty prompt "".
  std::vector<std::string> captions;
  /// Classifier-free guidance weight w: D_w = (1 + w) D(x|y) - w D(x); w = 0 is purely conditional.
  /// Unset: the sampler's configured `guidance`.
  std::optional<double> guidance;
  std::uint64_t seed = 0;
};

class PRIVDIFF_SDK_API Sampler : public Component {
 public:
  static constexpr ComponentKind kind = ComponentKind::sampler;
  ~Sampler() override;

  /// Samples in the model's sampler space, [count, ...model.sample_shape()]; the caller decodes. The
  /// host calls it with autograd off (no graph is kept) and the model in eval mode.
  virtual at::Tensor sample(Model& model, const SampleRequest& request) = 0;
};

}  // namespace privdiff::sdk
