#include <privdiff/engine/linear_adapter.hpp>
#include <privdiff/engine/per_example_layers.hpp>

#include <regex>
#include <stdexcept>

namespace privdiff::sdk::engine {

LinearAdapter::~LinearAdapter() = default;

bool is_adapter(const torch::nn::Module& module) { return dynamic_cast<const LinearAdapter*>(&module) != nullptr; }

int attach_linear_adapters(torch::nn::Module& root, const std::string& targets, const std::string& key,
                           const LinearAdapterFactory& make) {
  std::regex pattern;
  try {
    pattern = std::regex(targets);
  } catch (const std::regex_error& e) {
    throw std::invalid_argument(key + ": not a regular expression: " + e.what());
  }
  int adapted = 0;
  std::string linear_names;
  for (const auto& item : root.named_modules("", false)) {
    auto linear = std::dynamic_pointer_cast<Linear>(item.value());
    if (!linear) continue;
    if (linear_names.size() < 200) linear_names += (linear_names.empty() ? "" : ", ") + item.key();
    if (!std::regex_search(item.key(), pattern)) continue;
    linear->attach_adapter(make(linear->weight.size(1), linear->weight.size(0)));
    ++adapted;
  }
  if (adapted == 0) {
    throw std::invalid_argument(key + " \"" + targets + "\" matches no Linear layer (there are: " + linear_names + ")");
  }
  return adapted;
}

}  // namespace privdiff::sdk::engine
