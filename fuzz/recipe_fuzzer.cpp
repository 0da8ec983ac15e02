// Recipe text and --set overrides: any bytes either parse (the overrides then apply or come back as
// diagnostics) or are refused with a RecipeError carrying file:line:col diagnostics. The input is
// split at the first NUL: recipe text before it, newline-separated `--set` assignments after.
#include "recipe/recipe_document.hpp"

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const auto nul = input.find('\0');
  const std::string text = input.substr(0, nul);
  std::vector<std::string> overrides;
  if (nul != std::string::npos) {
    std::istringstream rest(input.substr(nul + 1));
    for (std::string line; std::getline(rest, line);) overrides.push_back(line);
  }
  try {
    auto document = privdiff::core::RecipeDocument::parse(text, "fuzz.toml");
    for (const auto& d : document.apply_overrides(overrides)) {
      if (d.message.empty()) std::abort();  // every problem is explained
    }
  } catch (const privdiff::core::RecipeError& e) {
    if (e.diagnostics().empty()) std::abort();
  }
  return 0;
}
