#pragma once
// Checks recipe text before toml++ parses it. Debian's toml++ 3.3 reaches __builtin_unreachable
// (undefined behaviour) when its parser asks whether certain non-ASCII characters are whitespace
// (marzer/tomlplusplus#190 and #295; fixed upstream in 2026, after 3.3): found by fuzz/recipe_fuzzer.
// TOML allows non-ASCII text only inside strings and comments, so this refuses, with file:line:col,
// malformed UTF-8 anywhere and non-ASCII characters anywhere else — exactly the inputs that reach the
// bug — before the parser sees them.

#include "recipe/diagnostic.hpp"

#include <optional>
#include <string>

namespace privdiff::core {

/// The first problem in `text` as a diagnostic located in `display_name`, or nothing.
std::optional<Diagnostic> unsafe_toml_text(const std::string& text, const std::string& display_name);

}  // namespace privdiff::core
