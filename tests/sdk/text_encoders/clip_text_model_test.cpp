// privdiff's CLIPTextModel against transformers' own: tiny random models saved by transformers 4.57.3
// (scripts/make_text_fixtures.sh) load by name with every tensor used and give its last hidden state
// and pooled output within 1e-5 relative, with and without a padding mask, in SD 1.x's layout
// (quick_gelu, the legacy eos rule) and SD 2.x's (gelu, eos_token_id); its per-example gradients equal
// the micro-batch oracle's; configs it cannot run are refused by key.
#include <privdiff/diffusion/pretrained_weights.hpp>
#include <privdiff/io/atomic_file.hpp>
#include <privdiff/io/safetensors.hpp>
#include <privdiff/text_encoders/clip_text_model.hpp>

#include "../engine/oracle_networks.hpp"
#include "../relative_error.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace privdiff::sdk::text_encoders {
namespace {

namespace fs = std::filesystem;
const fs::path fixtures = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "text";

using privdiff::testing::relative_error;

std::string refusal(const std::string& json) {
  try {
    clip_text_config(json, "config.json");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(accepted)";
}

class ClipTextFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(ClipTextFixture, GivesTransformersOutputs) {
  const fs::path folder = fixtures / GetParam();
  ClipTextModel model(clip_text_config(read_file(folder / "config.json"), (folder / "config.json").string()));
  load_pretrained_weights(folder / "model.safetensors", model);  // every tensor by name, none left over
  EXPECT_EQ(SafetensorsFile(folder / "model.safetensors").entries().size(), model.named_parameters().size());
  const SafetensorsFile reference(folder / "reference.safetensors");
  at::NoGradGuard no_grad;
  const ClipTextOutput plain = model.forward(reference.tensor("ids"));
  EXPECT_LT(relative_error(plain.last_hidden_state, reference.tensor("last_hidden_state")), 1e-5) << GetParam();
  EXPECT_LT(relative_error(plain.pooled, reference.tensor("pooled")), 1e-5) << GetParam();
  const ClipTextOutput masked = model.forward(reference.tensor("ids"), reference.tensor("mask"));
  EXPECT_LT(relative_error(masked.last_hidden_state, reference.tensor("masked_last_hidden_state")), 1e-5);
  EXPECT_LT(relative_error(masked.pooled, reference.tensor("masked_pooled")), 1e-5);
  EXPECT_GT(relative_error(masked.last_hidden_state, plain.last_hidden_state), 1e-3) << "the mask should matter";
}

// SD 1.x's text_encoder/model.safetensors (transformers before 4.31) also holds
// text_model.embeddings.position_ids, 0 … 76: skipped when it is that, refused when it is not.
TEST(ClipTextModel, LoadsOlderCheckpointsWithTheirPositionIds) {
  const fs::path folder = fixtures / "clip_text_sd1";
  ClipTextModel model(clip_text_config(read_file(folder / "config.json"), "config.json"));
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& p : model.named_parameters()) tensors.emplace_back(p.key(), p.value().detach());
  const fs::path dir = fs::temp_directory_path() / ("privdiff_clip_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  tensors.emplace_back("text_model.embeddings.position_ids", at::arange(16, at::kLong).reshape({1, 16}));
  write_safetensors(dir / "old.safetensors", tensors);
  EXPECT_NO_THROW(load_pretrained_weights(dir / "old.safetensors", model));
  tensors.back().second = at::zeros({1, 16}, at::kLong);
  write_safetensors(dir / "wrong.safetensors", tensors);
  EXPECT_THROW(load_pretrained_weights(dir / "wrong.safetensors", model), std::runtime_error);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ClipTextFixture, ::testing::Values("clip_text_sd1", "clip_text_sd2"));

// DP training of the text encoder (DP-LDM trains BERTEmbedder's every layer): the closed-form
// per-example gradients of every parameter, the token and position embeddings included, equal one
// example at a time through autograd.
TEST(ClipTextModel, PerExampleGradientsEqualTheOracle) {
  using namespace privdiff::testing::oracle;
  Net net;
  ClipTextConfig c;
  c.vocab_size = 11, c.hidden_size = 8, c.intermediate_size = 12, c.layers = 2, c.heads = 2, c.max_position_embeddings = 6;
  auto encoder = net.register_module("encoder", std::make_shared<ClipTextModel>(c));
  net.body = [encoder](const at::Tensor& x) { return encoder->forward(x.to(at::kLong)).last_hidden_state; };
  // The key projection's bias adds one constant to a query's every score, which softmax ignores: its
  // gradient is zero (in transformers too). Frozen, so that every gradient compared is non-trivial.
  for (auto& p : net.named_parameters())
    if (p.key().find("k_proj.bias") != std::string::npos) p.value().set_requires_grad(false);
  const at::Tensor ids = at::randint(0, 11, {4, 6}, at::TensorOptions().dtype(at::kDouble));
  expect_matches_oracle(net, ids);
  EXPECT_TRUE(engine::has_closed_form(net));
}

TEST(ClipTextConfig, RefusesWhatThePortCannotRunByKey) {
  const std::string ok = R"("model_type": "clip_text_model", "hidden_size": 32, "num_attention_heads": 4)";
  EXPECT_EQ(refusal("{" + ok + "}"), "(accepted)");
  EXPECT_EQ(refusal(R"({"model_type": "bert"})"),
            "config.json: model_type is 'bert', not 'clip_text_model' (a CLIPTextModel's config.json)");
  EXPECT_EQ(refusal("{" + ok + R"(, "hidden_act": "relu"})"),
            "config.json: hidden_act = 'relu' is not supported (quick_gelu or gelu)");
  EXPECT_EQ(refusal(R"({"model_type": "clip_text_model", "hidden_size": 30, "num_attention_heads": 4})"),
            "config.json: num_attention_heads = 4 does not divide hidden_size = 30");
  EXPECT_EQ(refusal("{" + ok + R"(, "num_hidden_layers": 0})"), "config.json: num_hidden_layers = 0: expected a positive size");
  EXPECT_EQ(refusal("{not json").rfind("config.json: not valid JSON", 0), 0u);
  EXPECT_EQ(refusal("{" + ok + R"(, "intermediate_size": "512"})"), "config.json: intermediate_size = \"512\": expected a number");
  EXPECT_EQ(refusal("[1, 2]"), "config.json: not a JSON object (a CLIPTextModel's config.json)");
}

TEST(ClipTextModel, RefusesIdsItHasNoEmbeddingFor) {
  ClipTextConfig c;
  c.vocab_size = 10, c.hidden_size = 8, c.intermediate_size = 8, c.layers = 1, c.heads = 2, c.max_position_embeddings = 4;
  ClipTextModel model(c);
  EXPECT_THROW(model.forward(at::full({1, 3}, 10, at::kLong)), std::invalid_argument);
  EXPECT_THROW(model.forward(at::zeros({1, 5}, at::kLong)), std::invalid_argument);
  EXPECT_THROW(model.forward(at::zeros({1, 3}, at::kInt)), std::invalid_argument);
  EXPECT_EQ(model.forward(at::zeros({2, 4}, at::kLong)).pooled.sizes(), (std::vector<std::int64_t>{2, 8}));
}

}  // namespace
}  // namespace privdiff::sdk::text_encoders
