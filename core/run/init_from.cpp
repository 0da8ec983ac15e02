#include "run/init_from.hpp"

#include "recipe/recipe_text_guard.hpp"
#include "run/atomic_file.hpp"
#include "run/run_checkpoint.hpp"
#include "run/run_ledger.hpp"

#include <privdiff/privacy/event_json.hpp>

#include <toml++/toml.h>

#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

namespace {
// The [model] type of the recipe a run directory records (what ran, with defaults written out).
std::string recorded_model_type(const fs::path& recipe_file) {
  std::error_code ec;
  if (!fs::is_regular_file(recipe_file, ec)) return {};  // a bare checkpoint: taken to be of this recipe's model
  const std::string text = read_file(recipe_file);
  if (const auto unsafe = unsafe_toml_text(text, recipe_file.string())) {
    throw std::runtime_error("run.init_from: " + recipe_file.string() + " is damaged: " + unsafe->message);
  }
  try {
    const toml::table recipe = toml::parse(text, recipe_file.string());
    return recipe["model"]["type"].value_or(std::string{});
  } catch (const toml::parse_error& e) {
    throw std::runtime_error("run.init_from: " + recipe_file.string() + " is damaged: " + std::string(e.description()));
  }
}
}  // namespace

InitSource read_init_source(const fs::path& path) {
  InitSource source;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    source.run_dir = path;
    source.checkpoint = path / "checkpoint.pt";
  } else if (fs::is_regular_file(path, ec)) {
    source.checkpoint = path;
    source.run_dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  } else {
    throw std::runtime_error("run.init_from: " + path.string() + " is neither a run directory nor a checkpoint");
  }
  if (!fs::is_regular_file(source.checkpoint, ec)) {
    throw std::runtime_error("run.init_from: " + source.run_dir.string() + " has no checkpoint.pt (is it a run "
                             "directory written by privdiff run?)");
  }
  source.checkpoint = fs::absolute(source.checkpoint);
  source.run_dir = fs::absolute(source.run_dir);
  source.checkpoint_hash = content_hash(read_file(source.checkpoint));
  source.model_type = recorded_model_type(source.run_dir / "recipe.toml");
  // What it spent: the longer of its ledger.json and its checkpoint's ledger, as for resume.
  source.ledger = read_run_ledger(source.run_dir).ledger;
  const fs::path summary = source.run_dir / "summary.json";
  if (fs::is_regular_file(summary, ec)) {
    source.finished = true;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_file(summary));
    } catch (const std::exception& e) {
      throw std::runtime_error("run.init_from: " + summary.string() + " is not valid JSON: " + e.what());
    }
    if (j.contains("data_use") && j["data_use"].is_object()) {
      source.data_use_known = true;
      for (const auto& fp : j["data_use"].value("private", nlohmann::json::array())) source.private_data.push_back(fp);
      for (const auto& fp : j["data_use"].value("public", nlohmann::json::array())) source.public_data.push_back(fp);
    }
  }
  return source;
}

InitSource read_recorded_init(const fs::path& file) {
  InitSource source;
  try {
    const nlohmann::json j = nlohmann::json::parse(read_file(file));
    source.run_dir = j.at("source").get<std::string>();
    source.checkpoint = j.at("checkpoint").get<std::string>();
    source.checkpoint_hash = j.at("checkpoint_hash").get<std::string>();
    source.finished = j.at("source_finished").get<bool>();
    source.carried = j.at("carried").get<bool>();
    source.reason = j.at("reason").get<std::string>();
    source.ledger = sdk::privacy_ledger_from_json(j.at("carried_ledger").dump());
    if (j.contains("source_data_use") && j["source_data_use"].is_object()) {
      source.data_use_known = true;
      for (const auto& fp : j["source_data_use"].at("private")) source.private_data.push_back(fp);
      for (const auto& fp : j["source_data_use"].at("public")) source.public_data.push_back(fp);
    }
  } catch (const std::exception& e) {
    throw std::runtime_error(file.string() + ": unreadable (" + e.what() + ")");
  }
  return source;
}

nlohmann::json data_use_json(const std::vector<std::string>& private_data, const std::vector<std::string>& public_data) {
  return {{"private", private_data}, {"public", public_data}};
}

}  // namespace privdiff::core
