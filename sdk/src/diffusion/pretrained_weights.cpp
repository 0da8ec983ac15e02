#include <privdiff/diffusion/pretrained_weights.hpp>

#include <privdiff/diffusion/ncsnpp.hpp>
#include <privdiff/engine/linear_adapter.hpp>
#include <privdiff/io/safetensors.hpp>
#include <privdiff/io/shape_text.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace privdiff::sdk {

namespace fs = std::filesystem;

namespace {


// The dotted prefixes of the module's adapters ("down0_attn.qkv.adapter."): a model fine-tuned with
// an adapter may start from weights trained without one.
std::vector<std::string> adapter_prefixes(torch::nn::Module& module) {
  std::vector<std::string> out;
  for (const auto& m : module.named_modules("", false)) {
    if (engine::is_adapter(*m.value())) out.push_back(m.key() + ".");
  }
  return out;
}

// Whether two shapes differ at most in trailing unit dimensions: a 1x1 Conv1d weight [C', C, 1] (CompVis's
// legacy attention) holds exactly a Linear weight [C', C].
bool same_up_to_trailing_ones(std::vector<std::int64_t> a, c10::IntArrayRef b_sizes) {
  std::vector<std::int64_t> b(b_sizes.begin(), b_sizes.end());
  while (!a.empty() && a.back() == 1) a.pop_back();
  while (!b.empty() && b.back() == 1) b.pop_back();
  return a == b;
}

// A CompVis LatentDiffusion checkpoint (converted with its "ldm.config") also holds its noise schedule
// as buffers (betas, alphas_cumprod, ...) and possibly an EMA copy (model_ema.*): not network weights.
bool ldm_bookkeeping(const SafetensorsFile& weights, const std::string& name) {
  if (!weights.metadata().count("ldm.config")) return false;
  for (const char* network : {"model.", "first_stage_model.", "cond_stage_model."}) {
    if (name.rfind(network, 0) == 0) return false;
  }
  return name != "scale_factor";
}

// transformers' text encoders saved before transformers 4.31 (Stable Diffusion 1.x's text_encoder/)
// keep their position ids, 0 … P-1, as a tensor: bookkeeping, skipped once it is that range.
bool position_ids_bookkeeping(const SafetensorsFile& weights, const SafetensorsEntry& entry) {
  const std::string suffix = "embeddings.position_ids";
  if (entry.name.size() < suffix.size() || entry.name.compare(entry.name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  const at::Tensor ids = weights.tensor(entry.name).flatten().to(at::kLong);
  return ids.equal(at::arange(ids.numel(), ids.options()));
}

// transformers 5 saves a model whose weights all live under one child without that child's name
// (CLIPTextModel's text_model.): the child such a file is for, or null.
torch::nn::Module* unprefixed_child(const SafetensorsFile& weights, torch::nn::Module& module) {
  const auto children = module.named_children();
  if (children.size() != 1 || !module.named_parameters(false).is_empty() || !module.named_buffers(false).is_empty()) return nullptr;
  const std::string prefix = children.begin()->key() + ".";
  for (const auto& e : weights.entries()) {
    if (e.name.rfind(prefix, 0) == 0) return nullptr;
  }
  return children.begin()->value().get();
}

}  // namespace

// A float parameter takes float weights only, and only finite ones: an integer tensor (a wrong file
// or a broken export) or NaN / infinity would train or sample garbage without a word.
static void check_values(const std::string& name, const std::string& where, const at::Tensor& source, const at::Tensor& target) {
  if (!at::isFloatingType(target.scalar_type())) return;
  if (!at::isFloatingType(source.scalar_type())) {
    throw std::runtime_error("'" + name + "' is " + std::string(c10::toString(source.scalar_type())) + " in " + where +
                             " but a floating-point tensor in this recipe's [model]: integer weights are not this "
                             "model's (a wrong file, or a broken export)");
  }
  const std::int64_t bad = source.numel() - at::isfinite(source).sum().item<std::int64_t>();
  if (bad > 0) {
    throw std::runtime_error("'" + name + "' in " + where + " holds " + std::to_string(bad) + " NaN or infinite values (of " +
                             std::to_string(source.numel()) + "): the weights are broken (a diverged run, or a broken "
                             "export); privdiff does not train or sample from them");
  }
}

void load_pretrained_weights(const fs::path& file, torch::nn::Module& module) {
  const SafetensorsFile weights(file);
  if (torch::nn::Module* child = unprefixed_child(weights, module)) return load_pretrained_weights(file, *child);
  const std::string where = file.string();
  const auto adapters = adapter_prefixes(module);
  auto in_adapter = [&](const std::string& name) {
    for (const auto& prefix : adapters) {
      if (name.rfind(prefix, 0) == 0) return true;
    }
    return false;
  };
  std::map<std::string, at::Tensor> targets;
  for (auto& p : module.named_parameters(true)) targets.emplace(p.key(), p.value());
  for (auto& b : module.named_buffers(true)) targets.emplace(b.key(), b.value());
  // Everything is checked before anything is copied: a mismatch leaves the model as it was.
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;
  std::set<std::string> used;
  for (const auto& [name, target] : targets) {
    const SafetensorsEntry* entry = weights.find(name);
    // DPDM's checkpoints keep score_sde's NIN layers as W [in, out] and b (diffusion/ncsnpp.hpp).
    const diffusion::PortSource alias = diffusion::ncsnpp_port_source(name);
    const bool transposed = !entry && alias.transposed;
    if (!entry && alias.name != name) entry = weights.find(alias.name);
    if (!entry) {
      if (in_adapter(name)) continue;
      throw std::runtime_error(where + " has no '" + name + "': the weights are not of this recipe's [model] (or of "
                               "its configuration)");
    }
    std::vector<std::int64_t> shape = entry->shape;
    if (transposed) std::reverse(shape.begin(), shape.end());
    if (!at::IntArrayRef(shape).equals(target.sizes()) && !same_up_to_trailing_ones(shape, target.sizes())) {
      throw std::runtime_error("'" + name + "' is " + shape_text(entry->shape) + " in " + where + " but " +
                               shape_text(target.sizes()) + " in this recipe's [model] (the first mismatch; the "
                               "model's configuration must match the weights')");
    }
    used.insert(entry->name);
    const at::Tensor source = weights.tensor(entry->name);
    check_values(name, where, source, target);
    copies.emplace_back(target, (transposed ? source.t() : source).reshape(target.sizes()));
  }
  for (const auto& entry : weights.entries()) {
    if (!used.count(entry.name) && !ldm_bookkeeping(weights, entry.name) && !position_ids_bookkeeping(weights, entry)) {
      throw std::runtime_error(where + " has '" + entry.name + "', which this recipe's [model] lacks (the weights "
                               "are of another model or configuration)");
    }
  }
  at::NoGradGuard no_grad;
  for (auto& [target, source] : copies) target.copy_(source);
}

}  // namespace privdiff::sdk
