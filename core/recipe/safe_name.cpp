#include "recipe/safe_name.hpp"

namespace privdiff::core {

bool is_safe_name(const std::string& name) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  if (name.empty() || name.size() > 64 || !alnum(name.front())) return false;
  for (char c : name) {
    if (!alnum(c) && c != '_' && c != '.' && c != '-') return false;
  }
  return name.find("..") == std::string::npos;
}

}  // namespace privdiff::core
