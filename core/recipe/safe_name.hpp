#pragma once
// A recipe value that becomes a file or directory name (a stage's released-NAME, runs/NAME, a dataset
// a stage's release is named after) must stay one name: a recipe is a shared text file, and a name such
// as "../../other-run/released-central" would write outside the run directory, or over another run's
// release that its resume then reuses as its own.

#include <string>

namespace privdiff::core {

/// The names allowed: 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit, with
/// no "..".
inline constexpr const char* safe_name_rule =
    "a name of 1 to 64 ASCII letters, digits, '_', '.' or '-' that starts with a letter or digit and holds "
    "no '..' (it names files and directories)";

/// Whether `name` follows safe_name_rule.
bool is_safe_name(const std::string& name);

}  // namespace privdiff::core
