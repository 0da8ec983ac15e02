#include "recipe/recipe_validator.hpp"

#include "recipe/core_schemas.hpp"
#include "recipe/safe_name.hpp"
#include "recipe/suggest.hpp"

#include <privdiff/config/value.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace privdiff::core {

namespace fs = std::filesystem;
using sdk::ComponentKind;
using sdk::ConfigValue;
using sdk::Key;
using sdk::Schema;
using sdk::ValueType;

namespace {

// How a TOML value is shown after "got".
std::string render(const toml::node& node) {
  if (auto* s = node.as_string()) return sdk::to_toml(ConfigValue{s->get()});
  if (auto* i = node.as_integer()) return std::to_string(i->get());
  if (auto* f = node.as_floating_point()) return sdk::to_toml(ConfigValue{f->get()});
  if (auto* b = node.as_boolean()) return b->get() ? "true" : "false";
  if (auto* a = node.as_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < a->size(); ++i) out += (i ? ", " : "") + render(*a->get(i));
    return out + "]";
  }
  if (node.is_table()) return "a table";
  return "a date/time";
}

bool is_list(ValueType t) {
  return t == ValueType::integer_list || t == ValueType::number_list || t == ValueType::string_list;
}

// Converts one TOML node to the key's type; nullopt when the TOML type does not fit.
std::optional<ConfigValue> convert_scalar(const toml::node& node, ValueType type) {
  switch (type) {
    case ValueType::boolean:
      if (auto* b = node.as_boolean()) return ConfigValue{b->get()};
      return std::nullopt;
    case ValueType::integer:
    case ValueType::integer_list:
      if (auto* i = node.as_integer()) return ConfigValue{i->get()};
      return std::nullopt;
    case ValueType::number:
    case ValueType::number_list:
      if (auto* i = node.as_integer()) return ConfigValue{static_cast<double>(i->get())};
      if (auto* f = node.as_floating_point()) return ConfigValue{f->get()};
      return std::nullopt;
    case ValueType::string:
    case ValueType::string_list:
      if (auto* s = node.as_string()) return ConfigValue{s->get()};
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<ConfigValue> convert(const toml::node& node, const Key& key) {
  if (!key.keywords().empty() && node.is_string()) return ConfigValue{node.as_string()->get()};
  if (!is_list(key.type())) return convert_scalar(node, key.type());
  auto* array = node.as_array();
  if (!array) return std::nullopt;
  std::vector<std::int64_t> ints;
  std::vector<double> numbers;
  std::vector<std::string> strings;
  for (const auto& element : *array) {
    auto v = convert_scalar(element, key.type());
    if (!v) return std::nullopt;
    if (auto* i = std::get_if<std::int64_t>(&*v)) ints.push_back(*i);
    if (auto* d = std::get_if<double>(&*v)) numbers.push_back(*d);
    if (auto* s = std::get_if<std::string>(&*v)) strings.push_back(*s);
  }
  if (key.type() == ValueType::integer_list) return ConfigValue{ints};
  if (key.type() == ValueType::number_list) return ConfigValue{numbers};
  return ConfigValue{strings};
}

// False for a number (or list of numbers) that is inf or nan: no key means anything by them.
bool is_finite(const ConfigValue& value) {
  if (auto* d = std::get_if<double>(&value)) return std::isfinite(*d);
  if (auto* l = std::get_if<std::vector<double>>(&value)) {
    return std::all_of(l->begin(), l->end(), [](double v) { return std::isfinite(v); });
  }
  return true;
}

// "a finite number > 0", "a list of finite numbers > 1": what a non-finite value was refused for.
std::string finite_expectation(const Key& key) {
  std::string expected = key.expectation();
  const auto at = expected.find("number");
  if (at != std::string::npos) expected.insert(at, "finite ");
  return (is_list(key.type()) ? "" : "a ") + expected;
}

std::vector<std::string> key_names(const Schema& schema, const std::vector<std::string>& extra) {
  std::vector<std::string> names = extra;
  for (const auto& k : schema.keys()) names.push_back(k.name());
  return names;
}

class Validator {
 public:
  Validator(const RecipeDocument& doc, const ComponentRegistry& registry, std::vector<Diagnostic> earlier)
      : doc_(doc), registry_(registry), earlier_(std::move(earlier)) {}

  Recipe run() {
    Recipe recipe;
    recipe.file = doc_.file();
    const toml::table& root = doc_.root();
    check_top_level(root);

    const toml::table empty;
    auto section = [&](const char* name) -> const toml::table& {
      const toml::table* t = root.get_as<toml::table>(name);
      return t ? *t : empty;
    };

    auto run_values = table_values(section("run"), "run", run_schema(), {});
    if (run_values.count("name")) check_name(section("run"), "name", "run.name", "[run] name (runs/NAME)");
    if (!run_values.count("name")) run_values["name"] = fs::path(doc_.file()).stem().string();
    recipe.run = sdk::Config("run", run_values);
    check_init_from(section("run"), recipe.run);
    recipe.privacy = sdk::Config("privacy", table_values(section("privacy"), "privacy", privacy_schema(), {}));
    check_data(root, recipe);
    sdk::Config plugins("plugins", table_values(section("plugins"), "plugins", plugins_schema(), {}));
    for (const auto& dir : plugins.get_string_list("search")) {
      recipe.plugin_search.push_back(doc_.base_directory() / dir);
    }
    for (const auto& library : plugins.get_string_list("use")) {
      recipe.plugin_use.push_back(doc_.base_directory() / library);
    }

    if (auto* model = root.get_as<toml::table>("model")) {
      recipe.model = component(*model, "model", "type", ComponentKind::model);
    }
    if (auto* adapter = root.get_as<toml::table>("adapter")) {
      recipe.adapter = component(*adapter, "adapter", "type", ComponentKind::adapter);
    }
    if (auto* sampler = root.get_as<toml::table>("sampler")) {
      recipe.sampler = component(*sampler, "sampler", "type", ComponentKind::sampler);
    }
    check_stages(root, recipe);
    check_accountants(root, recipe);
    check_evals(root, recipe);
    check_sweep(root, recipe);

    sort_by_position(diagnostics_);
    diagnostics_.insert(diagnostics_.end(), earlier_.begin(), earlier_.end());
    if (!diagnostics_.empty()) throw RecipeError(std::move(diagnostics_));
    recipe.locations = std::move(locations_);
    return recipe;
  }

 private:
  // [run] init_from_disjoint states something about the run init_from names: alone it says nothing.
  void check_init_from(const toml::table& run, const sdk::Config& values) {
    const toml::node* disjoint = run.get("init_from_disjoint");
    if (!disjoint || run.contains("init_from") || !values.has("init_from_disjoint") ||
        !values.get_bool("init_from_disjoint")) {
      return;
    }
    error(*disjoint, "run.init_from_disjoint",
          "true states that this run's data and those of the run it starts from are disjoint, but [run] has no "
          "init_from: set run.init_from = \"RUN_DIR\" (the run to start from), or remove init_from_disjoint");
  }

  // Keeps where `node` is in the recipe (or the --set that gave it) for checks after validation
  // (Recipe::diagnostic); nodes made up for absent sections have no place.
  void remember(const toml::node& node, const std::string& path) {
    Diagnostic where = doc_.diagnostic_at(node, path, "");
    if (where.location != doc_.file()) locations_[path] = std::move(where);
  }

  static std::string render_name(const std::string& name) { return sdk::to_toml(ConfigValue{name}); }

  // A string value of `table` that becomes a file or directory name (recipe/safe_name.hpp).
  void check_name(const toml::table& table, const char* key, const std::string& path, const std::string& what) {
    const toml::node* node = table.get(key);
    if (!node) return;
    std::string name;
    if (node->is_string()) name = node->as_string()->get();
    else if (auto raw = doc_.override_text(path)) name = *raw;  // --set run.name=123
    else return;  // not a string: reported as such
    if (is_safe_name(name)) return;
    error(*node, path, "expected " + std::string(safe_name_rule) + " for " + what + ", got " + render_name(name));
  }

  // `privdiff eval` takes the images it scores and picks the real data's split itself: the [[eval]]
  // keys that sample or pick a split, and real.split / real.public, would be ignored, so are refused.
  void check_eval_command_keys(const toml::table& root) {
    static const std::map<std::string, std::string> instead = {
        {"samples", "the images are given (SAMPLES); --max-samples N scores fewer of them"},
        {"labels", "the labels are given (--labels FILE, or the file beside SAMPLES)"},
        {"batch_size", "privdiff eval samples nothing"},
        {"seed", "use --seed N"},
        {"reference", "use --reference test or --reference train"},
        {"held_out_near_duplicates", "use --allow-near-duplicates"}};
    for (auto&& [k, node] : root) {
      const auto it = instead.find(std::string(k.str()));
      if (it != instead.end()) error(k, it->first, "privdiff eval does not use this [[eval]] key: " + it->second);
    }
    const toml::table* real = root.get_as<toml::table>("real");
    if (!real) return;
    if (const toml::node* split = real->get("split")) {
      error(*split, "real.split", "privdiff eval does not use it: it reads the real data's test split, and its "
                                  "train split only with --reference train (which puts a caveat on the result)");
    }
    if (const toml::node* stated = real->get("near_duplicates")) {
      error(*stated, "real.near_duplicates", "privdiff eval does not use it: use --allow-near-duplicates");
    }
    if (const toml::node* mark = real->get("public")) {
      error(*mark, "real.public", "privdiff eval does not use it: whether the real data hold a run's private "
                                  "records is found from their content, not stated");
    }
  }

  void check_evals(const toml::table& root, Recipe& recipe) {
    const toml::array* entries = root.get_as<toml::array>("eval");
    if (!entries) return;
    for (std::size_t i = 0; i < entries->size(); ++i) {
      const toml::table* entry = entries->get(i)->as_table();
      if (!entry) continue;  // check_top_level reported it
      const std::string path = child_path("eval", i);
      if (const toml::node* old = entry->get("classifiers")) {  // the [[eval]] key of privdiff < 0.10
        error(*old, child_path(path, "classifiers"),
              "unknown key 'classifiers': DPDM's classifiers are the dpdm_classifiers evaluator now; write "
              "evaluators = [\"dpdm_classifiers\", ...] and [eval.dpdm_classifiers] classifiers = [...]");
        continue;
      }
      sdk::Config settings(path, table_values(*entry, path, eval_schema(), option_tables(*entry)));
      recipe.evals.push_back(EvalSection{settings, evaluators(*entry, path, settings)});
    }
    if (!recipe.evals.empty() && (!root.contains("model") || !root.contains("sampler"))) {
      error(*entries, "eval", "[[eval]] samples the trained model: the recipe needs a [model] and a [sampler]");
    }
  }

  void check_sweep(const toml::table& root, Recipe& recipe) {
    const toml::table* sweep = root.get_as<toml::table>("sweep");
    if (!sweep) return;
    SweepSection s{sdk::Config("sweep", table_values(*sweep, "sweep", sweep_schema(), {"params"})), {}};
    const toml::node* params = sweep->get("params");
    if (params && !params->is_table()) {
      error(*params, "sweep.params", "expected a table of searched keys ([sweep.params] \"stage.0.lr\" = "
                                     "[1e-4, 1e-3]), got " + render(*params));
    } else if (params) {
      for (auto&& [k, node] : *params->as_table()) {
        const std::string key(k.str()), path = child_path("sweep.params", key);
        std::string values;
        if (!sweep_values(node, values)) {
          error(node, path, "expected a list of values ([1e-4, 1e-3]; strings without commas, quotes or backslashes) or \"log:LOW:HIGH\" / "
                            "\"log:LOW:HIGH:int\", got " + render(node));
          continue;
        }
        s.params.push_back(key + "=" + values);
        remember(node, path);
      }
    }
    recipe.sweep = std::move(s);
  }

  // A [sweep.params] value as a --param spec's right side: "log:..." as it is, a list as V1,V2 (each
  // value as --set takes it: strings quoted). False for anything else.
  static bool sweep_values(const toml::node& node, std::string& out) {
    if (const auto* text = node.as_string()) {
      out = text->get();
      return out.rfind("log:", 0) == 0;
    }
    const toml::array* list = node.as_array();
    if (!list || list->empty()) return false;
    for (const auto& element : *list) {
      std::string value;
      if (const auto* i = element.as_integer()) value = std::to_string(i->get());
      else if (const auto* d = element.as_floating_point()) value = sdk::shortest_number_text(d->get());
      else if (const auto* b = element.as_boolean()) value = b->get() ? "true" : "false";
      else if (const auto* t = element.as_string()) value = "\"" + t->get() + "\"";
      else return false;
      const std::string inner = value.size() >= 2 && value.front() == '"' ? value.substr(1, value.size() - 2) : value;
      if (inner.find_first_of(",\\\"") != std::string::npos) return false;
      out += (out.empty() ? "" : ",") + value;
    }
    return true;
  }

 public:
  /// `privdiff eval`'s document: `evaluators`, `epochs` and `[real]` (a [data]-like section) at the
  /// top, one [ID] table of options per evaluator.
  EvaluationChoice evaluation_choice() {
    const toml::table& root = doc_.root();
    EvaluationChoice choice;
    Recipe scratch;
    if (const toml::table* real = root.get_as<toml::table>("real")) data_section(*real, "real", "real", scratch);
    std::vector<std::string> host_keys = option_tables(root);
    sdk::Config settings("", table_values(root, "", eval_schema(), host_keys));
    choice.evaluators = evaluators(root, "", settings);
    check_eval_command_keys(root);
    if (!scratch.datasets.empty()) choice.real = std::move(scratch.datasets.front());
    if (!diagnostics_.empty()) {
      sort_by_position(diagnostics_);
      throw RecipeError(std::move(diagnostics_));
    }
    return choice;
  }

 private:
  /// The keys of `entry` that hold tables: evaluator options ([eval.ID]), not host keys.
  static std::vector<std::string> option_tables(const toml::table& entry) {
    std::vector<std::string> names;
    for (auto&& [k, node] : entry) {
      if (node.is_table()) names.emplace_back(k.str());
    }
    return names;
  }

  /// The evaluators an [[eval]] entry names, each configured from its [eval.ID] table; the entry's
  /// `epochs` fills the `epochs` of every evaluator that has one and does not set it.
  std::vector<ComponentSection> evaluators(const toml::table& entry, const std::string& path,
                                           const sdk::Config& settings) {
    std::vector<ComponentSection> out;
    const auto& ids = settings.get_string_list("evaluators");
    const toml::array* listed = entry.get_as<toml::array>("evaluators");
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const std::string& id = ids[i];
      const toml::node& where = listed && i < listed->size() ? *listed->get(i) : static_cast<const toml::node&>(entry);
      auto found = registry_.find(ComponentKind::evaluator, id);
      if (!found) {
        error(where, child_path(child_path(path, "evaluators"), i), unknown_component(ComponentKind::evaluator, id));
        continue;
      }
      const toml::table empty;
      const toml::table* options = entry.get_as<toml::table>(id);
      const std::string options_path = child_path(path, id);
      auto values = table_values(options ? *options : empty, options_path, found->registration->schema, {});
      const bool set_here = options && options->contains("epochs");
      if (settings.has("epochs") && found->registration->schema.find("epochs") && !set_here) {
        values["epochs"] = settings.value("epochs");
      }
      out.push_back(ComponentSection{id, sdk::Config(options_path, values)});
    }
    for (auto&& [k, node] : entry) {
      const std::string id(k.str());
      if (!node.is_table() || (path.empty() && id == "real") || std::find(ids.begin(), ids.end(), id) != ids.end()) continue;
      error(k, child_path(path, id), "options for '" + id + "', which `evaluators` does not name (evaluators: " +
                                         join(ids) + ")");
    }
    return out;
  }

  void error(const toml::node& node, const std::string& path, std::string message) {
    diagnostics_.push_back(doc_.diagnostic_at(node, path, std::move(message)));
  }
  void error(const toml::key& key, const std::string& path, std::string message) {
    diagnostics_.push_back(doc_.diagnostic_at(key.source(), path, std::move(message)));
  }

  void check_top_level(const toml::table& root) {
    std::vector<std::string> names;
    for (const auto& s : recipe_sections()) names.push_back(s.name);
    for (auto&& [k, node] : root) {
      const std::string name(k.str());
      auto it = std::find_if(recipe_sections().begin(), recipe_sections().end(),
                             [&](const SectionShape& s) { return s.name == name; });
      if (it == recipe_sections().end()) {
        error(k, name, "unknown section '" + name + "'" + did_you_mean(name, names) +
                              "; recipe sections: " + join(names));
      } else if (it->array_of_tables && !node.is_array_of_tables()) {
        error(node, name, "expected an array of tables ([[" + name + "]]), got " + render(node));
      } else if (!it->array_of_tables && !node.is_table()) {
        error(node, name, "expected a table ([" + name + "]), got " + render(node));
      }
    }
  }

  // Converts and checks every key of `table` against `schema`; `selectors` are keys handled by
  // the caller (e.g. "type"). Fills defaults; reports unknown, mistyped and missing keys.
  std::map<std::string, ConfigValue> table_values(const toml::table& table, const std::string& path,
                                                  const Schema& schema, const std::vector<std::string>& selectors) {
    std::map<std::string, ConfigValue> values;
    if (!path.empty()) remember(table, path);
    for (auto&& [k, node] : table) {
      const std::string name(k.str());
      const std::string key_path = child_path(path, name);
      if (std::find(selectors.begin(), selectors.end(), name) != selectors.end()) continue;
      const Key* key = schema.find(name);
      if (!key) {
        const auto names = key_names(schema, selectors);
        if (path == "model" && name.rfind("lora_", 0) == 0) {  // the model key of privdiff < 0.9
          error(k, key_path, "unknown key '" + name + "': LoRA is an adapter plugin now; write [adapter] type = "
                             "\"lora\" with rank, alpha, dropout, targets (privdiff plugins show lora)");
          continue;
        }
        const std::string suggestion = did_you_mean(name, names);
        error(k, key_path, "unknown key '" + name + "'" +
                                  (suggestion.empty() ? "; valid keys: " + join(names) : suggestion));
        continue;
      }
      std::optional<ConfigValue> value;
      if (key->type() == ValueType::string && !node.is_string()) {
        if (auto raw = doc_.override_text(key_path)) value = ConfigValue{*raw};  // --set run.name=123
      }
      if (!value) value = convert(node, *key);
      if (!value || !key->accepts(*value)) {
        error(node, key_path, "expected " + key->expectation() + ", got " + render(node));
        continue;
      }
      if (!is_finite(*value)) {  // e.g. epsilon = inf, which TOML allows and "> 0" does not exclude
        error(node, key_path, "expected " + finite_expectation(*key) + ", got " + render(node));
        continue;
      }
      values[name] = *value;
      remember(node, key_path);
    }
    for (const auto& key : schema.keys()) {
      if (table.contains(key.name())) continue;
      if (key.default_value()) {
        values[key.name()] = *key.default_value();
      } else if (key.is_required()) {
        error(table, child_path(path, key.name()),
              "missing required key '" + key.name() + "' (expected " + key.expectation() + ")");
      }
    }
    return values;
  }

  std::string unknown_component(ComponentKind kind, const std::string& id) const {
    if (std::string ambiguous = registry_.ambiguity(kind, id); !ambiguous.empty()) return ambiguous;
    const auto available = registry_.ids(kind);
    std::string message = "unknown " + sdk::to_string(kind) + " '" + id + "'" + did_you_mean(id, available) +
                          "; available " + sdk::plural(kind) + ": " + join(available);
    const std::string hint = registry_.refused_hint(id);
    return hint.empty() ? message : message + "; " + hint;
  }

  // A component section: `selector` names the component; `own_keys` belong to the host (stage name).
  std::optional<ComponentSection> component(const toml::table& table, const std::string& path,
                                            const std::string& selector, ComponentKind kind,
                                            const std::vector<std::string>& own_keys = {},
                                            const std::string& default_id = "") {
    const std::string selector_path = child_path(path, selector);
    const toml::node* node = table.get(selector);
    if (!node && !default_id.empty()) {
      auto found = registry_.find(kind, default_id);
      if (!found) {
        error(table, selector_path, unknown_component(kind, default_id));
        return std::nullopt;
      }
      std::vector<std::string> skip = own_keys;
      return ComponentSection{default_id, sdk::Config(path, table_values(table, path, found->registration->schema, skip))};
    }
    if (!node) {
      error(table, selector_path, "missing required key '" + selector + "' (expected one of the available " +
                                      sdk::plural(kind) + ": " + join(registry_.ids(kind)) + ")");
      return std::nullopt;
    }
    if (!node->is_string()) {
      error(*node, selector_path, "expected string (" + sdk::to_string(kind) + " id), got " + render(*node));
      return std::nullopt;
    }
    const std::string id = node->as_string()->get();
    auto found = registry_.find(kind, id);
    if (!found) {
      error(*node, selector_path, unknown_component(kind, id));
      return std::nullopt;
    }
    remember(*node, selector_path);
    std::vector<std::string> skip = own_keys;
    skip.insert(skip.begin(), selector);
    auto values = table_values(table, path, found->registration->schema, skip);
    return ComponentSection{id, sdk::Config(path, std::move(values))};
  }

  void check_stages(const toml::table& root, Recipe& recipe) {
    const toml::array* stages = root.get_as<toml::array>("stage");
    if (!stages || !stages->is_array_of_tables()) return;
    std::set<std::string> names;
    for (std::size_t i = 0; i < stages->size(); ++i) {
      const toml::table& table = *stages->get(i)->as_table();
      const std::string path = child_path("stage", i);
      std::string name = "stage" + std::to_string(i);
      if (const toml::node* n = table.get("name")) {
        if (auto* s = n->as_string()) {
          name = s->get();
          check_name(table, "name", child_path(path, "name"), "a stage's name (its release: released-NAME)");
        } else {
          error(*n, child_path(path, "name"), "expected string, got " + render(*n));
        }
        if (!names.insert(name).second) error(*n, child_path(path, "name"), "stage name '" + name + "' is used twice");
      }
      if (!root.contains("model") && i == 0) {
        error(table, path, "a [[stage]] trains a model, but the recipe has no [model] section");
      }
      const std::string data = stage_data(table, path, recipe);
      if (auto mechanism = component(table, path, "mechanism", ComponentKind::mechanism, {"name", "data"})) {
        recipe.stages.push_back(StageSection{name, std::move(*mechanism), data});
      }
    }
  }

  // [data] (one dataset, named "data") or [data.NAME] tables (several; stages pick one by name).
  void check_data(const toml::table& root, Recipe& recipe) {
    const toml::table* data = root.get_as<toml::table>("data");
    if (!data) return;
    bool all_tables = !data->empty();
    for (auto&& [k, node] : *data) all_tables = all_tables && node.is_table();
    if (!all_tables) {
      for (auto&& [k, node] : *data) {
        if (node.is_table()) {
          error(k, child_path("data", std::string(k.str())),
                "[data] mixes its own keys with a [data." + std::string(k.str()) + "] table: use either one [data] "
                "section or only named [data.NAME] sections");
        }
      }
      data_section(*data, "data", "data", recipe);
      return;
    }
    for (auto&& [k, node] : *data) {
      const std::string name(k.str());
      if (!is_safe_name(name)) {
        error(k, child_path("data", name), "expected " + std::string(safe_name_rule) +
                                               " for a dataset's name ([data.NAME]), got " + render_name(name));
      }
      data_section(*node.as_table(), "data." + name, name, recipe);
    }
  }

  void data_section(const toml::table& table, const std::string& path, const std::string& name, Recipe& recipe) {
    data_names_.push_back(name);  // known to stages even when the section has errors of its own
    if (!table.contains("dataset") && !table.contains("path")) {
      error(table, child_path(path, "dataset"),
            "missing required key 'dataset' (expected one of the available datasets: " +
                join(registry_.ids(ComponentKind::dataset)) + "; or give `path` to a directory of IDX files)");
      return;
    }
    auto dataset = component(table, path, "dataset", ComponentKind::dataset, {"classes", "near_duplicates"}, "idx");
    if (!dataset) return;
    DataSection section{name, path, std::move(*dataset), std::nullopt, "refuse"};
    if (const toml::node* classes = table.get("classes")) {
      static const Schema schema = Schema{}.add(Key::integer_list("classes").at_least(0).doc("labels to keep"));
      const auto value = convert(*classes, schema.keys().front());
      if (!value || !schema.keys().front().accepts(*value)) {
        error(*classes, child_path(path, "classes"), "expected a list of class labels >= 0, got " + render(*classes));
      } else {
        section.classes = std::get<std::vector<std::int64_t>>(*value);
        remember(*classes, child_path(path, "classes"));
      }
    }
    if (const toml::node* stated = table.get("near_duplicates")) {
      const auto* text = stated->as_string();
      if (!text || (text->get() != "refuse" && text->get() != "caveat")) {
        error(*stated, child_path(path, "near_duplicates"),
              "expected \"refuse\" or \"caveat\" (public data holding near-duplicates of private records: refused, "
              "or used with a caveat on the run), got " + render(*stated));
      } else {
        section.near_duplicates = text->get();
        remember(*stated, child_path(path, "near_duplicates"));
      }
    }
    recipe.datasets.push_back(std::move(section));
  }

  // The dataset a stage trains on: its `data` key, or the recipe's only dataset.
  std::string stage_data(const toml::table& table, const std::string& path, const Recipe& recipe) {
    const std::vector<std::string>& names = data_names_;
    const toml::node* node = table.get("data");
    if (!node) {
      if (names.size() > 1) {
        error(table, child_path(path, "data"),
              "the recipe defines several datasets (" + join(names) + "): name the one this stage trains on, e.g. "
              "data = \"" + names.front() + "\"");
      }
      return names.size() == 1 ? names.front() : "";
    }
    const auto* text = node->as_string();
    if (!text) {
      error(*node, child_path(path, "data"), "expected string (a dataset name), got " + render(*node));
      return "";
    }
    // Or the data an earlier stage releases (e.g. DP-FETA's central images), named after that stage;
    // pre-flight checks that its mechanism releases data.
    const bool earlier_stage = std::any_of(recipe.stages.begin(), recipe.stages.end(),
                                           [&](const StageSection& s) { return s.name == text->get(); });
    if (!earlier_stage && std::find(names.begin(), names.end(), text->get()) == names.end()) {
      error(*node, child_path(path, "data"),
            "unknown dataset '" + text->get() + "'" + did_you_mean(text->get(), names) +
                (names.empty() ? "; the recipe has no [data] section" : "; the recipe's datasets: " + join(names)));
      return "";
    }
    return text->get();
  }

  void check_accountants(const toml::table& root, Recipe& recipe) {
    // Which accountants the recipe uses: [privacy] accountant and report, when [privacy] is given.
    if (const toml::table* privacy = root.get_as<toml::table>("privacy")) {
      auto use = [&](const toml::node& node, const std::string& path, const std::string& id) {
        if (!registry_.find(ComponentKind::accountant, id)) {
          error(node, path, unknown_component(ComponentKind::accountant, id));
        } else if (std::find(recipe.accountant_ids.begin(), recipe.accountant_ids.end(), id) ==
                   recipe.accountant_ids.end()) {
          recipe.accountant_ids.push_back(id);
        }
      };
      if (const toml::node* n = privacy->get("accountant"); n && n->is_string()) {
        use(*n, "privacy.accountant", n->as_string()->get());
      } else if (!n) {
        use(*privacy, "privacy.accountant", recipe.privacy.get_string("accountant"));
      }
      if (const toml::array* report = privacy->get_as<toml::array>("report")) {
        for (std::size_t i = 0; i < report->size(); ++i) {
          if (auto* s = report->get(i)->as_string()) use(*s, child_path("privacy.report", i), s->get());
        }
      }
    }
    // Options of accountants: [accountants.<id>] tables.
    const toml::table* options = root.get_as<toml::table>("accountants");
    for (const auto& id : recipe.accountant_ids) {
      auto found = registry_.find(ComponentKind::accountant, id);
      const toml::table* table = options ? options->get_as<toml::table>(id) : nullptr;
      const toml::table empty;
      recipe.accountants[id] = sdk::Config(
          "accountants." + id,
          table_values(table ? *table : empty, "accountants." + id, found->registration->schema, {}));
    }
    if (!options) return;
    for (auto&& [k, node] : *options) {
      const std::string id(k.str());
      const std::string path = "accountants." + id;
      if (!node.is_table()) {
        error(node, path, "expected a table ([accountants." + id + "]), got " + render(node));
      } else if (!registry_.find(ComponentKind::accountant, id)) {
        error(node, path, unknown_component(ComponentKind::accountant, id));
      } else if (!recipe.accountants.count(id)) {
        // Options for an accountant the recipe does not use: still check them.
        auto found = registry_.find(ComponentKind::accountant, id);
        table_values(*node.as_table(), path, found->registration->schema, {});
      }
    }
  }

  const RecipeDocument& doc_;
  const ComponentRegistry& registry_;
  std::vector<Diagnostic> diagnostics_;
  std::vector<Diagnostic> earlier_;
  std::vector<std::string> data_names_;  // every [data] / [data.NAME] section, valid or not
  std::map<std::string, Diagnostic> locations_;  // Recipe::locations
};

}  // namespace

namespace {
// [plugins] KEY: a list of paths, each relative to the recipe file.
std::vector<fs::path> plugin_paths(const RecipeDocument& document, const char* key) {
  std::vector<fs::path> paths;
  const toml::array* list = document.root()["plugins"][key].as_array();
  if (!list) return paths;
  for (const auto& entry : *list) {
    if (auto* s = entry.as_string()) paths.push_back(document.base_directory() / s->get());
  }
  return paths;
}
}  // namespace

std::vector<fs::path> recipe_plugin_directories(const RecipeDocument& document) { return plugin_paths(document, "search"); }

std::vector<fs::path> recipe_plugin_libraries(const RecipeDocument& document) { return plugin_paths(document, "use"); }

EvaluationChoice validate_evaluation(const RecipeDocument& document, const ComponentRegistry& registry) {
  return Validator(document, registry, {}).evaluation_choice();
}

Recipe validate_recipe(const RecipeDocument& document, const ComponentRegistry& registry,
                       std::vector<Diagnostic> earlier) {
  return Validator(document, registry, std::move(earlier)).run();
}

}  // namespace privdiff::core
