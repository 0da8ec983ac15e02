#include "weights/model_export.hpp"

#include "util/json_file.hpp"

#include <privdiff/build_config.hpp>
#include <privdiff/engine/per_example_layers.hpp>
#include <privdiff/io/atomic_file.hpp>
#include <privdiff/io/safetensors.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

namespace {

// A card is meant for publication: absolute local paths (/home/me/runs/pre) become their last part
// (pre); the metadata keeps the full statement.
std::string without_local_paths(const std::string& text) {
  static const std::regex absolute_path(R"re((^|[\s(="'])(/[^\s()";,']+)+)re");
  std::string out;
  auto begin = text.cbegin();
  for (std::smatch m; std::regex_search(begin, text.cend(), m, absolute_path); begin = m.suffix().first) {
    std::string path = m.str().substr(m[1].length());
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    out += m.prefix().str() + m[1].str() + fs::path(path).filename().string();
  }
  return out + std::string(begin, text.cend());
}

std::string list_or_none(const nlohmann::json& items) {
  if (!items.is_array() || items.empty()) return "none\n";
  std::string out = "\n";
  for (const auto& item : items) {
    out += "- " + without_local_paths(item.is_string() ? item.get<std::string>() : item.dump()) + "\n";
  }
  return out;
}

std::string guarantee_text(const nlohmann::json& p) {
  if (!p["private"].get<bool>()) {
    return "**No differential-privacy guarantee**: this run had no private stage. Do not release it as a private "
           "model of any data it trained on.\n";
  }
  const std::string accountant = p["accountant"].get<std::string>();
  std::string others;
  for (const auto& [name, eps] : p["epsilon"].items()) {
    if (name != accountant) others += (others.empty() ? "" : ", ") + name + ": " + export_number(eps.get<double>());
  }
  std::string text = "(ε, δ) = (" + export_number(p["epsilon"].value(accountant, 0.0)) + ", " +
                     export_number(p.value("delta", 0.0)) + ")-differential privacy at the level of one example, by the " +
                     accountant + " accountant" + (others.empty() ? "" : " (" + others + ")") + ", over " +
                     std::to_string(p.value("ledger_steps", 0)) + " steps of its privacy ledger.\n\n";
  const auto& use = p.value("data_use", nlohmann::json::object());
  text += "Private data: " + list_or_none(use.value("private", nlohmann::json::array()));
  text += "\nPublic data (no guarantee is given for it): " + list_or_none(use.value("public", nlohmann::json::array()));
  text += "\nCaveats: " + list_or_none(p.value("caveats", nlohmann::json::array()));
  text += "\nNot covered: hyperparameters chosen on the private data before this run (their cost is not in this "
          "epsilon), and any overlap between the public data and the private data, which rests on the statement of "
          "whoever trained it.\n";
  return text;
}

// Stands for the weights' file name in a card until write_model_export knows the format.
const std::string weights_file_token = "{weights file}";

std::string card_for(const nlohmann::json& summary, const nlohmann::json& privacy, const std::string& model_type,
                     std::size_t tensors, std::int64_t parameters) {
  const std::string name = summary.value("name", "privdiff run");
  return "# " + name + ": a privdiff model (" + model_type + ")\n\n" +
         "Trained by privdiff " + PRIVDIFF_SDK_VERSION + ". The weights are in `" + weights_file_token + "` (" +
         std::to_string(tensors) + " tensors, " + std::to_string(parameters) +
         " values); the recipe that trained them, with every default written out, is `privdiff-recipe.toml`.\n\n"
         "## Privacy guarantee\n\n" + guarantee_text(privacy) +
         "\nThe same guarantee is in the file's metadata (`privdiff.epsilon`, `privdiff.delta`, `privdiff.accountant`, "
         "and `privdiff.privacy` with the data, caveats and the privacy ledger): keep it with the weights.\n\n"
         "## Loading it in Python\n\n"
         "```python\n"
         "from safetensors import safe_open\n\n"
         "with safe_open(\"" + weights_file_token + "\", framework=\"pt\") as f:\n"
         "    guarantee = (f.metadata()[\"privdiff.epsilon\"], f.metadata()[\"privdiff.delta\"])\n"
         "    state = {name: f.get_tensor(name) for name in f.keys()}\n"
         "```\n\n"
         "The tensor names are those of privdiff's `" + model_type + "` model, whose architecture is the `[model]` "
         "table of `privdiff-recipe.toml`.\n";
}

bool drew_reproducible_noise(const nlohmann::json& privacy) {
  for (const auto& caveat : privacy.value("caveats", nlohmann::json::array())) {
    if (caveat.is_string() && caveat.get<std::string>().find("secure_noise = false") != std::string::npos) return true;
  }
  return false;
}

}  // namespace

std::string export_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

std::string without_seeds(const std::string& recipe_text) {
  static const std::regex seed_line(R"(^\s*seed\s*=.*$)");
  std::istringstream in(recipe_text);
  std::string out, line;
  while (std::getline(in, line)) {
    if (!std::regex_match(line, seed_line)) {
      out += line;
    } else if (is_public_default_seed(line)) {
      // Withholding it would hide nothing: whoever reads the recipe without it assumes the default.
      out += line + "  # not withheld: 0 is privdiff's public default, so noise drawn from it (secure_noise = false) "
                    "is reproducible by anyone";
    } else {
      out += "# seed withheld: this run's noise is a function of it (secure_noise = false)";
    }
    out += "\n";
  }
  return out;
}

bool is_public_default_seed(const std::string& line) {
  static const std::regex zero_seed(R"(^\s*seed\s*=\s*0\s*(#.*)?$)");
  return std::regex_match(line, zero_seed);
}

ModelExport export_run_model(const fs::path& run_dir, sdk::Model& model, const nlohmann::json& privacy) {
  const nlohmann::json summary = read_json_file(run_dir / "summary.json");
  const std::string model_type = summary.value("model", nlohmann::json::object()).value("type", "unknown");
  ModelExport e;
  std::int64_t values = 0;
  for (const auto& p : model.module().named_parameters(true)) {
    e.tensors.emplace_back(p.key(), p.value().detach());
    values += p.value().numel();
  }
  for (const auto& b : model.module().named_buffers(true)) {
    e.tensors.emplace_back(b.key(), b.value().detach());
    values += b.value().numel();
  }
  e.metadata = {{"format", "pt"}, {export_keys::model, model_type}, {export_keys::version, PRIVDIFF_SDK_VERSION}};
  e.model_card = card_for(summary, privacy, model_type, e.tensors.size(), values);
  const std::string recipe = sdk::read_file(run_dir / "recipe.toml");
  const bool reproducible = drew_reproducible_noise(privacy);
  e.recipe = reproducible ? without_seeds(recipe) : recipe;
  if (e.recipe.find("# seed withheld") != std::string::npos) {
    e.model_card += "\nThe run drew reproducible noise (`secure_noise = false`), whose guarantee holds only while its "
                    "seed stays secret: `privdiff-recipe.toml` and the metadata's recipe withhold its seeds.\n";
  }
  if (reproducible && e.recipe.find("# not withheld: 0 is privdiff's public default") != std::string::npos) {
    e.model_card += "\nThe run drew reproducible noise (`secure_noise = false`), and its recipe's seed 0 is privdiff's "
                    "public default, so it is not withheld: noise drawn from it is reproducible by anyone (a stage "
                    "without a seed of its own draws from `[run] seed`), and then the guarantee does not hold (see "
                    "the caveats).\n";
  }
  return e;
}

void write_model_export(const ModelExport& e, const fs::path& dir, const std::string& diffusers_config) {
  fs::create_directories(dir);
  auto metadata = e.metadata;
  metadata[export_keys::recipe] = e.recipe;
  const bool diffusers = !diffusers_config.empty();
  sdk::write_safetensors(dir / (diffusers ? "diffusion_pytorch_model.safetensors" : "model.safetensors"), e.tensors, metadata);
  sdk::write_file_atomically(dir / "privdiff-recipe.toml", e.recipe);
  std::string card = e.model_card;
  for (std::size_t at; (at = card.find(weights_file_token)) != std::string::npos;) {
    card.replace(at, weights_file_token.size(), diffusers ? "diffusion_pytorch_model.safetensors" : "model.safetensors");
  }
  if (diffusers) {
    sdk::write_file_atomically(dir / "config.json", diffusers_config);
    const nlohmann::json config = nlohmann::json::parse(diffusers_config, nullptr, false);
    const std::string cls = config.is_object() ? config.value("_class_name", "UNet2DModel") : "UNet2DModel";
    card += "\n## Loading it with diffusers\n\nThis folder is a diffusers model folder (`config.json` and "
            "`diffusion_pytorch_model.safetensors`; the weights have diffusers' own names, adapters folded in):\n\n"
            "```python\nfrom diffusers import " + cls + "\n\nunet = " + cls + ".from_pretrained(\"path/to/this/folder\")\n```\n";
  }
  sdk::write_file_atomically(dir / "README.md", card);
}

int fold_adapters(ModelExport& e, torch::nn::Module& module) {
  std::map<std::string, at::Tensor> folded;
  std::vector<std::string> adapter_prefixes;
  for (const auto& m : module.named_modules("", false)) {
    const auto* linear = dynamic_cast<const sdk::engine::Linear*>(m.value().get());
    if (linear == nullptr || linear->adapter() == nullptr) continue;
    at::NoGradGuard no_grad;
    const auto [weight, bias] = linear->adapter()->merged(linear->weight, linear->bias);
    folded[m.key() + ".weight"] = weight.detach();
    if (bias.defined()) folded[m.key() + ".bias"] = bias.detach();
    adapter_prefixes.push_back(m.key() + ".adapter.");
  }
  std::vector<std::pair<std::string, at::Tensor>> kept;
  for (auto& [name, tensor] : e.tensors) {
    const bool adapter = std::any_of(adapter_prefixes.begin(), adapter_prefixes.end(),
                                     [&](const std::string& p) { return name.rfind(p, 0) == 0; });
    if (adapter) continue;
    const auto it = folded.find(name);
    kept.emplace_back(name, it == folded.end() ? tensor : it->second);
  }
  e.tensors = std::move(kept);
  return static_cast<int>(adapter_prefixes.size());
}

}  // namespace privdiff::core
