// checkpoint.pt: what is saved comes back, and a damaged file is refused with std::runtime_error
// naming it, before the model or the global generator changes (regressions of the checkpoint
// fuzzer's findings: fuzz/checkpoint_fuzzer.cpp).
#include "../fixtures/models/tiny_checkpoint_model.hpp"
#include "util/atomic_file.hpp"
#include "run/run_checkpoint.hpp"
#include "test_support.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/serialize/output-archive.h>

#include <cmath>
#include <fstream>
#include <unistd.h>

namespace privdiff::core {
namespace {

namespace fs = std::filesystem;
using test::TinyCheckpointModel;

class RunCheckpointTest : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("privdiff-checkpoint-test-" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }

  // Every key load_checkpoint reads, with `generator_state` as the global generator.
  fs::path write_raw(const std::string& name, const at::Tensor& generator_state, const c10::IValue& stage) {
    TinyCheckpointModel source;
    torch::serialize::OutputArchive archive;
    archive.write("format_version", c10::IValue(std::int64_t{1}));
    archive.write("stage", stage);
    archive.write("step", c10::IValue(std::int64_t{3}));
    archive.write("metrics_bytes", c10::IValue(std::int64_t{0}));
    archive.write("wall_seconds", c10::IValue(1.0));
    archive.write("recipe_sha", c10::IValue(std::string("abc")));
    archive.write("ledger", c10::IValue(std::string("{}")));
    archive.write("noise_multipliers", c10::IValue(std::vector<double>{1.0}));
    archive.write("global_generator", generator_state);
    torch::serialize::OutputArchive model_archive(archive.compilation_unit());
    source.module().save(model_archive);
    archive.write("model", model_archive);
    archive.write("has_mechanism_state", c10::IValue(false));
    const fs::path path = dir / name;
    save_checkpoint_archive(path, archive);
    return path;
  }
};

at::Tensor global_generator_state() { return at::detail::getDefaultCPUGenerator().get_state(); }

TEST_F(RunCheckpointTest, WhatIsSavedComesBack) {
  TinyCheckpointModel saved;
  CheckpointPosition position;
  position.stage = 2;
  position.step = 5;
  position.ledger_json = R"({"events":[]})";
  position.noise_multipliers = {0.5};
  position.data_fingerprint = "data:10:ff";
  position.component_libraries = R"([{"kind":"mechanism","id":"dpsgd","library":"/p/libdpsgd.so","sha256":"ab"}])";
  position.stage_seconds = {12.5, std::nan("")};  // a finished stage, and one not started
  save_checkpoint(dir / "checkpoint.pt", position, saved, {});
  TinyCheckpointModel loaded;
  const LoadedCheckpoint checkpoint = load_checkpoint(dir / "checkpoint.pt", loaded);
  EXPECT_EQ(checkpoint.position.stage, 2);
  EXPECT_EQ(checkpoint.position.step, 5);
  EXPECT_EQ(checkpoint.position.ledger_json, position.ledger_json);
  EXPECT_EQ(checkpoint.position.data_fingerprint, "data:10:ff");
  EXPECT_EQ(checkpoint.position.component_libraries, position.component_libraries);
  ASSERT_EQ(checkpoint.position.stage_seconds.size(), 2u);
  EXPECT_EQ(checkpoint.position.stage_seconds[0], 12.5);
  EXPECT_TRUE(std::isnan(checkpoint.position.stage_seconds[1]));
  EXPECT_EQ(checkpoint.mechanism_state, nullptr);
  EXPECT_TRUE(torch::equal(loaded.net->head->weight, saved.net->head->weight));
}

TEST_F(RunCheckpointTest, AnOlderCheckpointWithoutStageTimesLoadsWithNone) {
  // privdiff 0.11 and before kept no per-stage time: a resumed stage then reports no examples/s.
  const fs::path path = write_raw("old.pt", global_generator_state(), c10::IValue(std::int64_t{0}));
  TinyCheckpointModel loaded;
  const LoadedCheckpoint old = load_checkpoint(path, loaded);
  EXPECT_TRUE(old.position.stage_seconds.empty());
  EXPECT_TRUE(old.position.component_libraries.empty());  // nor the components' libraries: resumed with a warning
}

TEST_F(RunCheckpointTest, AFileThatIsNotAnArchiveIsRefusedByName) {
  std::ofstream(dir / "checkpoint.pt") << "not a checkpoint";
  TinyCheckpointModel model;
  try {
    load_checkpoint(dir / "checkpoint.pt", model);
    FAIL() << "accepted a text file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint.pt: not a privdiff checkpoint (not a zip archive)"),
              std::string::npos) << e.what();
  }
}

TEST_F(RunCheckpointTest, ADamagedFileIsRefusedByItsChecksumBeforeLibTorchParsesIt) {
  // The fuzzer's finding: a few flipped bits in the TorchScript part of an archive crash LibTorch
  // 1.13's type parser (SEGV). The checksum refuses them first.
  TinyCheckpointModel saved;
  save_checkpoint(dir / "checkpoint.pt", CheckpointPosition{}, saved, {});
  std::string bytes = read_file(dir / "checkpoint.pt");
  const std::size_t code = bytes.find(".py");  // a TorchScript source file inside the archive
  ASSERT_NE(code, std::string::npos);
  bytes[code + 40] ^= 0x10;
  std::ofstream(dir / "checkpoint.pt", std::ios::binary) << bytes;
  TinyCheckpointModel model;
  try {
    load_checkpoint(dir / "checkpoint.pt", model);
    FAIL() << "accepted a damaged checkpoint";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("damaged: its checksum does not match"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "checkpoint.pt", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_THROW(load_checkpoint(dir / "checkpoint.pt", model), std::runtime_error);  // truncated
}

TEST_F(RunCheckpointTest, AMalformedGeneratorStateIsRefusedBeforeAnythingChanges) {
  // The fuzzer's finding: LibTorch's "Invalid mt19937 state" escaped as c10::Error after the
  // model's weights had already been replaced.
  const fs::path path = write_raw("checkpoint.pt", torch::zeros({16}, torch::kUInt8), c10::IValue(std::int64_t{0}));
  TinyCheckpointModel model;
  const at::Tensor weight_before = model.net->head->weight.clone();
  const at::Tensor generator_before = global_generator_state();
  try {
    load_checkpoint(path, model);
    FAIL() << "accepted a malformed generator state";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path.string() + ": damaged privdiff checkpoint"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(torch::equal(model.net->head->weight, weight_before));
  EXPECT_TRUE(torch::equal(global_generator_state(), generator_before));
}

TEST_F(RunCheckpointTest, AValueOfTheWrongTypeIsRefusedByName) {
  const fs::path path = write_raw("checkpoint.pt", global_generator_state(), c10::IValue(std::string("two")));
  TinyCheckpointModel model;
  EXPECT_THROW(load_checkpoint(path, model), std::runtime_error);
}

}  // namespace
}  // namespace privdiff::core
