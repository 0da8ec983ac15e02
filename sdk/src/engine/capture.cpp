#include <privdiff/engine/capture.hpp>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>

namespace privdiff::sdk::engine {

namespace {
thread_local CaptureSession* active_session = nullptr;

// What a tap holds of its sink: not the sink itself, so that a graph outliving the clipping that
// tapped it (a caller keeping the loss) never calls into a sink that is gone.
struct SinkHandle : torch::CustomClassHolder {
  explicit SinkHandle(std::weak_ptr<OutputGradientSink> s) : sink(std::move(s)) {}
  std::weak_ptr<OutputGradientSink> sink;
};

// A pass-through node on a layer's output, marked as modifying it in place so that the output
// tensor the layer returns carries it (no layer changes what it returns): backward hands the
// output's gradient to the sink and passes it on unchanged; its second input, the session's
// probe, gets a zero gradient but puts every tap on a path to the probe.
struct Tap : torch::autograd::Function<Tap> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, at::Tensor output, const at::Tensor& /*probe*/,
                            std::int64_t call, c10::intrusive_ptr<SinkHandle> handle) {
    ctx->saved_data["call"] = call;
    ctx->saved_data["sink"] = c10::IValue::make_capsule(std::move(handle));
    ctx->mark_dirty({output});
    return output;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto handle = c10::static_intrusive_pointer_cast<SinkHandle>(ctx->saved_data["sink"].toCapsule());
    if (const auto sink = handle->sink.lock()) {
      sink->on_output_gradient(static_cast<std::size_t>(ctx->saved_data["call"].toInt()), grads[0]);
    }
    // The probe's gradient is a defined zero: a tapped output that is a view (a Linear on sequences)
    // runs the tap inside autograd's CopySlices, which needs every gradient defined.
    return {grads[0], at::zeros({}, at::kFloat), at::Tensor(), at::Tensor()};
  }
};
}  // namespace

OutputGradientSink::~OutputGradientSink() = default;

CaptureSession::CaptureSession() : previous_(active_session) { active_session = this; }
CaptureSession::CaptureSession(std::shared_ptr<OutputGradientSink> sink)
    : previous_(active_session), sink_(std::move(sink)) {
  if (sink_) probe_ = at::zeros({}, at::kFloat).set_requires_grad(true);
  active_session = this;
}
CaptureSession::~CaptureSession() { active_session = previous_; }
CaptureSession* CaptureSession::current() { return active_session; }

void CaptureSession::record(PerExampleLayer* layer, at::Tensor saved, at::Tensor output) {
  if (sink_) {
    const auto call = static_cast<std::int64_t>(calls_.size());
    (void)Tap::apply(output, probe_, call, c10::make_intrusive<SinkHandle>(sink_));  // rebases output's history
  }
  const std::int64_t version = static_cast<std::int64_t>(output._version());
  calls_.push_back({layer, std::move(saved), std::move(output), version});
}

bool will_record(const PerExampleLayer* layer) {
  return CaptureSession::current() && at::GradMode::is_enabled() && !layer->trainable_parameters().empty();
}

void record_if_capturing(PerExampleLayer* layer, const at::Tensor& saved, const at::Tensor& output) {
  if (will_record(layer)) CaptureSession::current()->record(layer, saved.detach(), output);
}

PerExampleLayer::~PerExampleLayer() = default;

std::vector<NormCandidate> PerExampleLayer::norm_candidates(const CapturedCall&, std::int64_t) const {
  return {{NormStrategy::materialised, 0.0}};
}

std::vector<at::Tensor> PerExampleLayer::per_example_squared_norms(const CapturedCall& call, const at::Tensor& output_grad,
                                                                   std::int64_t group, NormStrategy strategy) const {
  std::vector<at::Tensor> gradients = per_example_by(call, output_grad, group, strategy);
  return squared_norms_of(gradients.empty() ? per_example(call, output_grad, group) : gradients);
}

std::vector<at::Tensor> PerExampleLayer::per_example_by(const CapturedCall& call, const at::Tensor& output_grad,
                                                        std::int64_t group, NormStrategy strategy) const {
  if (strategy != NormStrategy::materialised) return {};
  return per_example(call, output_grad, group);
}

at::Tensor squared_norms_of(const at::Tensor& per_example) {
  return at::linalg_vector_norm(per_example.reshape({per_example.size(0), -1}), 2, {1}).to(at::kDouble).pow(2);
}

std::vector<at::Tensor> squared_norms_of(const std::vector<at::Tensor>& per_example) {
  std::vector<at::Tensor> out;
  for (const auto& g : per_example) out.push_back(squared_norms_of(g));
  return out;
}

}  // namespace privdiff::sdk::engine
