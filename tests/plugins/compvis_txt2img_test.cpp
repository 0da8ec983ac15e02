// The compvis_ldm model in txt2img-1p4B's layout (DP-LDM's text-to-image row): a tiny random LDM whose
// conditioning stage is CompVis's BERTEmbedder, built by CompVis's code (scripts/text_fixtures/
// txt2img_reference.py). Its captions tokenize to the reference's ids, the BERTEmbedder's context and
// the UNet's output are CompVis's within 1e-5, the text encoder trains through the per-example engine
// (fast clipping equals the micro-batch oracle), and what it needs is refused by key when missing.
#include "installed_plugins.hpp"

#include "../sdk/relative_error.hpp"

#include <privdiff/components/model.hpp>
#include <privdiff/config/key_value_error.hpp>
#include <privdiff/diffusion/compvis_ldm.hpp>
#include <privdiff/diffusion/pretrained_weights.hpp>
#include <privdiff/engine/clipping.hpp>
#include <privdiff/engine/fast_gradient_clipping.hpp>
#include <privdiff/engine/parameter_selection.hpp>
#include <privdiff/engine/per_example_gradients.hpp>
#include <privdiff/io/safetensors.hpp>
#include <privdiff/text/wordpiece_tokenizer.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace privdiff;
using namespace privdiff::sdk;
namespace fs = std::filesystem;

namespace {

const fs::path text = fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "text";
const fs::path folder = text / "compvis_txt2img";

std::vector<std::string> captions(const SafetensorsFile& reference) {
  return nlohmann::json::parse(reference.metadata().at("captions")).get<std::vector<std::string>>();
}

std::unique_ptr<Model> txt2img(std::map<std::string, ConfigValue> extra = {}) {
  std::map<std::string, ConfigValue> values = {{"config", ConfigValue{(folder / "model.safetensors").string()}},
                                               {"tokenizer", ConfigValue{(text / "bert_vocab.txt").string()}}};
  for (auto& [k, v] : extra) values[k] = v;
  auto model = privdiff::testing::make_installed<Model>("compvis_ldm", values);
  load_pretrained_weights(folder / "model.safetensors", model->module());
  return model;
}

}  // namespace

TEST(CompVisTxt2Img, IdsContextAndUNetAreCompVisOwn) {
  const SafetensorsFile weights(folder / "model.safetensors");
  const SafetensorsFile reference(folder / "reference.safetensors");
  const diffusion::CompVisLdmConfig config = diffusion::compvis_ldm_config(weights.metadata().at("ldm.config"), "ldm.config");
  ASSERT_TRUE(config.text.has_value());
  EXPECT_EQ(config.text->width, 32);
  EXPECT_EQ(config.text->layers, 2);
  EXPECT_EQ(config.classes, 0);
  diffusion::CompVisLatentDiffusion ldm(config);
  load_pretrained_weights(folder / "model.safetensors", ldm);
  const WordPieceTokenizer tokenizer = WordPieceTokenizer::from_file(text / "bert_vocab.txt", 77);
  std::vector<std::int64_t> ids;
  for (const auto& c : captions(reference)) {
    const auto t = tokenizer.padded(c).ids;
    ids.insert(ids.end(), t.begin(), t.end());
  }
  const at::Tensor our_ids = at::tensor(ids, at::kLong).view({-1, 77});
  EXPECT_TRUE(at::equal(our_ids, reference.tensor("ids"))) << "the ids CompVis's BERTTokenizer gives";
  at::NoGradGuard no_grad;
  const at::Tensor context = ldm.text_encoder->forward(our_ids);
  EXPECT_LT(privdiff::testing::relative_error(context, reference.tensor("context")), 1e-5);
  const at::Tensor output = ldm.unet->forward(reference.tensor("unet_x"), reference.tensor("unet_t"), context);
  EXPECT_LT(privdiff::testing::relative_error(output, reference.tensor("unet_output")), 1e-5);
}

TEST(CompVisTxt2Img, TheTextEncoderAndTransformersTrainPerExampleAsTheOracleSays) {
  at::manual_seed(2);
  auto model = txt2img();
  EXPECT_TRUE(model->conditions_on_text());
  engine::ParameterSelection selection;  // DP-LDM's text-to-image selection: SpatialTransformers + text encoder
  selection.roles = {"attention", "conditioning"};
  const std::int64_t trained = engine::apply_parameter_selection(*model, selection);
  std::int64_t encoder = 0;
  for (const auto& p : model->parameters_with_roles()) {
    if (p.name.rfind("cond_stage_model.transformer.", 0) == 0 && p.parameter.requires_grad()) encoder += p.parameter.numel();
  }
  EXPECT_GT(encoder, 0);
  EXPECT_GT(trained, encoder);
  model->module().to(at::kDouble);
  const std::vector<std::string> text_of = {"a woman with wavy hair", "a sneaker", "", "the woman smiles", "a bag"};
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const at::Tensor z = at::randn({5, 3, 4, 4}, gen, at::TensorOptions().dtype(at::kDouble));
  const at::Tensor noise = at::randn({5, 3, 4, 4}, gen, at::TensorOptions().dtype(at::kDouble));
  const at::Tensor sigma = at::linspace(0.2, 4.0, 5, at::TensorOptions().dtype(at::kDouble));
  const engine::RowLoss loss = [&](const at::Tensor& i) {
    Conditioning cond;
    for (std::int64_t k = 0; k < i.numel(); ++k) cond.captions.push_back(text_of[static_cast<std::size_t>(i[k].item<std::int64_t>())]);
    const at::Tensor s = sigma.index_select(0, i);
    const at::Tensor x = z.index_select(0, i) + s.view({-1, 1, 1, 1}) * noise.index_select(0, i);
    return (model->denoise(x, s, cond) - z.index_select(0, i)).pow(2).flatten(1).mean(1);
  };
  const auto fast = engine::clipped_gradient_sum(model->module(), loss, 5, 1, 1e-3, engine::ClipMode::flat);
  const auto reference = engine::clip_and_sum(
      engine::micro_batch_per_example_gradients(model->module(), loss, 5, 1), 1e-3, engine::ClipMode::flat);
  EXPECT_TRUE(at::allclose(fast.norms, reference.norms, 1e-9, 0));
  EXPECT_LT(reference.factors.max().item<double>(), 1.0);  // every example clipped: C binds
  ASSERT_EQ(fast.sums.size(), reference.sums.size());
  std::vector<std::string> names;  // the trainable parameters in module order, as the sums are
  for (const auto& p : model->module().named_parameters()) {
    if (p.value().requires_grad()) names.push_back(p.key());
  }
  ASSERT_EQ(names.size(), fast.sums.size());
  // Relative to each sum, or to 1e-9 of the largest where a sum is zero but for rounding (a bias whose
  // per-channel shift the GroupNorm after it removes: its gradient is 1e-21 here, in either path).
  double largest = 0;
  for (const auto& r : reference.sums) largest = std::max(largest, r.abs().max().item<double>());
  for (std::size_t j = 0; j < fast.sums.size(); ++j) {
    const double scale = std::max(reference.sums[j].abs().max().item<double>(), 1e-9 * largest);
    EXPECT_LT((fast.sums[j] - reference.sums[j]).abs().max().item<double>() / scale, 1e-6) << names[j];
  }
  // The caption moves the output: the model reads it.
  at::NoGradGuard no_grad;
  const at::Tensor x = z.narrow(0, 0, 1) + noise.narrow(0, 0, 1);
  const at::Tensor s = at::ones({1}, at::kDouble);
  EXPECT_FALSE(at::allclose(model->denoise(x, s, Conditioning{{}, {"a sneaker"}}), model->denoise(x, s, Conditioning{{}, {"a bag"}})));
}

TEST(CompVisTxt2Img, TrainingRowsCaptionDropoutAndRefusals) {
  auto model = txt2img({{"caption_dropout", ConfigValue{0.5}}});
  auto gen = at::make_generator<at::CPUGeneratorImpl>(4);
  const at::Tensor images = at::rand({3, 3, 8, 8}, gen) * 2 - 1;
  const at::Tensor rows = model->training_loss(images, Conditioning{{}, {"a", "b c", "d"}}, 2, gen);
  EXPECT_EQ(rows.sizes(), (std::vector<std::int64_t>{6}));
  EXPECT_TRUE(at::isfinite(rows).all().item<bool>());
  EXPECT_THROW(model->training_loss(images, Conditioning{}, 1, gen), std::invalid_argument);  // uncaptioned data
  try {
    privdiff::testing::make_installed<Model>("compvis_ldm", {{"config", ConfigValue{(folder / "model.safetensors").string()}}});
    FAIL() << "a text-conditioned LDM without its vocabulary was accepted";
  } catch (const KeyValueError& e) {
    EXPECT_EQ(e.key_path(), "model.tokenizer");
  }
  const fs::path short_vocab = fs::temp_directory_path() / ("privdiff_vocab_" + std::to_string(::getpid()) + ".txt");
  std::ofstream(short_vocab) << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n";
  try {
    txt2img({{"tokenizer", ConfigValue{short_vocab.string()}}});
    FAIL() << "a vocabulary of another size was accepted";
  } catch (const KeyValueError& e) {
    EXPECT_NE(std::string(e.what()).find("6 tokens, but the BERTEmbedder has 404"), std::string::npos) << e.what();
  }
  fs::remove(short_vocab);
}
