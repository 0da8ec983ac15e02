#pragma once
// "did you mean ...?" for misspelt keys and component ids.

#include <string>
#include <vector>

namespace privdiff::core {

/// Levenshtein distance (insertions, deletions, substitutions and adjacent transpositions).
std::size_t edit_distance(const std::string& a, const std::string& b);
/// The closest candidate if it is close enough to be a plausible typo, else empty.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);
/// " (did you mean 'x'?)" or "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);
/// "a, b, c" (or "none").
std::string join(const std::vector<std::string>& items, const std::string& separator = ", ");

}  // namespace privdiff::core
