// The adapter plugins (plugins/adapters): LoRA and IA3 wrap the chosen Linear layers of any network
// built from SDK layers; their closed-form per-example gradients — alone (the base frozen, as DP-LoRA
// trains) or with the base weights, with K > 1 rows per example — equal the micro-batch oracle's
// (float64), fast gradient clipping covers them, and the merged layer (sampling) computes what the
// adapter does.
#include "../sdk/engine/oracle_networks.hpp"
#include "installed_plugins.hpp"

#include <privdiff/components/adapter.hpp>
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/engine/linear_adapter.hpp>

#include <gtest/gtest.h>

using namespace privdiff::testing::oracle;
using privdiff::sdk::Adapter;
using privdiff::sdk::ConfigValue;

namespace {

std::unique_ptr<Adapter> lora(std::int64_t rank, double alpha, const std::string& targets) {
  return privdiff::testing::make_installed<Adapter>(
      "lora", {{"rank", ConfigValue{rank}}, {"alpha", ConfigValue{alpha}}, {"targets", ConfigValue{targets}}});
}

std::unique_ptr<Adapter> ia3(const std::string& targets) {
  return privdiff::testing::make_installed<Adapter>("ia3", {{"targets", ConfigValue{targets}}});
}

bool is_adapter_parameter(const std::string& name) { return name.find(".adapter.") != std::string::npos; }

// Moves adapters off their identity start (B = 0 would zero A's gradient; l = 1 hides nothing, but
// a random l tests the merge).
void randomise_adapters(torch::nn::Module& net) {
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  for (auto& p : net.named_parameters()) {
    if (p.key().find("lora_B") != std::string::npos) p.value().normal_(0, 0.2, gen);
    if (p.key().find("ia3_scale") != std::string::npos) p.value().normal_(1, 0.3, gen);
  }
}

void train_only_adapters(torch::nn::Module& net) {
  for (auto& p : net.named_parameters()) p.value().set_requires_grad(is_adapter_parameter(p.key()));
}

// Every adapter's per-example gradients against the oracle, base frozen or training, K = 1 and 3.
void expect_adapter_matches_oracle(const std::function<std::unique_ptr<Adapter>()>& make, int wrapped,
                                   std::size_t adapter_tensors) {
  for (const bool base_trains : {false, true}) {
    for (const std::int64_t group : {1, 3}) {
      TinyUnet net;
      EXPECT_EQ(make()->wrap(net), wrapped);
      randomise_adapters(net);
      if (!base_trains) train_only_adapters(net);
      net.to(at::kDouble);
      EXPECT_EQ(trainable_parameters(net).size(), base_trains ? 25u + adapter_tensors : adapter_tensors);
      expect_matches_oracle(net, randn({3 * group, 1, 8, 8}), group);
    }
  }
}

// Adapters alone, and adapters with the base training too (the base layers then take every norm
// strategy the planner can choose, next to the adapters' own per-example gradients).
void expect_fast_clipping_covers(const std::function<std::unique_ptr<Adapter>()>& make) {
  for (bool base_trains : {false, true}) {
    TinyUnet net;
    const auto adapter = make();
    adapter->wrap(net);
    randomise_adapters(net);
    if (!base_trains) train_only_adapters(net);
    net.to(at::kDouble);
    const at::Tensor x = randn({4, 1, 8, 8});
    const RowLoss loss = make_loss(net, x, 1);
    const auto reference = clip_and_sum(micro_batch_per_example_gradients(net, loss, 4, 1), 0.01, ClipMode::flat);
    for (NormPlanner& planner : every_norm_planner()) {
      const auto fast = clipped_gradient_sum(net, loss, 4, 1, 0.01, ClipMode::flat, planner);
      expect_clipped_sums_equal(fast, reference, base_trains ? "base training" : "adapters only");
    }
  }
}

// In eval mode (sampling) the merged layer gives what the adapter computes in training mode.
void expect_merged_equals_unmerged(Adapter& adapter) {
  TinyUnet net;
  adapter.wrap(net);
  randomise_adapters(net);
  net.to(at::kDouble);
  const at::Tensor x = randn({3, 1, 8, 8});
  net.train();
  const at::Tensor unmerged = net.forward(x).detach();
  net.eval();
  EXPECT_TRUE(at::allclose(net.forward(x).detach(), unmerged, 1e-10, 1e-12));
}

// A fresh adapter leaves the network as it was.
void expect_fresh_adapter_is_identity(Adapter& adapter) {
  TinyUnet plain;
  const at::Tensor x = randn({3, 1, 8, 8}).to(at::kFloat);
  const at::Tensor before = plain.forward(x).detach();
  adapter.wrap(plain);
  EXPECT_TRUE(plain.forward(x).detach().equal(before));
}

}  // namespace

TEST(LoraAdapter, PerExampleGradientsMatchTheOracle) {
  expect_adapter_matches_oracle([] { return lora(4, 8.0, "^(qkv|proj|emb_proj)$"); }, 3, 6);
}

TEST(LoraAdapter, FastGradientClippingCoversIt) {
  expect_fast_clipping_covers([] { return lora(2, 0.0, "qkv|proj"); });
}

TEST(LoraAdapter, TheMergedLayerComputesWhatTheAdapterDoes) {
  expect_merged_equals_unmerged(*lora(4, 2.0, "qkv|proj"));
  TinyUnet net;
  lora(4, 2.0, "qkv|proj")->wrap(net);
  randomise_adapters(net);
  const auto* a = net.qkv->adapter();
  ASSERT_NE(a, nullptr);
  const at::Tensor A = a->named_parameters()["lora_A"], B = a->named_parameters()["lora_B"];
  EXPECT_TRUE(net.qkv->merged_weight().allclose(net.qkv->weight + 0.5 * at::mm(B, A)));  // alpha / r = 0.5
  expect_fresh_adapter_is_identity(*lora(4, 0.0, "qkv"));
}

TEST(LoraAdapter, RefusesTargetsThatMatchNothingAndASecondAdapter) {
  TinyUnet net;
  try {
    lora(4, 0.0, "nothing_matches")->wrap(net);
    FAIL() << "accepted";
  } catch (const privdiff::sdk::KeyValueError& e) {  // bad input: the host reports it at the key (exit code 2)
    EXPECT_EQ(e.key_path(), "adapter.targets");
    EXPECT_EQ(e.problem(), "\"nothing_matches\" matches no Linear layer's name (the model's Linear layers: "
                           "emb_proj, qkv, proj)");
  }
  try {
    lora(4, 0.0, "[")->wrap(net);
    FAIL() << "accepted";
  } catch (const privdiff::sdk::KeyValueError& e) {
    EXPECT_EQ(e.key_path(), "adapter.targets");
    EXPECT_EQ(e.problem().rfind("\"[\" is not a regular expression (", 0), 0u) << e.problem();
  }
  lora(2, 0.0, "qkv")->wrap(net);
  EXPECT_THROW(ia3("qkv")->wrap(net), std::invalid_argument);  // one adapter per layer
}

TEST(Ia3Adapter, PerExampleGradientsMatchTheOracle) {
  expect_adapter_matches_oracle([] { return ia3("^(qkv|proj|emb_proj)$"); }, 3, 3);
}

TEST(Ia3Adapter, FastGradientClippingCoversIt) {
  expect_fast_clipping_covers([] { return ia3("qkv|emb_proj"); });
}

TEST(Ia3Adapter, TheMergedLayerComputesWhatTheAdapterDoes) {
  expect_merged_equals_unmerged(*ia3("qkv|proj|emb_proj"));
  expect_fresh_adapter_is_identity(*ia3("qkv"));
  TinyUnet net;
  EXPECT_EQ(ia3("qkv")->wrap(net), 1);
  std::int64_t scalars = 0;
  for (const auto& p : net.named_parameters()) scalars += is_adapter_parameter(p.key()) ? p.value().numel() : 0;
  EXPECT_EQ(scalars, 48);  // one per output feature of qkv
}
