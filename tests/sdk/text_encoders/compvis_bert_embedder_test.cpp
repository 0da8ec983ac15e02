// privdiff's CompVis BERTEmbedder against CompVis's own code: a tiny random TransformerWrapper over the
// vendored x-transformers Encoder, built by CompVis's latent-diffusion at a506df5
// (scripts/make_text_fixtures.sh), loads by name under a checkpoint's names and gives its embeddings
// within 1e-5 relative; its closed-form per-example gradients equal the micro-batch oracle's, the
// embeddings' included (DP-LDM trains it under DP-SGD); the unused to_logits head stays frozen.
#include <privdiff/diffusion/pretrained_weights.hpp>
#include <privdiff/io/safetensors.hpp>
#include <privdiff/text_encoders/compvis_bert_embedder.hpp>

#include "../engine/oracle_networks.hpp"
#include "../relative_error.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>

namespace privdiff::sdk::text_encoders {
namespace {

namespace fs = std::filesystem;
const fs::path folder = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "text" / "compvis_bert";

CompVisBertConfig tiny() {
  CompVisBertConfig c;
  c.vocab_size = 120, c.width = 32, c.layers = 2, c.max_seq_len = 16;
  return c;
}

TEST(CompVisBertEmbedder, GivesCompVisEmbeddings) {
  CompVisBertEmbedder model(tiny());
  load_pretrained_weights(folder / "model.safetensors", model);  // every tensor by name, none left over
  // The unused to_logits head is held as buffers: every tensor of the checkpoint is a parameter or one of them.
  EXPECT_EQ(SafetensorsFile(folder / "model.safetensors").entries().size(),
            model.named_parameters().size() + model.named_buffers().size());
  EXPECT_EQ(model.named_buffers().size(), 2u);
  const SafetensorsFile reference(folder / "reference.safetensors");
  at::NoGradGuard no_grad;
  const at::Tensor out = model.forward(reference.tensor("ids"));
  const at::Tensor expected = reference.tensor("embeddings");
  ASSERT_EQ(out.sizes(), expected.sizes());
  EXPECT_LT(privdiff::testing::relative_error(out, expected), 1e-5);
}

TEST(CompVisBertEmbedder, PerExampleGradientsEqualTheOracle) {
  using namespace privdiff::testing::oracle;
  Net net;
  CompVisBertConfig c = tiny();
  c.vocab_size = 11, c.width = 8, c.max_seq_len = 6, c.heads = 2, c.head_dim = 4;
  auto encoder = net.register_module("cond_stage_model", std::make_shared<CompVisBertEmbedder>(c));
  net.body = [encoder](const at::Tensor& x) { return encoder->forward(x.to(at::kLong)); };
  expect_matches_oracle(net, at::randint(0, 11, {4, 6}, at::TensorOptions().dtype(at::kDouble)));
  EXPECT_TRUE(engine::has_closed_form(net));
  for (const auto& p : net.named_parameters()) {
    EXPECT_TRUE(p.value().requires_grad()) << p.key();
    EXPECT_EQ(p.key().find("to_logits"), std::string::npos) << p.key();  // buffers: no selection trains them
  }
}

TEST(CompVisBertEmbedder, RefusesWhatItCannotEmbed) {
  CompVisBertEmbedder model(tiny());
  EXPECT_THROW(model.forward(at::full({1, 3}, 120, at::kLong)), std::invalid_argument);
  EXPECT_THROW(model.forward(at::zeros({1, 17}, at::kLong)), std::invalid_argument);
  CompVisBertConfig none = tiny();
  none.layers = 0;
  EXPECT_THROW(CompVisBertEmbedder{none}, std::invalid_argument);
}

}  // namespace
}  // namespace privdiff::sdk::text_encoders
