// privdiff weights inspect PATH [--all]: the tensors, dtypes, shapes and metadata of a safetensors
// file (or of those in a folder: a privdiff export, a diffusers model), and the architecture
// recognised. privdiff weights import SRC: outside weights checked against the model that runs them,
// and the recipe tables that start from them (weights/weights_import.hpp). privdiff weights export
// RUN -o DIR: a finished run's model as safetensors with its privacy guarantee in the metadata and
// a model card (weights/model_export.hpp).
#include "cli/command_setup.hpp"
#include "cli/commands.hpp"
#include "run/composed_run.hpp"
#include "release/run_export.hpp"
#include "run/run_checkpoint.hpp"
#include "run/run_guarantee.hpp"
#include "util/shape_text.hpp"
#include "weights/model_export.hpp"
#include "weights/weights_import.hpp"

#include <privdiff/diffusion/diffusers_autoencoder.hpp>
#include <privdiff/diffusion/diffusers_unet.hpp>
#include <privdiff/diffusion/ncsnpp.hpp>
#include <privdiff/io/atomic_file.hpp>
#include <privdiff/io/safetensors.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

namespace privdiff::core::cli {

namespace fs = std::filesystem;

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// What the weights are, from their metadata, a diffusers config.json beside them, or their names.
std::string recognise(const sdk::SafetensorsFile& file, const std::string& config_class) {
  const auto& m = file.metadata();
  if (m.count(export_keys::model)) {
    return "privdiff '" + m.at(export_keys::model) + "' model, exported by privdiff " +
           (m.count(export_keys::version) ? m.at(export_keys::version) : "?") +
           " (its [model] is in the metadata's " + export_keys::recipe + ")";
  }
  if (!config_class.empty()) return config_class;
  bool unet = false, autoencoder = false, diffusers_names = false;
  std::vector<std::string> names;
  for (const auto& e : file.entries()) names.push_back(e.name);
  if (sdk::diffusion::looks_like_dpdm_ncsnpp(names)) {
    return "DPDM's NCSN++ network (all_modules.*), which privdiff's dpdm_ncsnpp model runs (privdiff weights import "
           "prints its recipe tables)";
  }
  for (const auto& e : file.entries()) {
    unet = unet || starts_with(e.name, "model.diffusion_model.");
    autoencoder = autoencoder || starts_with(e.name, "first_stage_model.");
    diffusers_names = diffusers_names || starts_with(e.name, "down_blocks.");
  }
  if (unet) {
    return std::string("CompVis latent-diffusion UNet (model.diffusion_model.*)") +
           (autoencoder ? " with its KL autoencoder (first_stage_model.*)" : "") +
           (m.count("ldm.config") ? " and its config (ldm.config), which privdiff's compvis_ldm model runs (privdiff weights "
                                    "import prints its recipe tables)"
                                  : ", without its config: scripts/convert_to_safetensors.py --ldm-config adds it");
  }
  if (diffusers_names) return "diffusers-layout weights without a config.json beside them";
  return "not recognised";
}

// What makes an export's privacy metadata unreadable, or "" when it reads.
std::string privacy_damage(const std::map<std::string, std::string>& m) {
  if (!m.count(export_keys::privacy)) return "";
  if (m.count(export_keys::epsilon) && m.at(export_keys::epsilon).empty()) return "";
  for (const char* key : {export_keys::accountant, export_keys::epsilon, export_keys::delta}) {  // read, not set
    if (!m.count(key)) return std::string("damaged privdiff metadata (") + export_keys::privacy + " without " + key + ")";
  }
  if (!nlohmann::json::accept(m.at(export_keys::privacy)))
    return std::string("damaged privdiff metadata (") + export_keys::privacy + " is not valid JSON)";
  return "";
}

// The guarantee an export carries, in one line.
std::string privacy_line(const std::map<std::string, std::string>& m) {
  if (!m.count(export_keys::privacy)) return "";
  if (m.count(export_keys::epsilon) && m.at(export_keys::epsilon).empty()) return "privacy: none (no private stage)";
  if (const std::string damage = privacy_damage(m); !damage.empty()) return "privacy: " + damage + ": the guarantee cannot be read";
  std::string line = "privacy: (epsilon, delta) = (" + m.at(export_keys::epsilon) + ", " + m.at(export_keys::delta) +
                     ") by " + m.at(export_keys::accountant);
  const auto p = nlohmann::json::parse(m.at(export_keys::privacy));
  if (p.contains("data") && p["data"].is_string()) line += "; data " + p["data"].get<std::string>();
  const auto caveats = p.is_object() ? p.value("caveats", nlohmann::json::array()) : nlohmann::json::array();
  line += "; caveats: " + (caveats.empty() ? std::string("none") : std::to_string(caveats.size()) + " (see README.md)");
  return line;
}

// Prints what the file holds; returns what makes its privacy metadata unreadable ("" when nothing).
std::string inspect_file(const fs::path& path, const std::string& config_class, bool all, std::ostream& out) {
  const sdk::SafetensorsFile file(path);
  std::map<std::string, int> dtypes;
  std::int64_t values = 0;
  std::uint64_t bytes = 0;
  for (const auto& e : file.entries()) {
    ++dtypes[e.dtype];
    values += e.numel();
    bytes += e.end - e.begin;
  }
  out << path.string() << ": " << file.entries().size() << " tensors, " << values << " values, " << bytes << " bytes (";
  for (auto it = dtypes.begin(); it != dtypes.end(); ++it) out << (it == dtypes.begin() ? "" : ", ") << it->first << " x" << it->second;
  out << ")\narchitecture: " << recognise(file, config_class) << "\n";
  if (const std::string line = privacy_line(file.metadata()); !line.empty()) out << line << "\n";
  for (const auto& [key, value] : file.metadata()) {
    const std::string shown = value.size() > 80 ? value.substr(0, 77) + "..." : value;
    out << "metadata " << key << " = " << (shown.find('\n') == std::string::npos ? shown : "(" + std::to_string(value.size()) + " characters)") << "\n";
  }
  std::vector<sdk::SafetensorsEntry> entries = file.entries();
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  const std::size_t shown = all ? entries.size() : std::min<std::size_t>(entries.size(), 40);
  for (std::size_t i = 0; i < shown; ++i) {
    out << "  " << std::left << std::setw(48) << entries[i].name << " " << std::setw(5) << entries[i].dtype << " "
        << shape_text(entries[i].shape) << "\n";
  }
  if (shown < entries.size()) out << "  ... " << entries.size() - shown << " more (--all lists them)\n";
  const std::string damage = privacy_damage(file.metadata());
  return damage.empty() ? "" : path.string() + ": " + damage;
}

// Everything shown, then refused: weights whose guarantee cannot be read are not to be published.
// `damages`: inspect_file's answers, "" for a file whose metadata reads.
void refuse_damaged(const std::vector<std::string>& damages) {
  std::string all;
  for (const auto& d : damages)
    if (!d.empty()) all += (all.empty() ? "" : "; ") + d;
  if (!all.empty()) throw UsageError("weights inspect: " + all + ": the guarantee cannot be read");
}

// A diffusers folder's config.json: what inspect says of it, and for a UNet2DModel that privdiff's
// diffusers_unet model runs, the recipe tables that fine-tune it.
struct DiffusersFolder {
  std::string architecture;
  std::string recipe;
};

DiffusersFolder diffusers_folder(const fs::path& dir) {
  const fs::path file = dir / "config.json";
  std::string name;
  try {
    name = diffusers_class_name(file);
  } catch (const std::runtime_error& e) {
    throw UsageError(std::string("weights inspect: ") + e.what());
  }
  if (name == "AutoencoderKL") {
    try {
      sdk::diffusion::diffusers_autoencoder_kl_config(sdk::read_file(file), file.string());
      return {"diffusers AutoencoderKL (config.json), which privdiff's diffusers_unet model uses as its autoencoder "
              "(autoencoder = \"" + dir.string() + "\")", ""};
    } catch (const std::invalid_argument& e) {
      return {"diffusers AutoencoderKL (config.json), which privdiff's port cannot run: " + std::string(e.what()), ""};
    }
  }
  if (name != "UNet2DModel" && name != "UNet2DConditionModel") {
    return {"diffusers " + name + " (config.json); privdiff has no model plugin for it yet", ""};
  }
  // Stable Diffusion's UNet is read with its pipeline's VAE and text encoder, the folder above it.
  const fs::path pipeline = fs::absolute(dir).parent_path();
  const bool in_pipeline = name == "UNet2DConditionModel" && fs::is_regular_file(pipeline / "model_index.json");
  try {
    const WeightsImport runnable = import_weights(in_pipeline ? pipeline : dir, std::nullopt, std::nullopt);
    return {runnable.architecture, runnable.recipe};
  } catch (const std::runtime_error& e) {
    return {"diffusers " + name + " (config.json), which privdiff's diffusers_unet model cannot run: " + std::string(e.what()), ""};
  }
}

void inspect(const fs::path& path, bool all) {
  if (!fs::exists(path)) throw UsageError("weights inspect: " + path.string() + " does not exist");
  if (!fs::is_directory(path)) return refuse_damaged({inspect_file(path, "", all, std::cout)});
  DiffusersFolder diffusers;
  if (fs::is_regular_file(path / "config.json")) diffusers = diffusers_folder(path);
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(path)) {
    if (entry.path().extension() == ".safetensors") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    throw UsageError("weights inspect: no .safetensors file in " + path.string() +
                     (fs::exists(path / "checkpoint.pt") ? " (a privdiff run: privdiff weights export " + path.string() +
                                                               " -o DIR writes its model as safetensors)"
                                                         : ""));
  }
  // A diffusers config.json describes the folder's diffusion_pytorch_model.safetensors, not every file
  // beside it (a test's reference outputs, say): those are recognised on their own.
  std::vector<std::string> damages;
  for (const auto& file : files) {
    const bool described = file.filename() == "diffusion_pytorch_model.safetensors";
    damages.push_back(inspect_file(file, described ? diffusers.architecture : "", all, std::cout));
  }
  if (!diffusers.recipe.empty()) std::cout << "\nto fine-tune it under DP, a recipe's tables:\n" << diffusers.recipe;
  refuse_damaged(damages);
}

void export_run(const std::string& source, const std::string& format, const fs::path& out, const GlobalOptions& global) {
  const RunFiles files = run_files(source, "weights export");
  ComponentRegistry registry;
  const Recipe recipe = load_recipe(files.recipe.string(), {}, global, registry);
  if (!recipe.model) throw UsageError("weights export: " + files.recipe.string() + " has no [model]");
  // The guarantee, by the release gate from the run's ledger; first: a checkpoint of another run is
  // refused as that, not as weights of another shape.
  RunGuarantee guarantee;
  try {
    guarantee = run_guarantee(files.run_dir, files.checkpoint, recipe, registry);
  } catch (const std::runtime_error& err) {
    throw UsageError(std::string("weights export: ") + err.what());
  }
  std::string diffusers_config;
  if (format == "diffusers") {
    if (recipe.model->id != "diffusers_unet") {
      throw UsageError("weights export --format diffusers: the run's model is " + recipe.model->id + ", which has no "
                       "diffusers counterpart (a diffusers_unet model has); --format safetensors writes its weights with "
                       "the privacy guarantee and a model card");
    }
    fs::path config = recipe.model->config.get_string("config");
    if (fs::is_directory(config)) config /= "config.json";
    diffusers_config = sdk::read_file(config);
  }
  auto model = create_model(recipe, registry);
  try {
    load_model_weights(files.checkpoint, *model);
  } catch (const std::runtime_error& e) {
    throw UsageError(std::string("weights export: ") + e.what());
  }
  ModelExport e;
  try {
    e = release::export_run(files.run_dir, *model, recipe, guarantee.statement, guarantee.ledger);
  } catch (const std::runtime_error& err) {
    throw UsageError(std::string("weights export: ") + err.what());
  }
  if (!diffusers_config.empty()) fold_adapters(e, model->module());  // diffusers' names only
  const fs::path weights_file = out / (diffusers_config.empty() ? "model.safetensors" : "diffusion_pytorch_model.safetensors");
  if (fs::exists(weights_file)) {
    throw UsageError("weights export: " + weights_file.string() + " exists; choose another -o DIR");
  }
  write_model_export(e, out, diffusers_config);
  std::cout << "wrote " << weights_file.string() << " (" << e.tensors.size() << " tensors), "
            << (out / "README.md").string() << " and " << (out / "privdiff-recipe.toml").string() << "\n"
            << privacy_line(e.metadata) << "\n";
}

void add_import_command(CLI::App& weights, int& exit_code) {
  struct ImportArgs {
    std::string source, out, recipe;
    std::int64_t image_size = 0;
  };
  auto args = std::make_shared<ImportArgs>();
  CLI::App* cmd = weights.add_subcommand(
      "import", "Check outside weights against the privdiff model that runs them (every tensor by name and shape) and "
                "print the recipe tables that start a run from them");
  cmd->add_option("SRC", args->source, "a diffusers UNet2DModel folder or pipeline folder (Stable Diffusion's included), or DPDM's network as safetensors "
                                       "(scripts/convert_to_safetensors.py --dpdm)")->required();
  cmd->add_option("--image-size", args->image_size, "the images' height and width (DPDM's weights do not record it; "
                                                    "diffusers: the config's sample_size)")->check(at_least(1));
  cmd->add_option("-o,--out", args->out, "also write the weights under the model's own names to DIR/model.safetensors");
  cmd->add_option("--recipe", args->recipe, "also write the recipe tables to FILE (a recipe privdiff sample runs; add "
                                            "[data] and [[stage]] to fine-tune)");
  cmd->callback([args, &exit_code] {
    if (!args->recipe.empty() && fs::exists(args->recipe)) {
      throw UsageError("weights import --recipe: " + args->recipe + " exists (not overwritten)");
    }
    std::error_code ec;
    if (!args->out.empty() && fs::exists(args->out) && !(fs::is_directory(args->out) && fs::is_empty(args->out, ec))) {
      throw UsageError("weights import -o: " + args->out + " exists and is not an empty folder (nothing in it is "
                       "overwritten; give a new folder)");
    }
    WeightsImport result;
    try {
      result = import_weights(args->source, args->image_size > 0 ? std::optional<std::int64_t>(args->image_size) : std::nullopt,
                              args->out.empty() ? std::nullopt : std::optional<fs::path>(args->out));
    } catch (const std::runtime_error& e) {
      throw UsageError(std::string("weights import: ") + e.what());
    }
    std::cout << args->source << ": " << result.architecture << "; every tensor loads by name and shape\n";
    if (!result.written.empty()) std::cout << "wrote " << result.written.string() << "\n";
    std::cout << "\nto start a run from it, a recipe's tables:\n" << result.recipe;
    if (!args->recipe.empty()) {
      sdk::write_file_atomically(args->recipe, "# privdiff weights import " + args->source + "\n" + result.recipe);
      std::cout << "wrote " << args->recipe << " (privdiff sample " << args->recipe << " samples the model)\n";
    }
    exit_code = exit_ok;
  });
}

}  // namespace

CLI::App* add_weights_command(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  CLI::App* weights = app.add_subcommand("weights", "Inspect or import outside weights, or export a run's model with its privacy guarantee");
  weights->require_subcommand(1);
  auto path = std::make_shared<std::string>();
  auto all = std::make_shared<bool>(false);
  CLI::App* inspect_cmd = weights->add_subcommand(
      "inspect", "List a safetensors file's tensors, dtypes, shapes and metadata (or those of a folder's files) and the "
                 "architecture recognised");
  inspect_cmd->add_option("PATH", *path, "a .safetensors file, or a folder holding them (a privdiff export, a diffusers model)")
      ->required();
  inspect_cmd->add_flag("--all", *all, "list every tensor (default: the first 40 by name)");
  inspect_cmd->callback([path, all, &exit_code] {
    try {
      inspect(*path, *all);
    } catch (const std::runtime_error& e) {
      if (dynamic_cast<const UsageError*>(&e)) throw;
      throw UsageError(std::string("weights inspect: ") + e.what());
    }
    exit_code = exit_ok;
  });
  add_import_command(*weights, exit_code);
  struct ExportArgs {
    std::string source, format = "safetensors", out;
  };
  auto args = std::make_shared<ExportArgs>();
  CLI::App* export_cmd = weights->add_subcommand(
      "export", "Write a finished run's model as safetensors, with its privacy guarantee (epsilon, delta, accountant, "
                "data, caveats, ledger) in the metadata and a README.md model card");
  export_cmd->add_option("RUN", args->source, "run directory (its checkpoint.pt) or a checkpoint file")->required();
  export_cmd->add_option("--format", args->format,
                         "safetensors (default), or diffusers (a diffusers_unet model: a folder UNet2DModel.from_pretrained loads)")->check(CLI::IsMember({"safetensors", "diffusers"}));
  export_cmd->add_option("-o,--out", args->out, "the folder to write (created)")->required();
  export_cmd->callback([args, &global, &exit_code] {
    export_run(args->source, args->format, args->out, global);
    exit_code = exit_ok;
  });
  return weights;
}

}  // namespace privdiff::core::cli
