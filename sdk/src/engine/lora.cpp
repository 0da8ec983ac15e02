#include <privdiff/engine/lora.hpp>
#include <privdiff/engine/per_example_layers.hpp>

#include <regex>
#include <stdexcept>

namespace privdiff::sdk::engine {

Schema& add_lora_keys(Schema& s) {
  s.add(Key::integer("lora_rank").at_least(0).defaults(0).doc("LoRA adapter rank r on the targeted Linear layers; 0 = none"))
      .add(Key::number("lora_alpha").at_least(0).defaults(0.0).doc("LoRA scale alpha / r; 0 = alpha equal to the rank"))
      .add(Key::number("lora_dropout").at_least(0).less_than(1).defaults(0.0).doc("dropout on the LoRA adapters' input"))
      .add(Key::string("lora_targets").defaults(LoraOptions{}.targets)
               .doc("regex of the Linear layers that get adapters (default: attention q/k/v/out projections)"));
  return s;
}

LoraOptions lora_options(const Config& c) {
  LoraOptions o;
  o.rank = c.get_int("lora_rank");
  o.alpha = c.get_double("lora_alpha");
  o.dropout = c.get_double("lora_dropout");
  o.targets = c.get_string("lora_targets");
  try {
    std::regex check(o.targets);
  } catch (const std::regex_error& e) {
    throw std::invalid_argument(c.path() + ".lora_targets: not a regular expression: " + e.what());
  }
  return o;
}

int apply_lora(torch::nn::Module& root, const LoraOptions& options) {
  if (options.rank <= 0) return 0;
  const std::regex targets(options.targets);
  int adapted = 0;
  std::string linear_names;
  for (const auto& item : root.named_modules("", false)) {
    auto linear = std::dynamic_pointer_cast<Linear>(item.value());
    if (!linear) continue;
    if (linear_names.size() < 200) linear_names += (linear_names.empty() ? "" : ", ") + item.key();
    if (!std::regex_search(item.key(), targets)) continue;
    linear->add_adapter(options);
    ++adapted;
  }
  if (adapted == 0) {
    throw std::invalid_argument("lora_targets \"" + options.targets + "\" matches no Linear layer (there are: " +
                                linear_names + ")");
  }
  return adapted;
}

}  // namespace privdiff::sdk::engine
