#include "run/run_checkpoint.hpp"

#include "util/content_hash.hpp"

#include "util/atomic_file.hpp"
#include "util/error_text.hpp"
#include "util/shape_text.hpp"

#include <privdiff/engine/device.hpp>
#include <privdiff/engine/linear_adapter.hpp>

#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <set>

#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

namespace {
constexpr std::int64_t format_version = 1;

// The file is LibTorch's archive (a zip) followed by a trailer: this magic and the FNV-1a 64 hash
// of the archive's bytes. LibTorch's reader checks no CRCs and its TorchScript type parser crashes
// on some damaged archives (found by fuzz/checkpoint_fuzzer.cpp), so a checkpoint is verified
// before LibTorch sees it. Damage is what this catches; it is no defence against a crafted file
// (like any LibTorch archive, load checkpoints only from sources you trust).
constexpr char trailer_magic[8] = {'p', 'r', 'i', 'v', 'd', 'i', 'f', '1'};
constexpr std::size_t trailer_size = sizeof trailer_magic + 8;

std::string trailer_for(const std::string& archive) {
  std::string trailer(trailer_magic, sizeof trailer_magic);
  const std::uint64_t h = fnv1a64(archive.data(), archive.size());
  for (int byte = 0; byte < 8; ++byte) trailer.push_back(static_cast<char>((h >> (8 * byte)) & 0xFF));
  return trailer;
}
}  // namespace

// Tensors land on `device` whatever device wrote them: a checkpoint written on a GPU loads on a
// CPU-only machine, and one written on the CPU resumes a GPU run with its optimizer state there.
torch::serialize::InputArchive open_checkpoint_archive(const fs::path& path, const c10::Device& device) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw std::runtime_error("no checkpoint at " + path.string());
  const std::string contents = read_file(path);
  // LibTorch's archives are zip files: anything else is refused with a plain message.
  if (contents.compare(0, 4, std::string("PK\x03\x04", 4)) != 0) {
    throw std::runtime_error(path.string() + ": not a privdiff checkpoint (not a zip archive)");
  }
  const std::size_t archive_size = contents.size() >= trailer_size ? contents.size() - trailer_size : 0;
  if (contents.compare(archive_size, sizeof trailer_magic, trailer_magic, sizeof trailer_magic) != 0) {
    throw std::runtime_error(path.string() + ": not a readable privdiff checkpoint (truncated, or written by "
                             "privdiff < 0.6: no checksum at its end)");
  }
  if (contents.compare(archive_size, trailer_size, trailer_for(contents.substr(0, archive_size))) != 0) {
    throw std::runtime_error(path.string() + ": not a readable privdiff checkpoint (damaged: its checksum does not "
                             "match)");
  }
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(contents.data(), archive_size, device);
  } catch (const std::exception& e) {
    throw std::runtime_error(path.string() + ": not a readable privdiff checkpoint (" + first_line(e) + ")");
  }
  return archive;
}

void save_checkpoint(const fs::path& path, const CheckpointPosition& position, sdk::Model& model,
                     const sdk::StateWriter& mechanism_state) {
  torch::serialize::OutputArchive archive;
  archive.write("format_version", c10::IValue(format_version));
  archive.write("stage", c10::IValue(position.stage));
  archive.write("step", c10::IValue(position.step));
  archive.write("metrics_bytes", c10::IValue(static_cast<std::int64_t>(position.metrics_bytes)));
  archive.write("wall_seconds", c10::IValue(position.wall_seconds));
  archive.write("cpu_seconds", c10::IValue(position.cpu_seconds));
  archive.write("recipe_sha", c10::IValue(position.recipe_sha));
  archive.write("ledger", c10::IValue(position.ledger_json));
  archive.write("noise_multipliers", c10::IValue(position.noise_multipliers));
  archive.write("stage_seconds", c10::IValue(position.stage_seconds));
  archive.write("data_fingerprint", c10::IValue(position.data_fingerprint));
  archive.write("component_libraries", c10::IValue(position.component_libraries));
  archive.write("global_generator", at::detail::getDefaultCPUGenerator().get_state());
  torch::serialize::OutputArchive model_archive(archive.compilation_unit());
  model.module().save(model_archive);
  archive.write("model", model_archive);
  archive.write("has_mechanism_state", c10::IValue(static_cast<bool>(mechanism_state)));
  if (mechanism_state) {
    torch::serialize::OutputArchive state(archive.compilation_unit());
    mechanism_state(state);
    archive.write("mechanism", state);
  }
  save_checkpoint_archive(path, archive);
}

void save_checkpoint_archive(const fs::path& path, torch::serialize::OutputArchive& archive) {
  std::ostringstream bytes;
  try {
    archive.save_to(bytes);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot serialise checkpoint " + path.string() + ": " + first_line(e));
  }
  std::string contents = bytes.str();
  contents += trailer_for(contents);
  write_file_atomically(path, contents);
}

namespace {


// Runs `read` (which reads from an archive); LibTorch's own errors about what it finds there
// (a wrong type, a malformed tensor or generator state) become std::runtime_error naming the file,
// like every other refusal of a damaged checkpoint.
template <typename Read>
auto reading(const fs::path& path, Read&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const std::runtime_error&) {
    throw;
  } catch (const std::exception& e) {
    throw std::runtime_error(path.string() + ": damaged privdiff checkpoint (" + first_line(e) + ")");
  }
}

template <typename T>
T read_value(torch::serialize::InputArchive& archive, const std::string& key, const fs::path& path) {
  c10::IValue value;
  if (!reading(path, [&] { return archive.try_read(key, value); })) {
    throw std::runtime_error(path.string() + ": checkpoint has no '" + key + "'");
  }
  return reading(path, [&] { return value.to<T>(); });
}

void load_model(torch::serialize::InputArchive& archive, sdk::Model& model, const fs::path& path) {
  torch::serialize::InputArchive model_archive;
  if (!reading(path, [&] { return archive.try_read("model", model_archive); })) {
    throw std::runtime_error(path.string() + ": checkpoint has no model");
  }
  try {
    model.module().load(model_archive);
  } catch (const std::exception& e) {
    throw std::runtime_error(path.string() + ": the checkpoint's weights do not fit this recipe's model (" +
                             first_line(e) + ")");
  }
}

// Copies `archive` (a module's saved state) into `module`, name by name (`prefix` for messages).
void copy_weights(torch::serialize::InputArchive& archive, torch::nn::Module& module, const std::string& prefix,
                  const fs::path& path) {
  std::set<std::string> known;
  auto copy = [&](const std::string& name, at::Tensor& target, bool is_buffer) {
    known.insert(name);
    at::Tensor saved;
    if (!archive.try_read(name, saved, is_buffer)) {
      throw std::runtime_error(path.string() + " has no '" + prefix + name + "': the source model differs from this "
                               "recipe's [model]");
    }
    if (!saved.sizes().equals(target.sizes())) {
      throw std::runtime_error("'" + prefix + name + "' is " + shape_text(saved.sizes()) + " in " + path.string() +
                               " but " + shape_text(target.sizes()) + " in this recipe's [model] (the first mismatch; the "
                               "model's configuration must match the source run's)");
    }
    torch::NoGradGuard no_grad;
    target.copy_(saved);
  };
  for (auto& p : module.named_parameters(false)) copy(p.key(), p.value(), false);
  for (auto& b : module.named_buffers(false)) copy(b.key(), b.value(), true);
  for (const auto& child : module.named_children()) {
    known.insert(child.key());
    torch::serialize::InputArchive child_archive;
    if (!archive.try_read(child.key(), child_archive)) {
      if (sdk::engine::is_adapter(*child.value())) continue;  // a new adapter on a model trained without one
      throw std::runtime_error(path.string() + " has no '" + prefix + child.key() + "': the source model differs "
                               "from this recipe's [model]");
    }
    copy_weights(child_archive, *child.value(), prefix + child.key() + ".", path);
  }
  for (const auto& key : archive.keys()) {
    if (!known.count(key)) {
      throw std::runtime_error(path.string() + " has '" + prefix + key + "', which this recipe's [model] lacks "
                               "(the source model differs)");
    }
  }
}

}  // namespace

void load_initial_weights(const fs::path& path, torch::nn::Module& module) {
  torch::serialize::InputArchive archive = open_checkpoint_archive(path, sdk::engine::module_device(module));
  torch::serialize::InputArchive model_archive;
  if (!reading(path, [&] { return archive.try_read("model", model_archive); })) {
    throw std::runtime_error(path.string() + ": checkpoint has no model");
  }
  reading(path, [&] { copy_weights(model_archive, module, "", path); });
}

void load_initial_weights(const fs::path& path, sdk::Model& model) { load_initial_weights(path, model.module()); }

LoadedCheckpoint load_checkpoint(const fs::path& path, sdk::Model& model) {
  torch::serialize::InputArchive archive = open_checkpoint_archive(path, sdk::engine::module_device(model.module()));
  if (read_value<std::int64_t>(archive, "format_version", path) != format_version) {
    throw std::runtime_error(path.string() + ": checkpoint format version is not " + std::to_string(format_version));
  }
  LoadedCheckpoint loaded;
  CheckpointPosition& p = loaded.position;
  p.stage = read_value<std::int64_t>(archive, "stage", path);
  p.step = read_value<std::int64_t>(archive, "step", path);
  p.metrics_bytes = static_cast<std::uint64_t>(read_value<std::int64_t>(archive, "metrics_bytes", path));
  p.wall_seconds = read_value<double>(archive, "wall_seconds", path);
  p.recipe_sha = read_value<std::string>(archive, "recipe_sha", path);
  p.ledger_json = read_value<std::string>(archive, "ledger", path);
  p.noise_multipliers = read_value<std::vector<double>>(archive, "noise_multipliers", path);
  reading(path, [&] {
    if (c10::IValue v; archive.try_read("data_fingerprint", v)) p.data_fingerprint = v.toStringRef();
    if (c10::IValue v; archive.try_read("component_libraries", v)) p.component_libraries = v.toStringRef();
    if (c10::IValue v; archive.try_read("cpu_seconds", v)) p.cpu_seconds = v.toDouble();
    if (c10::IValue v; archive.try_read("stage_seconds", v)) p.stage_seconds = v.toDoubleVector();
  });
  // Everything is read and checked before the model or the global generator changes: a damaged
  // checkpoint is refused without leaving either half-restored.
  const at::Tensor generator_state = reading(path, [&] {
    at::Tensor state;
    archive.read("global_generator", state);
    state = state.to(at::kCPU);
    at::detail::createCPUGenerator().set_state(state);  // throws on a malformed state
    return state;
  });
  if (read_value<bool>(archive, "has_mechanism_state", path)) {
    loaded.mechanism_state = std::make_unique<torch::serialize::InputArchive>();
    reading(path, [&] { archive.read("mechanism", *loaded.mechanism_state); });
  }
  load_model(archive, model, path);
  at::Generator global_generator = at::detail::getDefaultCPUGenerator();  // shares the global one
  global_generator.set_state(generator_state);
  return loaded;
}

std::string read_checkpoint_ledger(const fs::path& path) {
  torch::serialize::InputArchive archive = open_checkpoint_archive(path, c10::Device(c10::kCPU));
  return read_value<std::string>(archive, "ledger", path);
}

std::string read_checkpoint_recipe_sha(const fs::path& path) {
  torch::serialize::InputArchive archive = open_checkpoint_archive(path, c10::Device(c10::kCPU));
  c10::IValue value;
  if (!reading(path, [&] { return archive.try_read("recipe_sha", value); })) return "";
  return reading(path, [&] { return value.toStringRef(); });
}

void load_model_weights(const fs::path& path, sdk::Model& model) {
  torch::serialize::InputArchive archive = open_checkpoint_archive(path, sdk::engine::module_device(model.module()));
  load_model(archive, model, path);
}

}  // namespace privdiff::core
