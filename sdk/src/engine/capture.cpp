#include <privdiff/engine/capture.hpp>

namespace privdiff::sdk::engine {

namespace {
thread_local CaptureSession* active_session = nullptr;
}

CaptureSession::CaptureSession() : previous_(active_session) { active_session = this; }
CaptureSession::~CaptureSession() { active_session = previous_; }
CaptureSession* CaptureSession::current() { return active_session; }

void CaptureSession::record(PerExampleLayer* layer, at::Tensor saved, at::Tensor output) {
  const std::int64_t version = static_cast<std::int64_t>(output._version());
  calls_.push_back({layer, std::move(saved), std::move(output), version});
}

PerExampleLayer::~PerExampleLayer() = default;

}  // namespace privdiff::sdk::engine
