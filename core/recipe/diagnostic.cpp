#include "recipe/diagnostic.hpp"

#include <algorithm>

namespace privdiff::core {

std::string Diagnostic::to_string() const {
  return location + ": " + (key_path.empty() ? "" : key_path + ": ") + message;
}

Diagnostic diagnostic_at_position(const std::string& file, std::size_t line, std::size_t column,
                                  std::string key_path, std::string message) {
  return Diagnostic{file + ":" + std::to_string(line) + ":" + std::to_string(column), std::move(key_path),
                    std::move(message), line, column};
}

void sort_by_position(std::vector<Diagnostic>& diagnostics) {
  std::stable_sort(diagnostics.begin(), diagnostics.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return a.line != b.line ? a.line < b.line : a.column < b.column;
  });
}

namespace {
std::string join_lines(const std::vector<Diagnostic>& diagnostics) {
  std::string out;
  for (const auto& d : diagnostics) out += (out.empty() ? "" : "\n") + d.to_string();
  return out;
}
}  // namespace

RecipeError::RecipeError(std::vector<Diagnostic> diagnostics)
    : std::runtime_error(join_lines(diagnostics)), diagnostics_(std::move(diagnostics)) {}

}  // namespace privdiff::core
