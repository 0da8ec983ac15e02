#include <privdiff/config/key_value_error.hpp>
#include <privdiff/engine/linear_adapter.hpp>
#include <privdiff/engine/per_example_layers.hpp>

#include <regex>
#include <stdexcept>

namespace privdiff::sdk::engine {

LinearAdapter::~LinearAdapter() = default;

bool is_adapter(const torch::nn::Module& module) { return dynamic_cast<const LinearAdapter*>(&module) != nullptr; }

int attach_linear_adapters(torch::nn::Module& root, const std::string& targets, const std::string& key,
                           const LinearAdapterFactory& make) {
  // Both refusals are bad input (KeyValueError): the host names the key's place in the recipe.
  std::regex pattern;
  try {
    pattern = std::regex(targets);
  } catch (const std::regex_error& e) {
    throw KeyValueError(key, "\"" + targets + "\" is not a regular expression (" + e.what() + ")");
  }
  int adapted = 0;
  std::string linear_names;
  int linear_count = 0, listed = 0;
  for (const auto& item : root.named_modules("", false)) {
    auto linear = std::dynamic_pointer_cast<Linear>(item.value());
    if (!linear) continue;
    ++linear_count;
    if (linear_names.size() < 200) {
      linear_names += (linear_names.empty() ? "" : ", ") + item.key();
      ++listed;
    }
    if (!std::regex_search(item.key(), pattern)) continue;
    linear->attach_adapter(make(linear->weight.size(1), linear->weight.size(0)));
    ++adapted;
  }
  if (adapted == 0) {
    const std::string more = listed < linear_count ? ", … (" + std::to_string(linear_count) +
                                                         " in all; privdiff params, without the [adapter], shows "
                                                         "the model's modules)"
                                                   : "";
    throw KeyValueError(key, "\"" + targets + "\" matches no Linear layer's name (the model's Linear layers: " +
                                 (linear_count == 0 ? std::string("none") : linear_names + more) + ")");
  }
  return adapted;
}

}  // namespace privdiff::sdk::engine
