#pragma once
// checkpoint.pt: everything a run needs to continue exactly where it stopped — the model's
// parameters and buffers, the mechanism's mid-stage state (optimizer, EMA, generator states),
// LibTorch's global generator (dropout), the privacy ledger, and where in the recipe it was.
// Written to a temporary file and renamed, so a crash leaves the previous checkpoint intact; a
// checksum at its end is verified before LibTorch parses it, so a damaged file is refused.

#include "util/content_hash.hpp"

#include <privdiff/components/mechanism.hpp>
#include <privdiff/components/model.hpp>

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace privdiff::core {

struct CheckpointPosition {
  std::int64_t stage = 0;          ///< the stage in progress (== #stages once all are done)
  std::int64_t step = 0;           ///< logical steps done in that stage
  std::uint64_t metrics_bytes = 0; ///< size of metrics.jsonl at this point (later lines are redone)
  double wall_seconds = 0;         ///< training time spent so far, over every session
  double cpu_seconds = 0;          ///< and the CPU time (0 in checkpoints of privdiff 0.11 and before)
  std::string recipe_sha;          ///< of recipe.toml, so an edited recipe is not resumed silently
  std::string ledger_json;         ///< the privacy ledger at this point
  std::vector<double> noise_multipliers;  ///< per stage (NaN for non-private ones), as calibrated
  /// Per stage, its training time so far over every session (NaN: none yet, or not recorded: absent
  /// in checkpoints of privdiff 0.11 and before): a resumed stage's examples/s counts all of it.
  std::vector<double> stage_seconds;
  /// What the stages train on (name, N, content hash): a run is only resumed on the same data —
  /// its ledger is about those records. Empty in checkpoints written before it existed.
  std::string data_fingerprint;
  /// The library (path, SHA-256) of every component the run uses, as JSON (loader/component_library.hpp):
  /// a run is only resumed with the code it ran. Empty in checkpoints written before it existed.
  std::string component_libraries;
};

/// Writes the checkpoint atomically. `mechanism_state` (may be empty) adds the state of a stage
/// stopped mid-way.
void save_checkpoint(const std::filesystem::path& path, const CheckpointPosition& position, sdk::Model& model,
                     const sdk::StateWriter& mechanism_state);

/// Writes `archive` as save_checkpoint writes its own: atomically, followed by a checksum that the
/// loaders verify before LibTorch parses the file.
void save_checkpoint_archive(const std::filesystem::path& path, torch::serialize::OutputArchive& archive);

/// A checkpoint file as LibTorch's archive, after its checksum is verified; tensors land on
/// `device`. Throws std::runtime_error naming the file when it is missing, damaged or not one.
torch::serialize::InputArchive open_checkpoint_archive(const std::filesystem::path& path, const c10::Device& device);

struct LoadedCheckpoint {
  CheckpointPosition position;
  /// The mechanism's mid-stage state; null when the checkpoint is at a stage boundary.
  std::unique_ptr<torch::serialize::InputArchive> mechanism_state;
};

/// Reads `path`: restores the model's parameters and buffers and the global generator, and returns
/// the rest. Throws std::runtime_error naming the file when it is missing, corrupt, or does not
/// fit the model.
LoadedCheckpoint load_checkpoint(const std::filesystem::path& path, sdk::Model& model);

/// The ledger JSON stored in a checkpoint, without loading the model. Throws std::runtime_error
/// naming the file when it is missing or unreadable.
std::string read_checkpoint_ledger(const std::filesystem::path& path);

/// The hash of the recipe.toml the checkpoint was trained under (CheckpointPosition::recipe_sha), without
/// loading the model; empty when it records none. Throws std::runtime_error naming the file when it is
/// missing or unreadable.
std::string read_checkpoint_recipe_sha(const std::filesystem::path& path);

/// Initialises `model` from a checkpoint's weights for [run] init_from: every parameter and buffer
/// must be there with the same shape, except an adapter's (the recipe's [adapter]) where the source
/// has none, which keeps its initial values (adapters start as the identity: the adapted model equals
/// the source); and the
/// checkpoint may hold nothing the model lacks. Throws std::runtime_error naming the first
/// mismatched parameter.
void load_initial_weights(const std::filesystem::path& path, sdk::Model& model);
/// The same into one module (a part of a model, Model::part_initialised_by), which must match the
/// saved model name by name.
void load_initial_weights(const std::filesystem::path& path, torch::nn::Module& module);

/// Loads only the model weights (for `privdiff sample`).
void load_model_weights(const std::filesystem::path& path, sdk::Model& model);

}  // namespace privdiff::core
