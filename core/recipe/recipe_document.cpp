#include "recipe/recipe_document.hpp"

#include "recipe/recipe_text_guard.hpp"

#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>

namespace privdiff::core {

namespace fs = std::filesystem;

std::string child_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}
std::string child_path(const std::string& parent, std::size_t index) {
  return parent + "[" + std::to_string(index) + "]";
}

RecipeDocument RecipeDocument::parse(const std::string& text, const std::string& display_name) {
  RecipeDocument doc;
  doc.file_ = display_name;
  if (auto unsafe = unsafe_toml_text(text, display_name)) throw RecipeError({*unsafe});
  try {
    doc.root_ = toml::parse(text, display_name);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    throw RecipeError({diagnostic_at_position(display_name, begin.line, begin.column, "",
                                              "malformed TOML: " + std::string(e.description()))});
  }
  return doc;
}

RecipeDocument RecipeDocument::load(const fs::path& file) {
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);
  // Before opening: a FIFO would block the open, a device (/dev/zero) would never end.
  if (fs::exists(status) && !fs::is_regular_file(status)) {
    throw RecipeError({Diagnostic{file.string(), "", fs::is_directory(status)
                                                        ? "cannot read recipe file: it is a directory"
                                                        : "cannot read recipe file: it is not a regular file (a pipe "
                                                          "or a device; a recipe is a .toml file)"}});
  }
  constexpr std::uintmax_t max_recipe_bytes = 1u << 20;
  if (const std::uintmax_t bytes = fs::is_regular_file(status) ? fs::file_size(file, ec) : 0;
      !ec && bytes > max_recipe_bytes) {
    throw RecipeError({Diagnostic{file.string(), "", "is " + std::to_string(bytes) + " bytes: a recipe is at most "
                                                         "1 MiB of TOML"}});
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw RecipeError({Diagnostic{file.string(), "", "cannot read recipe file (does it exist?)"}});
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), file.string());
}

fs::path RecipeDocument::base_directory() const {
  std::error_code ec;
  fs::path dir = fs::path(file_).parent_path();
  return fs::absolute(dir.empty() ? fs::path(".") : dir, ec);
}

namespace {

struct Segment {
  std::string key;  // empty when this is an index
  std::size_t index = 0;
  bool is_index() const { return key.empty(); }
};

// "stage.0.epochs" or "stage[0].epochs" -> {stage, #0, epochs}. Returns false on bad syntax.
bool split_key_path(const std::string& path, std::vector<Segment>& out) {
  std::string normalised;
  for (char c : path) {
    if (c == '[') normalised += '.';
    else if (c != ']') normalised += c;
  }
  std::istringstream in(normalised);
  std::string part;
  while (std::getline(in, part, '.')) {
    if (part.empty()) return false;
    const bool numeric = part.find_first_not_of("0123456789") == std::string::npos;
    if (numeric) {
      if (out.empty()) return false;  // a path cannot start with an index
      // More digits than any index (found by fuzz/recipe_fuzzer: stoull threw out_of_range): the
      // largest index, which the caller reports as out of range.
      const std::size_t index = part.size() > 18 ? std::numeric_limits<std::size_t>::max()
                                                  : static_cast<std::size_t>(std::stoull(part));
      out.push_back(Segment{"", index});
    } else {
      for (char c : part) {
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
      }
      out.push_back(Segment{part, 0});
    }
  }
  return !out.empty() && !normalised.empty() && normalised.back() != '.';
}

toml::table parse_value_table(const std::string& raw) {
  const auto as_string = [&] {
    toml::table t;
    t.insert("value", raw);
    return t;
  };
  // Text toml++ 3.3 must not see (recipe_text_guard.hpp) is not a TOML value either: a string.
  if (unsafe_toml_text("value = " + raw, "--set")) return as_string();
  try {
    return toml::parse("value = " + raw);
  } catch (const toml::parse_error&) {
    return as_string();
  }
}

std::string out_of_range(std::size_t size, std::size_t index) {
  return "has " + std::to_string(size) + (size == 1 ? " entry" : " entries") + "; index " + std::to_string(index) +
         " is out of range";
}

const char* describe(const toml::node& n) {
  if (n.is_table()) return "a table";
  if (n.is_array()) return "a list";
  return "a value";
}

}  // namespace

std::vector<Diagnostic> RecipeDocument::apply_overrides(const std::vector<std::string>& assignments) {
  std::vector<Diagnostic> errors;
  for (const std::string& assignment : assignments) {
    const std::string location = "--set '" + assignment + "'";
    auto fail = [&](const std::string& path, const std::string& message) {
      errors.push_back(Diagnostic{location, path, message});
    };
    const auto eq = assignment.find('=');
    std::vector<Segment> segments;
    if (eq == std::string::npos || eq == 0 || !split_key_path(assignment.substr(0, eq), segments)) {
      fail("", "expected KEY=VALUE with a dotted key path, e.g. stage.0.epochs=3");
      continue;
    }
    const std::string raw = assignment.substr(eq + 1);
    toml::table parsed = parse_value_table(raw);

    // Walk to the parent of the last segment, creating tables on the way.
    toml::node* current = &root_;
    std::string path;
    bool ok = true;
    for (std::size_t i = 0; i + 1 < segments.size() && ok; ++i) {
      const Segment& seg = segments[i];
      const Segment& next = segments[i + 1];
      if (seg.is_index()) {
        auto* array = current->as_array();
        if (!array) {
          fail(path, "is " + std::string(describe(*current)) + ", not a list; cannot index it");
          ok = false;
        } else if (seg.index >= array->size()) {
          fail(path, out_of_range(array->size(), seg.index));
          ok = false;
        } else {
          current = array->get(seg.index);
          path = child_path(path, seg.index);
        }
        continue;
      }
      auto* table = current->as_table();
      if (!table) {
        fail(path, "is " + std::string(describe(*current)) + ", not a table; cannot set '" + seg.key + "' in it");
        ok = false;
        continue;
      }
      const std::string here = child_path(path, seg.key);
      toml::node* child = table->get(seg.key);
      if (!child) {
        if (next.is_index()) {
          fail(here, "does not exist; cannot index entry " + std::to_string(next.index) + " of it");
          ok = false;
          continue;
        }
        table->insert(seg.key, toml::table{});
        child = table->get(seg.key);
        overrides_[here] = Override{assignment, ""};
      }
      current = child;
      path = here;
    }
    if (!ok) continue;

    const Segment& last = segments.back();
    toml::node& value = *parsed.get("value");
    if (last.is_index()) {
      auto* array = current->as_array();
      if (!array) {
        fail(path, "is " + std::string(describe(*current)) + ", not a list; cannot index it");
        continue;
      }
      if (last.index >= array->size()) {
        fail(path, out_of_range(array->size(), last.index));
        continue;
      }
      array->replace(array->begin() + static_cast<std::ptrdiff_t>(last.index), std::move(value));
      path = child_path(path, last.index);
    } else {
      auto* table = current->as_table();
      if (!table) {
        fail(path, "is " + std::string(describe(*current)) + ", not a table; cannot set '" + last.key + "' in it");
        continue;
      }
      table->insert_or_assign(last.key, std::move(value));
      path = child_path(path, last.key);
    }
    overrides_[path] = Override{assignment, raw};
  }
  return errors;
}

Diagnostic RecipeDocument::diagnostic_at(const toml::node& node, const std::string& key_path,
                                         std::string message) const {
  return diagnostic_at(node.source(), key_path, std::move(message));
}

Diagnostic RecipeDocument::diagnostic_at(const toml::source_region& source, const std::string& key_path,
                                         std::string message) const {
  // The value itself, or a table above it, may have come from the command line.
  for (auto it = overrides_.rbegin(); it != overrides_.rend(); ++it) {
    const std::string& p = it->first;
    const bool is_prefix = key_path.compare(0, p.size(), p) == 0 &&
                           (key_path.size() == p.size() || key_path[p.size()] == '.' || key_path[p.size()] == '[');
    if (is_prefix) return Diagnostic{"--set '" + it->second.assignment + "'", key_path, std::move(message)};
  }
  const auto& begin = source.begin;
  if (!begin) return Diagnostic{file_, key_path, std::move(message)};
  return diagnostic_at_position(file_, begin.line, begin.column, key_path, std::move(message));
}

std::optional<std::string> RecipeDocument::override_text(const std::string& key_path) const {
  auto it = overrides_.find(key_path);
  if (it == overrides_.end() || it->second.raw_value.empty()) return std::nullopt;
  return it->second.raw_value;
}

}  // namespace privdiff::core
