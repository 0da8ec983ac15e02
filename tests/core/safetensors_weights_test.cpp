// Initial weights from safetensors ([run] init_from): loaded by name into a model, exported again
// bit for bit, and refused (model unchanged) when a name is missing or extra or a shape differs.
#include "../fixtures/models/tiny_checkpoint_model.hpp"
#include "weights/safetensors_weights.hpp"

#include <privdiff/diffusion/pretrained_weights.hpp>
#include <privdiff/io/atomic_file.hpp>
#include <privdiff/io/safetensors.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

namespace privdiff::core {
namespace {

namespace fs = std::filesystem;
using Tensors = std::vector<std::pair<std::string, at::Tensor>>;

Tensors state_of(torch::nn::Module& module) {
  Tensors out;
  for (const auto& p : module.named_parameters(true)) out.emplace_back(p.key(), p.value().detach().clone());
  for (const auto& b : module.named_buffers(true)) out.emplace_back(b.key(), b.value().detach().clone());
  return out;
}

struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("privdiff-st-weights-" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() { fs::remove_all(dir); }
};

// What load_pretrained_weights says of `tensors` written as a file ("" when it loads them).
std::string refusal_of(const Tensors& tensors, const Scratch& scratch, torch::nn::Module& module) {
  const fs::path file = scratch.dir / "w.safetensors";
  sdk::write_safetensors(file, tensors);
  try {
    sdk::load_pretrained_weights(file, module);
  } catch (const std::runtime_error& e) {
    return std::string(e.what());
  }
  return std::string();
}

TEST(SafetensorsWeights, ExportImportExportIsBitIdentical) {
  Scratch scratch;
  test::TinyCheckpointModel source;
  at::manual_seed(3);
  {
    at::NoGradGuard no_grad;
    for (auto& p : source.module().parameters()) p.normal_();
    source.net->count.fill_(7);
  }
  const std::map<std::string, std::string> metadata{{"privdiff.model", "tiny"}};
  const fs::path first = scratch.dir / "first.safetensors";
  sdk::write_safetensors(first, state_of(source.module()), metadata);
  test::TinyCheckpointModel target;  // other random weights
  sdk::load_pretrained_weights(first, target.module());
  EXPECT_EQ(sdk::safetensors_bytes(state_of(target.module()), metadata), sdk::safetensors_bytes(state_of(source.module()), metadata));
  sdk::write_safetensors(scratch.dir / "second.safetensors", state_of(target.module()), metadata);
  EXPECT_EQ(sdk::SafetensorsFile(scratch.dir / "second.safetensors").tensors().size(), 4U);
  // Half-precision weights are converted to the model's dtype on the way in.
  Tensors half = state_of(source.module());
  for (auto& [name, t] : half) t = t.to(at::kHalf);
  sdk::write_safetensors(scratch.dir / "half.safetensors", half);
  sdk::load_pretrained_weights(scratch.dir / "half.safetensors", target.module());
  EXPECT_EQ(target.net->scale.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::allclose(target.net->scale, source.net->scale, 1e-3, 1e-3));
}

TEST(SafetensorsWeights, AMismatchIsRefusedByNameAndLeavesTheModelAsItWas) {
  Scratch scratch;
  test::TinyCheckpointModel model;
  const Tensors before = state_of(model.module());
  auto refusal = [&](const Tensors& tensors) { return refusal_of(tensors, scratch, model.module()); };
  Tensors missing = before;
  missing.pop_back();  // no "count"
  EXPECT_NE(refusal(missing).find("has no 'count'"), std::string::npos);
  Tensors extra = before;
  extra.emplace_back("tail.weight", at::ones({1}));
  EXPECT_NE(refusal(extra).find("has 'tail.weight', which this recipe's [model] lacks"), std::string::npos);
  Tensors wide = before;
  for (auto& [name, t] : wide) {
    if (name == "head.weight") t = at::ones({2, 4});
    else t = t + 1;  // every other tensor would change the model
  }
  EXPECT_NE(refusal(wide).find("'head.weight' is [2, 4] in"), std::string::npos);
  const Tensors after = state_of(model.module());
  for (std::size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(at::equal(before[i].second, after[i].second)) << before[i].first;
  EXPECT_FALSE(safetensors_init_file(scratch.dir).has_value());  // no model.safetensors in it
  sdk::write_safetensors(scratch.dir / "model.safetensors", before);
  EXPECT_EQ(safetensors_init_file(scratch.dir), scratch.dir / "model.safetensors");
  EXPECT_EQ(safetensors_init_file(scratch.dir / "w.safetensors"), scratch.dir / "w.safetensors");
}

// Integer tensors for float parameters, and NaN or infinite weights, are refused by name (issue 52,
// finding 5); a PyTorch checkpoint handed in as safetensors is named as such.
TEST(SafetensorsWeights, IntegerOrNonFiniteWeightsAreRefused) {
  Scratch scratch;
  test::TinyCheckpointModel model;
  const Tensors before = state_of(model.module());
  auto refusal = [&](const Tensors& tensors) { return refusal_of(tensors, scratch, model.module()); };
  auto changed = [&](const std::function<at::Tensor(const at::Tensor&)>& how) {
    Tensors t = before;
    for (auto& [name, value] : t) {
      if (name == "head.weight") value = how(value);
    }
    return t;
  };
  EXPECT_NE(refusal(changed([](const at::Tensor& w) { return w.to(at::kInt); })).find("'head.weight' is Int in"),
            std::string::npos);
  const std::string nan = refusal(changed([](const at::Tensor& w) { return w.clone().fill_(std::nan("")); }));
  EXPECT_NE(nan.find("'head.weight' in"), std::string::npos) << nan;
  EXPECT_NE(nan.find("NaN or infinite values"), std::string::npos) << nan;
  const std::string inf = refusal(changed([](const at::Tensor& w) {
    at::Tensor v = w.clone();
    v.view(-1)[0] = std::numeric_limits<float>::infinity();
    return v;
  }));
  EXPECT_NE(inf.find("holds 1 NaN or infinite values"), std::string::npos) << inf;
  EXPECT_EQ(refusal(changed([](const at::Tensor& w) { return w.to(at::kDouble); })), "");  // other float widths load
  const fs::path checkpoint = scratch.dir / "model.pt";
  sdk::write_file_atomically(checkpoint, std::string("PK\x03\x04", 4) + std::string(60, 'x'));
  try {
    sdk::load_pretrained_weights(checkpoint, model.module());
    ADD_FAILURE() << "a zip archive was read as safetensors";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("a PyTorch checkpoint"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace privdiff::core
