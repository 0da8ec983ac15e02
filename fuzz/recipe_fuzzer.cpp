// Recipes as privdiff reads them: text, then --set overrides, then validation against the host's
// section schemas and component schemas. Any bytes either become a validated recipe or are refused
// with a RecipeError whose diagnostics all say something. The input is split at the first NUL:
// recipe text before it, newline-separated `--set` assignments after.
#include "loader/component_registry.hpp"
#include "recipe/recipe_document.hpp"
#include "recipe/recipe_validator.hpp"

#include <privdiff/config/schema.hpp>
#include <privdiff/engine/dp_sgd_mechanism.hpp>

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

using privdiff::sdk::ComponentKind;
using privdiff::sdk::Key;
using privdiff::sdk::Schema;

// Components with schemas of every key type; dpdm's is the SDK's real DP-SGD schema.
const privdiff::core::ComponentRegistry& registry() {
  static auto* r = [] {
    auto* reg = new privdiff::core::ComponentRegistry();
    auto entry = [](ComponentKind kind, const char* id, Schema schema) {
      return privdiff::sdk::ComponentRegistration{kind, id, "fuzz", std::move(schema), nullptr};
    };
    reg->add_builtin(
        "fuzz", {entry(ComponentKind::mechanism, "dpdm", privdiff::sdk::engine::dp_sgd_schema(true, true)),
                 entry(ComponentKind::mechanism, "nonprivate", privdiff::sdk::engine::dp_sgd_schema(false, false)),
                 entry(ComponentKind::model, "pixel_unet",
                       Schema{}
                           .add(Key::integer("channels").at_least(1).defaults(32))
                           .add(Key::string("preconditioning").one_of({"edm", "vp"}).defaults("edm"))
                           .add(Key::number("dropout").at_least(0).at_most(1).defaults(0.1))
                           .add(Key::boolean("flag").defaults(false))
                           .add(Key::integer_list("channel_mult").defaults(std::vector<std::int64_t>{1, 2, 2}))),
                 entry(ComponentKind::sampler, "edm_heun",
                       Schema{}.add(Key::integer("steps").at_least(1).defaults(18)).add(Key::number("guidance").defaults(0.0))),
                 entry(ComponentKind::dataset, "idx",
                       Schema{}.add(Key::string("path").defaults("")).add(Key::boolean("public").defaults(false))),
                 entry(ComponentKind::accountant, "rdp", Schema{}),
                 entry(ComponentKind::accountant, "prv", Schema{}.add(Key::number("eps_error").greater_than(0).defaults(0.01)))});
    return reg;
  }();
  return *r;
}

}  // namespace

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
    auto problems = document.apply_overrides(overrides);
    for (const auto& d : problems) {
      if (d.message.empty()) std::abort();  // every problem is explained
    }
    (void)privdiff::core::validate_recipe(document, registry(), std::move(problems));
  } catch (const privdiff::core::RecipeError& e) {
    if (e.diagnostics().empty()) std::abort();
    for (const auto& d : e.diagnostics()) {
      if (d.message.empty()) std::abort();
    }
  }
  return 0;
}
