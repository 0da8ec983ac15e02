// Parameter selection by preset, role, block range and name pattern on the SDK's UNet.
#include <privdiff/diffusion/unet.hpp>
#include <privdiff/engine/parameter_selection.hpp>

#include <gtest/gtest.h>

using namespace privdiff::sdk;
using namespace privdiff::sdk::engine;

namespace {
std::vector<ParameterInfo> unet_parameters() {
  static diffusion::Unet unet(diffusion::UnetConfig{1, 8, 8, {1, 2}, 1, {4}, 0.0, 10});
  return unet.parameters_with_roles();
}
std::vector<std::string> names_of(const ParameterSelection& s) {
  const auto params = unet_parameters();
  const auto keep = selected_parameters(params, s);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (keep[i]) out.push_back(params[i].name);
  }
  return out;
}
}  // namespace

TEST(ParameterSelection, AttentionPresetIsAttentionBlocksAndTheClassEmbedding) {
  ParameterSelection s;
  s.preset = "attention";
  const auto names = names_of(s);
  ASSERT_FALSE(names.empty());
  bool class_embedding = false, mid_attention = false;
  for (const auto& n : names) {
    const bool attention = n.find("_attn") != std::string::npos;
    EXPECT_TRUE(attention || n == "class_embedding.weight") << n;
    class_embedding |= n == "class_embedding.weight";
    mid_attention |= n.rfind("mid_attn.", 0) == 0;
  }
  EXPECT_TRUE(class_embedding);
  EXPECT_TRUE(mid_attention);
}

TEST(ParameterSelection, RolesBlocksAndPatternsNarrowIt) {
  ParameterSelection resblocks;
  resblocks.preset = "resblocks";
  for (const auto& n : names_of(resblocks)) {
    EXPECT_TRUE(n.find("_res") != std::string::npos || n.find("sample") != std::string::npos) << n;  // with resampling
  }

  // Block ranges constrain numbered blocks only: the class embedding (no block) stays selected.
  ParameterSelection late;
  late.preset = "attention";
  late.blocks = std::make_pair(5, -1);
  const auto params = unet_parameters();
  const auto keep = selected_parameters(params, late);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!keep[i]) continue;
    ++kept;
    EXPECT_TRUE(params[i].block_index >= 5 || params[i].block_index == -1) << params[i].name;
  }
  EXPECT_GT(kept, 1u);
  EXPECT_LT(kept, names_of([] { ParameterSelection s; s.preset = "attention"; return s; }()).size());

  ParameterSelection pattern;
  pattern.pattern = "^mid_";
  for (const auto& n : names_of(pattern)) EXPECT_EQ(n.rfind("mid_", 0), 0u) << n;
  ParameterSelection roles;
  roles.roles = {"io"};
  for (const auto& n : names_of(roles)) {
    EXPECT_TRUE(n.rfind("conv_in", 0) == 0 || n.rfind("conv_out", 0) == 0 || n.rfind("norm_out", 0) == 0) << n;
  }
  EXPECT_THROW(preset_roles("everything"), std::invalid_argument);
}
