#include <privdiff/engine/linear_adapter.hpp>
#include <privdiff/engine/parameter_selection.hpp>

#include <privdiff/config/key_value_error.hpp>

#include <algorithm>
#include <regex>
#include <set>
#include <stdexcept>

namespace privdiff::sdk::engine {

std::vector<ParameterInfo> parameters_with_roles(Model& model) {
  std::set<const void*> adapters;
  for (const auto& m : model.module().modules(/*include_self=*/false)) {
    if (!is_adapter(*m)) continue;
    for (const auto& p : m->parameters()) adapters.insert(p.unsafeGetTensorImpl());
  }
  auto parameters = model.parameters_with_roles();
  for (auto& info : parameters) {
    if (adapters.count(info.parameter.unsafeGetTensorImpl())) info.role = "adapter";
  }
  return parameters;
}

std::vector<std::string> preset_roles(const std::string& preset) {
  // "all" is the whole diffusion network: a latent model's autoencoder trains only when asked for.
  if (preset == "all") {
    return {"attention", "cross_attention", "conditioning", "resblock", "embedding", "norm", "io", "adapter"};
  }
  if (preset == "attention") return {"attention", "cross_attention", "conditioning"};
  if (preset == "resblocks") return {"resblock"};
  if (preset == "adapter" || preset == "lora") return {"adapter"};  // "lora": its name before adapters were plugins
  if (preset == "autoencoder") return {"autoencoder"};
  throw std::invalid_argument("train: unknown preset '" + preset + "' (all, attention, resblocks, adapter, autoencoder)");
}

namespace {
const std::vector<std::string>& known_roles() {
  static const std::vector<std::string> roles{"attention", "cross_attention", "conditioning", "resblock", "embedding",
                                              "norm",      "io",              "adapter",      "autoencoder"};
  return roles;
}
}  // namespace

Schema& add_parameter_selection_keys(Schema& s) {
  s.add(Key::string("train").one_of({"all", "attention", "resblocks", "adapter", "lora", "autoencoder"}).defaults("all")
            .doc("which parameters train: all (the diffusion network); attention (DP-LDM: attention blocks + class "
                 "embedding); resblocks; adapter (only the recipe's [adapter], e.g. LoRA; \"lora\" says the same); "
                 "autoencoder (a latent model's autoencoder, by its own objective); the rest stay frozen"))
      .add(Key::string_list("train_roles").optional()
               .doc("roles to train instead of the preset's: attention, cross_attention, conditioning, resblock, "
                    "embedding, norm, io, adapter, autoencoder (see privdiff params)"))
      .add(Key::integer_list("train_blocks").optional()
               .doc("[first, last] block indices to train (last = -1: to the end); parameters outside numbered "
                    "blocks are selected by role alone"))
      .add(Key::integer("train_attention_from").at_least(1).optional()
               .doc("DP-LDM's ablation_blocks: attention blocks are numbered 1, 2, ... in the network's forward "
                    "order (privdiff params lists them); train only those numbered N or higher (other selected "
                    "roles are unaffected)"))
      .add(Key::string("train_pattern").optional().doc("regex a trained parameter's name must contain"));
  return s;
}

ParameterSelection parameter_selection(const Config& c) {
  ParameterSelection selection;
  if (c.has("train")) selection.preset = c.get_string("train");
  if (c.has("train_roles")) {
    selection.roles = c.get_string_list("train_roles");
    std::replace(selection.roles.begin(), selection.roles.end(), std::string("lora"), std::string("adapter"));
    const auto& known = known_roles();
    for (const auto& role : selection.roles) {
      if (std::find(known.begin(), known.end(), role) == known.end()) {
        throw KeyValueError(c.path() + ".train_roles", "unknown role '" + role +
                                    "' (attention, cross_attention, conditioning, resblock, embedding, norm, io, adapter, "
                                    "autoencoder)");
      }
    }
  }
  if (c.has("train_blocks")) {
    const auto b = c.get_int_list("train_blocks");
    if (b.size() != 2 || b[0] < 0 || (b[1] != -1 && b[1] < b[0])) {
      throw KeyValueError(c.path() + ".train_blocks", "expected [first, last] with 0 <= first <= last, or "
                                  "last = -1 for \"to the end\"");
    }
    selection.blocks = std::make_pair(static_cast<int>(b[0]), static_cast<int>(b[1]));
  }
  if (c.has("train_attention_from")) selection.attention_from = static_cast<int>(c.get_int("train_attention_from"));
  if (c.has("train_pattern")) {
    selection.pattern = c.get_string("train_pattern");
    try {
      std::regex check(selection.pattern);
    } catch (const std::regex_error& e) {
      throw KeyValueError(c.path() + ".train_pattern", std::string("not a regular expression: ") + e.what());
    }
  }
  return selection;
}

std::vector<int> attention_numbers(const std::vector<ParameterInfo>& parameters) {
  std::vector<int> blocks;  // the block indices of attention blocks, in forward order
  for (const auto& p : parameters) {
    if ((p.role == "attention" || p.role == "cross_attention") && p.block_index >= 0) blocks.push_back(p.block_index);
  }
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  std::vector<int> out;
  for (const auto& p : parameters) {
    const auto it = std::find(blocks.begin(), blocks.end(), p.block_index);
    const bool attention = p.role == "attention" || p.role == "cross_attention";
    out.push_back(attention && it != blocks.end() ? static_cast<int>(it - blocks.begin()) + 1 : 0);
  }
  return out;
}

std::vector<bool> selected_parameters(const std::vector<ParameterInfo>& parameters, const ParameterSelection& s) {
  const std::vector<std::string> roles = s.roles.empty() ? preset_roles(s.preset) : s.roles;
  const std::regex pattern(s.pattern.empty() ? std::string(".") : s.pattern);
  const std::vector<int> numbers = attention_numbers(parameters);
  std::vector<bool> out;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const ParameterInfo& p = parameters[i];
    bool keep = std::find(roles.begin(), roles.end(), p.role) != roles.end();
    if (keep && s.blocks && p.block_index >= 0) {
      keep = p.block_index >= s.blocks->first && (s.blocks->second < 0 || p.block_index <= s.blocks->second);
    }
    if (keep && s.attention_from && numbers[i] > 0) keep = numbers[i] >= *s.attention_from;
    if (keep && !s.pattern.empty()) keep = std::regex_search(p.name, pattern);
    out.push_back(keep);
  }
  return out;
}

std::int64_t apply_parameter_selection(Model& model, const ParameterSelection& selection) {
  std::int64_t trainable = 0;
  const auto parameters = parameters_with_roles(model);
  // "all" on a model with an autoencoder and a diffusion network means the network; on a model that
  // is nothing but an autoencoder, the autoencoder.
  const auto is_autoencoder = [](const ParameterInfo& p) { return p.role == "autoencoder"; };
  const bool mixed = std::any_of(parameters.begin(), parameters.end(), is_autoencoder) &&
                     !std::all_of(parameters.begin(), parameters.end(), is_autoencoder);
  const bool everything = selection.preset == "all" && selection.roles.empty() && !selection.blocks &&
                          !selection.attention_from && selection.pattern.empty() && !mixed;
  for (auto& p : model.module().parameters()) {  // everything, or nothing but what is selected below
    p.set_requires_grad(everything);
    if (everything) trainable += p.numel();
  }
  if (everything) return trainable;
  const auto keep = selected_parameters(parameters, selection);
  bool autoencoder = false, network = false;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (!keep[i]) continue;
    at::Tensor p = parameters[i].parameter;
    p.set_requires_grad(true);
    trainable += p.numel();
    (parameters[i].role == "autoencoder" ? autoencoder : network) = true;
  }
  if (autoencoder && network) {  // two objectives in one stage: which loss would the model use?
    throw std::invalid_argument("the parameter selection trains the autoencoder and the diffusion network together; "
                                "they train by different objectives, in separate stages (train = \"autoencoder\", "
                                "then train = \"all\" or another selection of the network)");
  }
  if (trainable == 0) {
    throw std::invalid_argument("the parameter selection (train = \"" + selection.preset + "\"" +
                                (selection.roles.empty() ? "" : ", train_roles") +
                                (selection.blocks ? ", train_blocks" : "") +
                                (selection.attention_from ? ", train_attention_from" : "") +
                                (selection.pattern.empty() ? "" : ", train_pattern") +
                                ") matches no parameter of the model; see privdiff params RECIPE");
  }
  return trainable;
}

}  // namespace privdiff::sdk::engine
