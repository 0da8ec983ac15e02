// The autoencoder and latent_unet model plugins (DP-LDM): shapes, roles and DP-LDM's attention
// numbering, the objective each stage's selection implies, the scale factor fitted after a public
// stage, per-example gradients through the frozen autoencoder, and a private attention-only stage
// that leaves everything else bit-identical. On text (text_encoder_layers > 0): the transformers
// cross-attend to the caption through a text encoder trained with them, per example as the oracle
// says, and what it needs is refused by key.
#include "installed_plugins.hpp"

#include <privdiff/components/adapter.hpp>
#include <privdiff/components/mechanism.hpp>
#include <privdiff/components/model.hpp>
#include <privdiff/components/dataset.hpp>
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/parameter_selection.hpp>
#include <privdiff/engine/per_example_gradients.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/types.h>

#include <algorithm>
#include <filesystem>
#include <set>

using namespace privdiff;
using namespace privdiff::sdk;

namespace {

using V = std::vector<std::int64_t>;

ConfigValue integer(std::int64_t v) { return ConfigValue{v}; }

// 8x8 images -> 4x4x2 latents; a UNet at 4x4 and 2x2 with transformers at both and in the middle.
std::map<std::string, ConfigValue> tiny_latent_unet() {
  return {{"image_size", integer(8)},          {"autoencoder_channels", integer(8)},
          {"autoencoder_channel_mult", ConfigValue{V{1, 2}}}, {"latent_channels", integer(2)},
          {"channels", integer(8)},            {"channel_mult", ConfigValue{V{1, 2}}},
          {"attention_resolutions", ConfigValue{V{4, 2}}}, {"num_classes", integer(3)}};
}

class RandomImages : public Dataset {
 public:
  RandomImages(std::int64_t n, bool is_public, std::uint64_t seed = 1) : public_(is_public) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    images_ = at::rand({n, 1, 8, 8}, gen) * 2 - 1;
  }
  std::int64_t size() const override { return images_.size(0); }
  at::Tensor images(const at::Tensor& idx) const override { return images_.index_select(0, idx); }
  at::Tensor labels(const at::Tensor& idx) const override { return idx.remainder(3); }
  std::int64_t num_classes() const override { return 3; }
  bool is_public() const override { return public_; }
  std::string name() const override { return "random 8x8 images"; }

 private:
  at::Tensor images_;
  bool public_;
};

std::int64_t select(Model& model, const std::string& preset, std::vector<std::string> roles = {}) {
  engine::ParameterSelection selection;
  selection.preset = preset;
  selection.roles = std::move(roles);
  return engine::apply_parameter_selection(model, selection);
}

bool any_gradient(const std::vector<ParameterInfo>& parameters, bool autoencoder) {
  for (const auto& p : parameters) {
    const at::Tensor g = p.parameter.grad();
    if ((p.role == "autoencoder") == autoencoder && g.defined() && g.abs().sum().item<double>() > 0) return true;
  }
  return false;
}

// Fast clipping of `n` examples' rows against the micro-batch oracle, C = 1e-3 (every example clipped):
// norms and each trainable tensor's clipped sum (relative, or to 1e-9 of the largest where a sum is zero
// but for rounding). Returns the oracle's sums.
std::vector<at::Tensor> expect_fast_clipping_matches_oracle(Model& model, const engine::RowLoss& loss, std::int64_t n) {
  const auto fast = engine::clipped_gradient_sum(model.module(), loss, n, 1, 1e-3, engine::ClipMode::flat);
  const auto reference = engine::clip_and_sum(
      engine::micro_batch_per_example_gradients(model.module(), loss, n, 1), 1e-3, engine::ClipMode::flat);
  EXPECT_TRUE(at::allclose(fast.norms, reference.norms, 1e-9, 0));
  EXPECT_LT(reference.factors.max().item<double>(), 1.0);
  EXPECT_EQ(fast.sums.size(), reference.sums.size());
  EXPECT_EQ(fast.sums.size(), engine::trainable_parameters(model.module()).size());
  double largest = 0;
  for (const auto& r : reference.sums) largest = std::max(largest, r.abs().max().item<double>());
  for (std::size_t j = 0; j < fast.sums.size() && j < reference.sums.size(); ++j) {
    const double scale = std::max(reference.sums[j].abs().max().item<double>(), 1e-9 * largest) + 1e-30;
    EXPECT_LT((fast.sums[j] - reference.sums[j]).abs().max().item<double>() / scale, 1e-6) << j;
  }
  return reference.sums;
}

}  // namespace

TEST(LatentUnet, DpLdmMnistShapeHasSevenNumberedAttentionBlocks) {
  auto model = privdiff::testing::make_installed<Model>("latent_unet");  // defaults: DP-LDM's MNIST LDM, 28x28
  EXPECT_EQ(model->sample_shape(), (V{3, 14, 14}));
  const auto parameters = model->parameters_with_roles();
  const auto numbers = engine::attention_numbers(parameters);
  // One res block per level, transformers at both levels and in the middle: 2 down + 1 middle + 4 up,
  // numbered 1..7 like the authors' ablation_blocks (their MNIST runs: "ablation 4" trains 4-7).
  EXPECT_EQ(*std::max_element(numbers.begin(), numbers.end()), 7);
  std::int64_t total = 0, autoencoder = 0;
  for (const auto& p : parameters) {
    total += p.parameter.numel();
    if (p.role == "autoencoder") autoencoder += p.parameter.numel();
  }
  EXPECT_GT(autoencoder, 0);
  const std::int64_t network = select(*model, "all");  // "all": the diffusion network, not the autoencoder
  EXPECT_EQ(network, total - autoencoder);
  const std::int64_t attention = select(*model, "attention");
  EXPECT_GT(attention, 0);
  EXPECT_LT(attention, network / 2);
  engine::ParameterSelection later;
  later.preset = "attention";
  later.attention_from = 4;
  const std::int64_t from4 = engine::apply_parameter_selection(*model, later);
  EXPECT_GT(from4, 0);
  EXPECT_LT(from4, attention);
  EXPECT_EQ(select(*model, "autoencoder"), autoencoder);
  try {
    select(*model, "all", {"autoencoder", "attention"});
    ADD_FAILURE() << "a selection of the autoencoder and the network was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("separate stages"), std::string::npos) << e.what();
  }
}

TEST(LatentUnet, TheObjectiveFollowsWhatTheStageTrains) {
  at::manual_seed(0);
  auto model = privdiff::testing::make_installed<Model>("latent_unet", tiny_latent_unet());
  RandomImages data(24, true);
  const at::Tensor idx = at::arange(4, at::kLong);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(2);
  const auto parameters = model->parameters_with_roles();

  // The diffusion objective needs a fitted autoencoder.
  select(*model, "all");
  EXPECT_THROW(model->training_loss(data.images(idx), Conditioning{data.labels(idx)}, 1, gen), std::runtime_error);

  // train = "autoencoder": the autoencoder's loss, K rows per example, gradients on it alone.
  select(*model, "autoencoder");
  at::Tensor rows = model->training_loss(data.images(idx), Conditioning{data.labels(idx)}, 2, gen);
  EXPECT_EQ(rows.sizes(), (V{8}));
  rows.mean().backward();
  EXPECT_TRUE(any_gradient(parameters, true));
  EXPECT_FALSE(any_gradient(parameters, false));
  model->module().zero_grad();

  // After the (public) autoencoder stage: the scale factor is fitted, a reconstruction grid shown.
  const auto figures = model->after_public_stage(data);
  ASSERT_EQ(figures.size(), 1u);
  EXPECT_EQ(figures[0].name, "reconstructions");
  EXPECT_EQ(figures[0].images.sizes(), (V{40, 1, 8, 8}));  // 2 x (10 originals over 10 reconstructions)
  EXPECT_EQ(figures[0].columns, 10);
  const at::Tensor latents = model->encode(data.images(at::arange(24, at::kLong)));
  EXPECT_EQ(latents.sizes(), (V{24, 2, 4, 4}));
  EXPECT_NEAR(latents.to(at::kDouble).std(/*unbiased=*/false).item<double>(), 1.0, 1e-4);  // LDM's scaling
  EXPECT_EQ(model->decode(latents).sizes(), (V{24, 1, 8, 8}));

  // Any other selection: the denoising loss on the frozen autoencoder's latents, gradients on the UNet alone.
  select(*model, "attention");
  EXPECT_TRUE(model->after_public_stage(data).empty());  // nothing to fit: the autoencoder did not train
  rows = model->training_loss(data.images(idx), Conditioning{data.labels(idx)}, 3, gen);
  EXPECT_EQ(rows.sizes(), (V{12}));
  rows.mean().backward();
  EXPECT_FALSE(any_gradient(parameters, true));
  EXPECT_TRUE(any_gradient(parameters, false));
  const at::Tensor d = model->denoise(latents.slice(0, 0, 3), at::full({3}, 0.5), Conditioning{at::tensor({0, 1, -1}, at::kLong)});
  EXPECT_EQ(d.sizes(), (V{3, 2, 4, 4}));
}

TEST(LatentUnet, FastClippingOfTheAttentionBlocksThroughTheFrozenAutoencoderMatchesTheOracle) {
  at::manual_seed(1);
  auto model = privdiff::testing::make_installed<Model>("latent_unet", tiny_latent_unet());
  RandomImages data(12, true);
  select(*model, "autoencoder");
  model->after_public_stage(data);
  select(*model, "attention");
  model->module().to(at::kDouble);
  // A per-example-deterministic denoising loss (fixed noise levels and noise per example), batched,
  // through encode (the frozen autoencoder) and the UNet: what DP-SGD differentiates.
  const at::Tensor images = data.images(at::arange(6, at::kLong)).to(at::kDouble);
  const at::Tensor labels = data.labels(at::arange(6, at::kLong));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const at::Tensor noise = at::randn({6, 2, 4, 4}, gen, at::TensorOptions().dtype(at::kDouble));
  const at::Tensor sigma = at::linspace(0.1, 3.0, 6, at::TensorOptions().dtype(at::kDouble));
  const engine::RowLoss loss = [&](const at::Tensor& i) {
    const at::Tensor z = model->encode(images.index_select(0, i));
    const at::Tensor s = sigma.index_select(0, i);
    const at::Tensor x = z + s.view({-1, 1, 1, 1}) * noise.index_select(0, i);
    return (model->denoise(x, s, Conditioning{labels.index_select(0, i)}) - z).pow(2).flatten(1).mean(1);
  };
  expect_fast_clipping_matches_oracle(*model, loss, 6);
}

TEST(LatentUnet, APrivateAttentionStageLeavesTheAutoencoderAndTheRestOfTheUnetBitIdentical) {
  at::manual_seed(2);
  auto model = privdiff::testing::make_installed<Model>("latent_unet", tiny_latent_unet());
  RandomImages public_data(20, true, 5), private_data(40, false, 6);
  select(*model, "autoencoder");
  model->after_public_stage(public_data);
  const double scale = model->encode(public_data.images(at::arange(20, at::kLong))).std().item<double>();
  std::vector<at::Tensor> before;
  for (const auto& p : model->parameters_with_roles()) before.push_back(p.parameter.detach().clone());
  std::vector<at::Tensor> buffers_before;
  for (const auto& b : model->module().buffers()) buffers_before.push_back(b.clone());

  auto mechanism = privdiff::testing::make_installed<Mechanism>(
      "dpsgd", {{"train", ConfigValue{std::string("attention")}}, {"batch_size", integer(8)}, {"steps", integer(3)},
                {"noise_multiplier", ConfigValue{1.0}}, {"max_grad_norm", ConfigValue{0.01}}, {"lr", ConfigValue{1e-2}},
                {"ema", ConfigValue{0.0}}});
  mechanism->select_trainable(*model);
  PrivacyLedger ledger;
  StageContext context{*model, private_data, ledger, 0, {}};
  mechanism->run(context);
  EXPECT_EQ(ledger.steps(), 3);

  const auto after = model->parameters_with_roles();
  std::int64_t changed = 0;
  for (std::size_t j = 0; j < after.size(); ++j) {
    const bool trained = after[j].role == "attention" || after[j].role == "cross_attention" || after[j].role == "conditioning";
    if (!trained) {
      EXPECT_TRUE(at::equal(before[j], after[j].parameter)) << after[j].name << " moved";
    } else if (!at::equal(before[j], after[j].parameter)) {
      ++changed;
    }
  }
  EXPECT_GT(changed, 0);
  std::size_t b = 0;
  for (const auto& buffer : model->module().buffers()) EXPECT_TRUE(at::equal(buffers_before[b++], buffer));
  EXPECT_DOUBLE_EQ(model->encode(public_data.images(at::arange(20, at::kLong))).std().item<double>(), scale);
}

TEST(AutoencoderModel, TrainsAsAWholeAndIsNotADenoiser) {
  auto model = privdiff::testing::make_installed<Model>(
      "autoencoder", {{"image_size", integer(8)}, {"autoencoder_channels", integer(8)}, {"latent_channels", integer(2)},
                      {"autoencoder_channel_mult", ConfigValue{V{1, 2, 2}}}});
  EXPECT_EQ(model->sample_shape(), (V{2, 2, 2}));
  std::int64_t total = 0;
  for (const auto& p : model->module().parameters()) total += p.numel();
  EXPECT_EQ(select(*model, "all"), total);  // an autoencoder alone: "all" is the autoencoder
  EXPECT_THROW(model->denoise(at::zeros({1, 2, 2, 2}), at::ones({1}), {}), std::logic_error);
  RandomImages data(10, true);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  EXPECT_EQ(model->training_loss(data.images(at::arange(4, at::kLong)), {}, 1, gen).sizes(), (V{4}));
  const auto figures = model->after_public_stage(data);
  ASSERT_EQ(figures.size(), 1u);
  EXPECT_EQ(figures[0].images.size(0), 20);  // 10 originals over 10 reconstructions
  // Its module is what latent_unet's autoencoder part is: the same names and shapes.
  auto latent = privdiff::testing::make_installed<Model>(
      "latent_unet", {{"image_size", integer(8)}, {"autoencoder_channels", integer(8)}, {"latent_channels", integer(2)},
                      {"autoencoder_channel_mult", ConfigValue{V{1, 2, 2}}}, {"channels", integer(8)},
                      {"attention_resolutions", ConfigValue{V{2}}}});
  torch::nn::Module* part = latent->part_initialised_by("autoencoder");
  ASSERT_NE(part, nullptr);
  EXPECT_EQ(latent->part_initialised_by("pixel_unet"), nullptr);
  auto mine = model->module().named_parameters();
  auto theirs = part->named_parameters();
  ASSERT_EQ(mine.size(), theirs.size());
  for (const auto& p : mine) EXPECT_EQ(theirs[p.key()].sizes(), p.value().sizes()) << p.key();
}

TEST(LatentModels, AnImageSizeTheAutoencoderCannotDownsampleIsRefusedByKey) {
  for (const std::string id : {"autoencoder", "latent_unet"}) {
    try {
      privdiff::testing::make_installed<Model>(
          id, {{"image_size", integer(30)}, {"autoencoder_channel_mult", ConfigValue{V{1, 2, 2}}}});  // factor 4
      ADD_FAILURE() << id << " accepted 30x30 images at factor 4";
    } catch (const std::exception& e) {  // (the registry adds which plugin refused)
      EXPECT_NE(std::string(e.what()).find("model.image_size: 30 is not divisible by the autoencoder's downsampling factor 4"),
                std::string::npos)
          << e.what();
    }
  }
}

// LoRA's default targets find the latent UNet's transformer projections (to_q/k/v/out of every
// attention), and only the diffusion network's: the autoencoder has no attention to adapt.
TEST(LatentModels, LoraDefaultTargetsAreTheTransformersProjections) {
  auto model = privdiff::testing::make_installed<Model>("latent_unet", tiny_latent_unet());
  const int wrapped = privdiff::testing::make_installed<Adapter>("lora")->wrap(model->module());
  int expected = 0;
  for (const auto& item : model->module().named_modules("", false)) {
    const std::string& name = item.key();
    const auto dot = name.rfind('.');
    const std::string leaf = dot == std::string::npos ? name : name.substr(dot + 1);
    if (name.find("attn") != std::string::npos && (leaf == "to_q" || leaf == "to_k" || leaf == "to_v" || leaf == "to_out")) {
      ++expected;
    }
  }
  EXPECT_GT(expected, 0);
  EXPECT_EQ(wrapped, expected);
  for (const auto& p : engine::parameters_with_roles(*model)) {
    if (p.role == "adapter") {
      EXPECT_EQ(p.name.rfind("unet.", 0), 0u) << p.name;
    }
  }
}

namespace {

const std::string vocabulary = (std::filesystem::path(PRIVDIFF_TEST_FIXTURE_DIR) / "text" / "bert_vocab.txt").string();

// tiny_latent_unet on text: a 2-layer text encoder 16 wide, captions of 12 tokens.
std::map<std::string, ConfigValue> tiny_text_unet(std::map<std::string, ConfigValue> extra = {}) {
  auto v = tiny_latent_unet();
  v["num_classes"] = integer(0);
  v["text_encoder_layers"] = integer(2);
  v["context_dim"] = integer(16);
  v["caption_tokens"] = integer(12);
  v["tokenizer"] = ConfigValue{vocabulary};
  for (auto& [k, x] : extra) v[k] = x;
  return v;
}

}  // namespace

TEST(LatentUnet, OnTextTheTransformersAndTheEncoderTrainPerExampleAsTheOracleSays) {
  at::manual_seed(4);
  auto model = privdiff::testing::make_installed<Model>("latent_unet", tiny_text_unet());
  EXPECT_TRUE(model->conditions_on_text());
  RandomImages data(12, true);
  select(*model, "autoencoder");
  model->after_public_stage(data);
  select(*model, "attention");  // DP-LDM's text selection: the SpatialTransformers and the text encoder
  std::int64_t encoder = 0;
  for (const auto& p : model->parameters_with_roles()) {
    if (p.name.rfind("text_encoder.", 0) == 0) {
      EXPECT_EQ(p.role, "conditioning") << p.name;
      if (p.parameter.requires_grad()) encoder += p.parameter.numel();
    }
  }
  EXPECT_GT(encoder, 0);
  {  // LDM's transformers start with a zero proj_out, which would zero the text encoder's gradients
    torch::NoGradGuard no_grad;
    for (auto& p : model->module().parameters()) {
      if (!p.any().item<bool>()) p.normal_(0, 0.05);
    }
  }
  model->module().to(at::kDouble);
  const std::vector<std::string> text_of = {"a woman with wavy hair", "a sneaker", "", "the woman smiles", "a bag", "a"};
  const at::Tensor images = data.images(at::arange(6, at::kLong)).to(at::kDouble);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const at::Tensor noise = at::randn({6, 2, 4, 4}, gen, at::TensorOptions().dtype(at::kDouble));
  const at::Tensor sigma = at::linspace(0.1, 3.0, 6, at::TensorOptions().dtype(at::kDouble));
  const engine::RowLoss loss = [&](const at::Tensor& i) {
    Conditioning cond;
    for (std::int64_t k = 0; k < i.numel(); ++k) cond.captions.push_back(text_of[static_cast<std::size_t>(i[k].item<std::int64_t>())]);
    const at::Tensor z = model->encode(images.index_select(0, i));
    const at::Tensor s = sigma.index_select(0, i);
    return (model->denoise(z + s.view({-1, 1, 1, 1}) * noise.index_select(0, i), s, cond) - z).pow(2).flatten(1).mean(1);
  };
  const std::vector<at::Tensor> sums = expect_fast_clipping_matches_oracle(*model, loss, 6);
  double encoder_gradient = 0;  // the text encoder's share of the clipped sum: it was checked, not zero
  std::size_t j = 0;
  for (const auto& p : model->module().named_parameters()) {
    if (!p.value().requires_grad() || j >= sums.size()) continue;
    if (p.key().rfind("text_encoder.", 0) == 0) encoder_gradient += sums[j].abs().sum().item<double>();
    ++j;
  }
  EXPECT_GT(encoder_gradient, 0);
  // The caption moves the output; the training loss needs one per example.
  at::NoGradGuard no_grad;
  const at::Tensor x = noise.narrow(0, 0, 1);  // a latent
  const at::Tensor s = at::ones({1}, at::kDouble);
  EXPECT_FALSE(at::allclose(model->denoise(x, s, Conditioning{{}, {"a sneaker"}}), model->denoise(x, s, Conditioning{{}, {"a bag"}})));
  EXPECT_THROW(model->training_loss(images, Conditioning{}, 1, gen), std::invalid_argument);
}

TEST(LatentUnet, OnTextWhatItNeedsIsRefusedByKey) {
  auto refused_at = [](const std::map<std::string, ConfigValue>& values) {
    try {
      privdiff::testing::make_installed<Model>("latent_unet", values);
    } catch (const KeyValueError& e) {
      return e.key_path();
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(refused_at(tiny_text_unet({{"num_classes", integer(3)}})), "model.num_classes");
  EXPECT_EQ(refused_at(tiny_text_unet({{"tokenizer", ConfigValue{std::string()}}})), "model.tokenizer");
  EXPECT_EQ(refused_at(tiny_text_unet({{"tokenizer", ConfigValue{vocabulary + ".absent"}}})), "model.tokenizer");
  EXPECT_EQ(refused_at(tiny_text_unet({{"text_encoder_heads", integer(3)}})), "model.text_encoder_heads");
  auto classes = tiny_latent_unet();
  classes["tokenizer"] = ConfigValue{vocabulary};
  EXPECT_EQ(refused_at(classes), "model.tokenizer");  // a vocabulary for a model without a text encoder
}
