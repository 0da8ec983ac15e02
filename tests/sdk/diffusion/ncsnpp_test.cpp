// privdiff's port of DPDM's network against DPDM's own code: tiny random NCSN++ networks built by
// github.com/nv-tlabs/DPDM's model/ncsnpp.py, saved as DPDM's checkpoints are and converted by
// scripts/convert_to_safetensors.py --dpdm (scripts/make_weights_fixtures.sh). The architecture is
// read off the weights, every tensor loads, and the output is DPDM's within 1e-5 relative.
#include <privdiff/diffusion/ncsnpp.hpp>
#include <privdiff/io/safetensors.hpp>

#include "../relative_error.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

namespace privdiff::sdk::diffusion {
namespace {

namespace fs = std::filesystem;
const fs::path fixtures = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "weights" / "dpdm";

std::map<std::string, std::vector<std::int64_t>> shapes_of(const SafetensorsFile& file) {
  std::map<std::string, std::vector<std::int64_t>> out;
  for (const auto& e : file.entries()) out[e.name] = e.shape;
  return out;
}

struct Case {
  std::string name;
  NcsnppConfig expected;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }  // ctest's test names

class NcsnppFixture : public ::testing::TestWithParam<Case> {};

TEST_P(NcsnppFixture, ReadsTheArchitectureAndGivesDpdmsOutput) {
  const fs::path folder = fixtures / GetParam().name;
  const SafetensorsFile weights(folder / "model.safetensors");
  std::vector<std::string> names;
  for (const auto& e : weights.entries()) names.push_back(e.name);
  ASSERT_TRUE(looks_like_dpdm_ncsnpp(names));
  const NcsnppConfig config = ncsnpp_config_from_shapes(shapes_of(weights), 8);
  const NcsnppConfig& want = GetParam().expected;
  EXPECT_EQ(config.nf, want.nf);
  EXPECT_EQ(config.ch_mult, want.ch_mult);
  EXPECT_EQ(config.num_res_blocks, want.num_res_blocks);
  EXPECT_EQ(config.attn_resolutions, want.attn_resolutions);
  EXPECT_EQ(config.label_dim, want.label_dim);
  EXPECT_EQ(config.in_channels, want.in_channels);
  EXPECT_EQ(config.out_channels, want.out_channels);

  Ncsnpp model(config);
  std::size_t loaded = 0;
  {
    at::NoGradGuard no_grad;
    for (auto& p : model.named_parameters(true)) {
      const PortSource source = ncsnpp_port_source(p.key());
      ASSERT_NE(weights.find(source.name), nullptr) << source.name;
      const at::Tensor value = weights.tensor(source.name);
      p.value().copy_(source.transposed ? value.t() : value);
      ++loaded;
    }
  }
  EXPECT_EQ(loaded, weights.entries().size());
  const SafetensorsFile reference(folder / "reference.safetensors");
  const at::Tensor labels = reference.find("labels") ? reference.tensor("labels") : at::Tensor();
  model.eval();
  at::NoGradGuard no_grad;
  const at::Tensor output = model.forward(reference.tensor("x"), reference.tensor("c_noise"), labels);
  const at::Tensor expected = reference.tensor("output");
  ASSERT_EQ(output.sizes(), expected.sizes());
  EXPECT_LT(privdiff::testing::relative_error(output, expected), 1e-5);
}

NcsnppConfig config(std::int64_t nf, std::vector<std::int64_t> mult, std::int64_t blocks, std::vector<std::int64_t> attention,
                    std::int64_t labels, std::int64_t channels) {
  return {8, channels, channels, nf, std::move(mult), blocks, std::move(attention), labels, 0};
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NcsnppFixture,
                         ::testing::Values(Case{"ncsnpp_classes", config(8, {1, 2, 2}, 2, {2}, 3, 1)},
                                           Case{"ncsnpp_two_attention", config(8, {1, 2}, 1, {8, 4}, 0, 3)}),
                         [](const auto& info) { return info.param.name; });

TEST(Ncsnpp, DpdmsMnistNetworkHasItsParameterCount) {
  // 1,753,345: DPDM's model/ncsnpp.py with configs/mnist_28's network (counted by PyTorch).
  // DPDM's MNIST / Fashion-MNIST configuration (nf 32, ch_mult 1,2,2, two blocks, attention at 7, ten classes).
  Ncsnpp model(NcsnppConfig{});
  std::int64_t count = 0;
  for (const auto& p : model.parameters()) count += p.numel();
  EXPECT_EQ(count, 1'753'345);
}

TEST(Ncsnpp, ReadsNinNamesFromScoreSdesLayout) {
  EXPECT_EQ(ncsnpp_port_source("all_modules.9.NIN_2.weight").name, "all_modules.9.NIN_2.W");
  EXPECT_TRUE(ncsnpp_port_source("all_modules.9.NIN_2.weight").transposed);
  EXPECT_EQ(ncsnpp_port_source("all_modules.9.NIN_2.bias").name, "all_modules.9.NIN_2.b");
  EXPECT_FALSE(ncsnpp_port_source("all_modules.9.NIN_2.bias").transposed);
  EXPECT_EQ(ncsnpp_port_source("all_modules.4.Conv_0.weight").name, "all_modules.4.Conv_0.weight");
  EXPECT_FALSE(looks_like_dpdm_ncsnpp({"down_blocks.0.resnets.0.conv1.weight"}));
}

TEST(Ncsnpp, RefusesWeightsOfAnotherNetworkNamingTheModule) {
  std::map<std::string, std::vector<std::int64_t>> shapes{
      {"all_modules.0.weight", {4, 8}}, {"all_modules.1.weight", {32, 8}}, {"all_modules.2.weight", {32, 32}},
      {"all_modules.3.weight", {8, 1, 3, 3}}, {"all_modules.4.weight", {8, 8}}};
  try {
    ncsnpp_config_from_shapes(shapes, 8);
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("all_modules.4"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace privdiff::sdk::diffusion
