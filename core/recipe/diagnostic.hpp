#pragma once
// One recipe error, and the exception that carries all of them.

#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace privdiff::core {

/// `location: key_path: message`, e.g.
/// `recipe.toml:17:20: stage[1].noise_multiplicity: expected integer >= 1, got "32"`.
struct Diagnostic {
  std::string location;  ///< "file:line:col" or "--set 'stage.0.epochs=x'"
  std::string key_path;  ///< "stage[1].noise_multiplicity"; empty for file-level errors
  std::string message;
  // For ordering: errors are listed in file order, command-line overrides last.
  std::size_t line = std::numeric_limits<std::size_t>::max();
  std::size_t column = 0;

  std::string to_string() const;
};

/// A diagnostic at `file:line:column` (1-based), the form every position in a recipe is reported in.
Diagnostic diagnostic_at_position(const std::string& file, std::size_t line, std::size_t column,
                                  std::string key_path, std::string message);

/// Sorts diagnostics by position (stable: equal positions keep the order they were found in).
void sort_by_position(std::vector<Diagnostic>& diagnostics);

/// A recipe that cannot be used; what() is every diagnostic, one per line.
class RecipeError : public std::runtime_error {
 public:
  explicit RecipeError(std::vector<Diagnostic> diagnostics);
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::vector<Diagnostic> diagnostics_;
};

}  // namespace privdiff::core
