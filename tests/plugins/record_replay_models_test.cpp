// The record-replay sensitivity audit (tests/sdk/engine/record_replay.hpp) on the real diffusion
// networks, each built by its installed plugin in a tiny configuration (8x8 images, 8 channels, two
// levels, float64): pixel_unet (DDPM++ with self-attention), latent_unet (SpatialTransformers
// cross-attending to the class, behind its frozen autoencoder), diffusers_unet (UNet2DModel's
// layout, from a fixture config.json) and dpdm_ncsnpp (NCSN++). The mechanism is DP-SGD configured
// through the dpsgd plugin's own schema; its denoising loss draws noise levels for a whole chunk,
// so the audit keeps x alone in the last chunk of 2. Then only a subset training (LoRA, IA3,
// attention-only): C holds and everything else stays bit-identical. Then a later step (k = 3, x in
// no earlier batch), and a run stopped after 2 steps and resumed from its checkpoint (the host's
// save_checkpoint / load_checkpoint): it equals the uninterrupted run, and its first step after the
// resume keeps C. Planted bugs (clipping at 2C; a selection ignored) are reported on real models.
// Text-to-image (CompVis's txt2img layout, DP-LDM's selection; Stable Diffusion's layout with LoRA):
// a record is an image and its caption, x's caption alone moves the release by at most C, and a text
// encoder trained outside the clipping is reported.
#include "../sdk/engine/record_replay.hpp"
#include "installed_plugins.hpp"

#include <privdiff/components/adapter.hpp>
#include <privdiff/components/model.hpp>
#include <privdiff/config/config.hpp>
#include <privdiff/engine/dp_sgd_mechanism.hpp>
#include <privdiff/engine/parameter_selection.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

using namespace privdiff;
using namespace privdiff::testing::replay;
using sdk::ConfigValue;

namespace {

constexpr std::int64_t records = 21, batch = 7, chunk = 2, classes = 3;
constexpr double clip = 1.0;
const ImageShape shape{1, 8, 8};
using Values = std::map<std::string, ConfigValue>;
using V = std::vector<std::int64_t>;

ConfigValue integer(std::int64_t v) { return ConfigValue{v}; }

// A stage as the dpsgd plugin reads it: SGD with lr 1, no momentum or EMA (the update is the noised
// gradient), reproducible streams, the vectorised engine in chunks of 2; `extra` on top.
engine::DpSgdOptions dpsgd_stage(const Values& extra = {}) {
  Values v{{"batch_size", integer(batch)},        {"steps", integer(2)},
           {"noise_multiplier", ConfigValue{0.5}}, {"max_grad_norm", ConfigValue{clip}},
           {"optimizer", ConfigValue{std::string("sgd")}}, {"momentum", ConfigValue{0.0}},
           {"lr", ConfigValue{1.0}},              {"ema", ConfigValue{0.0}},
           {"secure_noise", ConfigValue{false}},  {"engine_path", ConfigValue{std::string("vectorised")}},
           {"physical_batch_size", integer(chunk)}};
  for (const auto& [key, value] : extra) v[key] = value;
  return engine::dp_sgd_options(sdk::make_config(engine::dp_sgd_schema(true, false), "stage", v), true);
}

// Installed model `id` with `values`, the same weights for every run (the global generator seeded
// first); `prepare` then adapts it (an adapter, a fitted autoencoder).
ModelSpec installed(const std::string& id, const Values& values,
                    const std::function<void(sdk::Model&)>& prepare = {}) {
  ModelSpec spec;
  spec.make = [id, values, prepare] {
    at::manual_seed(1);
    auto model = privdiff::testing::make_installed<sdk::Model>(id, values);
    if (prepare) prepare(*model);
    move_off_zero(*model);
    return model;
  };
  return spec;
}

Values unet_values() {
  return {{"channels", integer(8)},     {"channel_mult", ConfigValue{V{1, 2}}},
          {"num_res_blocks", integer(1)}, {"attention_resolutions", ConfigValue{V{4}}},
          {"image_size", integer(8)},    {"num_classes", integer(classes)}};
}

ModelSpec pixel_unet() { return installed("pixel_unet", unet_values()); }

// Public images the latent model's autoencoder fits its scale factor on.
class PublicImages : public ReplayData {
 public:
  PublicImages() : ReplayData(random_images(16, 3, shape).to(at::kFloat)) {}  // the model is float32 here
  bool is_public() const override { return true; }
};

// 8x8 images -> 4x4x2 latents; SpatialTransformers at 4x4, 2x2 and in the middle. The autoencoder
// is fitted on public data first, as a public stage would.
ModelSpec latent_unet() {
  return installed("latent_unet",
                   {{"image_size", integer(8)},         {"autoencoder_channels", integer(8)},
                    {"autoencoder_channel_mult", ConfigValue{V{1, 2}}}, {"latent_channels", integer(2)},
                    {"channels", integer(8)},           {"channel_mult", ConfigValue{V{1, 2}}},
                    {"attention_resolutions", ConfigValue{V{4, 2}}}, {"num_classes", integer(classes)}},
                   [](sdk::Model& model) {
                     engine::ParameterSelection autoencoder;
                     autoencoder.preset = "autoencoder";
                     engine::apply_parameter_selection(model, autoencoder);
                     model.after_public_stage(PublicImages());
                   });
}

ModelSpec diffusers_unet() {  // 1 channel, 8x8, levels of 8 and 16 channels, attention at 4x4, 3 classes
  const auto folder = std::filesystem::path(PRIVDIFF_TEST_FIXTURE_DIR) / "weights" / "diffusers" / "unet2d_classes";
  return installed("diffusers_unet", {{"config", ConfigValue{folder.string()}},
                                      {"image_size", integer(8)},
                                      {"num_classes", integer(classes)}});
}

ModelSpec dpdm_ncsnpp() { return installed("dpdm_ncsnpp", unet_values()); }

// CompVis's txt2img layout (DP-LDM's text-to-image row), the fixture's tiny LDM: 3x8x8 images, its
// BERTEmbedder the cond_stage_model. Every caption counts (no dropout), so x's is always audited.
const std::filesystem::path text_fixtures = std::filesystem::path(PRIVDIFF_TEST_FIXTURE_DIR) / "text";
ModelSpec txt2img() {
  const auto ldm = text_fixtures / "compvis_txt2img" / "model.safetensors";
  return installed("compvis_ldm", {{"config", ConfigValue{ldm.string()}},
                                   {"tokenizer", ConfigValue{(text_fixtures / "bert_vocab.txt").string()}},
                                   {"caption_dropout", ConfigValue{0.0}}});
}

// Stable Diffusion's layout, the fixture pipeline (diffusers' StableDiffusionPipeline, tiny): 3x8x8 images
// through its AutoencoderKL to 4x4x4 latents, its UNet2DConditionModel cross-attending to its frozen CLIP
// text encoder, with LoRA on every transformer's attention (DP-LoRA's setting; PEFT's SD targets).
ModelSpec stable_diffusion_lora() {
  const auto sd = std::filesystem::path(PRIVDIFF_TEST_FIXTURE_DIR) / "weights" / "diffusers" / "sd_tiny";
  return installed("diffusers_unet", {{"config", ConfigValue{(sd / "unet").string()}},
                                      {"autoencoder", ConfigValue{(sd / "vae").string()}},
                                      {"text_encoder", ConfigValue{(sd / "text_encoder").string()}},
                                      {"tokenizer", ConfigValue{(sd / "tokenizer").string()}},
                                      {"image_size", integer(8)},
                                      {"caption_dropout", ConfigValue{0.0}}},
                   [](sdk::Model& m) {
                     privdiff::testing::make_installed<sdk::Adapter>(
                         "lora", {{"rank", integer(2)}, {"targets", ConfigValue{std::string("attn[12]\\.(to_q|to_k|to_v|to_out\\.0)$")}}})
                         ->wrap(m.module());
                   });
}

engine::ParameterSelection preset(const std::string& name) {
  engine::ParameterSelection s;
  s.preset = name;
  return s;
}

template <class T = RecordingMechanism>
DpSgdAudit audit_of(const std::string& name, const ModelSpec& model, const engine::DpSgdOptions& options) {
  DpSgdAudit a;
  a.name = name;
  a.mechanism = recording<T>(options);
  a.model = model;
  a.batch_size = batch;
  a.max_grad_norm = options.max_grad_norm;
  a.x_alone_in_chunk = chunk;
  a.next_steps = 0;  // these audits are of the models' engine paths; the next steps are record_replay_test's
  return a;
}

Report run_audit(const DpSgdAudit& a) {
  const auto start = std::chrono::steady_clock::now();
  const Report r = audit_dp_sgd(a, ReplayData::in_classes(random_images(records, 7, shape), classes),
                                adversarial_neighbours(1e6, 1, shape), typical_reference(shape));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << a.name << " (" << seconds << " s):\n" << r.describe();
  return r;
}

// No finding, and the largest distance is C itself: an extreme x's gradient is clipped to C (the
// engine's factor C / (norm + 1e-6)), which the release shows whole, so the audit measured the bound.
void expect_clean(const DpSgdAudit& a) {
  const Report r = run_audit(a);
  EXPECT_TRUE(r.violations.empty()) << r.describe();
  EXPECT_LE(r.worst_ratio(), 1.0 + a.relative_slack) << r.describe();
  EXPECT_GT(r.worst_ratio(), 1.0 - 1e-4) << r.describe();
  EXPECT_LT(r.fidelity, 1e-9);
}

// How many parameter tensors a stage left frozen, from a run's released trace ("trainable: a of b").
std::int64_t frozen_tensors(const StageRun& run) {
  for (const auto& line : run.trace.released) {
    if (line.rfind("trainable: ", 0) != 0) continue;
    const auto of = line.find(" of ");
    return std::stoll(line.substr(of + 4)) - std::stoll(line.substr(11, of - 11));
  }
  return -1;
}

// C holds with only `trains` training, the rest bit-identical (checked after every run), and some
// parameters really were frozen. C = 1e-3: a subset's gradients are small (after the networks'
// group norms an extreme x's are no larger than a typical one's), and the bound is met only where
// x is clipped.
void expect_clean_subset(const std::string& name, ModelSpec model, const std::string& train) {
  model.trains = preset(train);
  const engine::DpSgdOptions options = dpsgd_stage({{"train", ConfigValue{train}}, {"max_grad_norm", ConfigValue{1e-3}}});
  expect_clean(audit_of(name, model, options));
  const ReplayData d = ReplayData::in_classes(random_images(records, 7, shape), classes);
  const StageRun run = run_stage(recording<RecordingMechanism>(options), 1, model, d);
  EXPECT_GT(frozen_tensors(run), 0) << name;
  EXPECT_TRUE(run.frozen_moved.empty());
}

}  // namespace

// ---- The real networks, every parameter training ---------------------------------------------

// Also on the micro-batch path with the whole batch in one chunk: its loss runs example by example,
// so x (last) draws its noise after D's records, in their chunk.
TEST(RecordReplayModels, PixelUnet) {
  expect_clean(audit_of("pixel_unet", pixel_unet(), dpsgd_stage()));
  DpSgdAudit one_chunk = audit_of("pixel_unet, micro-batch, one chunk", pixel_unet(),
                                  dpsgd_stage({{"engine_path", ConfigValue{std::string("micro_batch")}},
                                               {"physical_batch_size", integer(0)}}));
  one_chunk.x_alone_in_chunk = 0;
  expect_clean(one_chunk);
}

TEST(RecordReplayModels, LatentUnetThroughItsFrozenAutoencoder) {
  expect_clean(audit_of("latent_unet", latent_unet(), dpsgd_stage()));
}

TEST(RecordReplayModels, DiffusersUNet2DModel) {
  expect_clean(audit_of("diffusers_unet", diffusers_unet(), dpsgd_stage()));
}

TEST(RecordReplayModels, DpdmNcsnpp) { expect_clean(audit_of("dpdm_ncsnpp", dpdm_ncsnpp(), dpsgd_stage())); }

// ---- A subset training -------------------------------------------------------------------------

TEST(RecordReplayModels, LoraOnThePixelUnetsAttention) {
  ModelSpec model = installed("pixel_unet", unet_values(), [](sdk::Model& m) {
    privdiff::testing::make_installed<sdk::Adapter>("lora", {{"rank", integer(2)}})->wrap(m.module());
  });
  expect_clean_subset("pixel_unet + LoRA, train = adapter", model, "adapter");
}

TEST(RecordReplayModels, Ia3OnTheLatentUnetsCrossAttention) {
  ModelSpec model = latent_unet();
  const auto fit = model.make;
  model.make = [fit] {
    auto m = fit();
    privdiff::testing::make_installed<sdk::Adapter>("ia3")->wrap(m->module());  // to_k, to_v
    return m;
  };
  expect_clean_subset("latent_unet + IA3, train = adapter", model, "adapter");
}

TEST(RecordReplayModels, AttentionOnlyOnTheLatentUnet) {
  expect_clean_subset("latent_unet, train = attention", latent_unet(), "attention");
}

// ---- Later steps and resumed runs --------------------------------------------------------------

// Step 3 after two steps on D and D ∪ {x} with x in neither batch: the states at step 3 are equal,
// so the third release differs by x's clipped gradient alone.
TEST(RecordReplayModels, AThirdStepWithFixedMembership) {
  DpSgdAudit a = audit_of("pixel_unet, step 3", pixel_unet(), dpsgd_stage({{"steps", integer(3)}}));
  a.step = 3;
  expect_clean(a);
}

// Adam with EMA (state the checkpoint must carry), stopped after 2 of 3 steps: the resumed run
// releases what the uninterrupted one does at every step and ends with the same weights and ledger.
TEST(RecordReplayModels, AResumedRunEqualsTheUninterruptedOne) {
  const auto options = dpsgd_stage({{"steps", integer(3)}, {"optimizer", ConfigValue{std::string("adam")}},
                                    {"lr", ConfigValue{1e-3}}, {"ema", ConfigValue{0.9}}});
  const MechanismFactory make = recording<RecordingMechanism>(options);
  const Report r = audit_resume("pixel_unet, Adam + EMA, resumed after step 2", make, make, 5, pixel_unet(),
                                ReplayData::in_classes(random_images(records, 7, shape), classes), 2);
  std::cout << r.describe();
  EXPECT_TRUE(r.violations.empty()) << r.describe();
  EXPECT_EQ(r.measurements.size(), 4u);  // three steps and the final weights, each at distance 0
}

// The first step after a resume (step 3, resumed after 2) keeps sensitivity C.
TEST(RecordReplayModels, TheStepAfterAResumeKeepsC) {
  ModelSpec model = pixel_unet();
  model.resume_after = 2;
  model.stop_and_resume = checkpointed_stop_and_resume;
  DpSgdAudit a = audit_of("pixel_unet, step 3 after a resume", model, dpsgd_stage({{"steps", integer(3)}}));
  a.step = 3;
  expect_clean(a);
}

// ---- Text-to-image: a record is an image and its caption ---------------------------------------

// D's records captioned, and x with an extreme image and caption, or a typical image and an extreme
// caption (captioned_neighbours): the release moves by at most C either way.
Report run_text_audit(const DpSgdAudit& a) {
  const ImageShape s{3, 8, 8};
  const ReplayData d = replay_records(random_images(records, 7, s), true);
  const Report r = audit_dp_sgd(a, d, captioned_neighbours(adversarial_neighbours(1e6, 1, s), s), typical_reference(s));
  std::cout << a.name << ":\n" << r.describe();
  return r;
}

/// Planted bug: the text encoder trained on the batch's plain gradient, outside the per-example
/// clipping (the UNet's clipped as it should be): a caption's influence is then unbounded.
class TrainsTheTextEncoderUnclipped : public RecordingMechanism {
 public:
  using RecordingMechanism::RecordingMechanism;

 protected:
  engine::ClippedSum clipped_chunk_sum(torch::nn::Module& module, const engine::RowLoss& loss,
                                       std::int64_t examples) override {
    std::vector<at::Tensor> encoder;
    std::vector<bool> is_encoder;
    for (const auto& p : module.named_parameters()) {
      if (!p.value().requires_grad()) continue;
      const bool text = p.key().rfind("cond_stage_model.", 0) == 0;
      is_encoder.push_back(text);
      if (text) encoder.push_back(p.value());
    }
    for (auto& p : encoder) p.set_requires_grad(false);
    engine::ClippedSum sum = DpSgdMechanism::clipped_chunk_sum(module, loss, examples);
    for (auto& p : encoder) p.set_requires_grad(true);
    const std::vector<at::Tensor> plain =
        torch::autograd::grad({loss(at::arange(examples, at::kLong)).sum()}, encoder, {}, false, false, true);
    std::vector<at::Tensor> merged;
    std::size_t unet = 0, text = 0;
    for (const bool e : is_encoder) {
      merged.push_back(e ? (plain[text].defined() ? plain[text] : at::zeros_like(encoder[text])) : sum.sums[unet]);
      e ? ++text : ++unet;
    }
    sum.sums = merged;
    record_chunk(examples, sum);
    return sum;
  }
};

// `model`, training `train` at C = 1e-3 (so that x's caption alone, with a typical image, moves a gradient
// past C and the audit measures the bound): no violation, and each caption-only neighbour clipped to C.
void expect_each_caption_at_the_bound(const std::string& name, ModelSpec model, const std::string& train) {
  model.trains = preset(train);
  const engine::DpSgdOptions options = dpsgd_stage({{"train", ConfigValue{train}}, {"max_grad_norm", ConfigValue{1e-3}}});
  DpSgdAudit a = audit_of(name, model, options);
  const Report r = run_text_audit(a);
  EXPECT_TRUE(r.violations.empty()) << r.describe();
  EXPECT_LE(r.worst_ratio(), 1.0 + a.relative_slack);
  int caption_alone = 0;
  for (const auto& m : r.measurements) {
    if (m.name.find("a typical image, its caption") == std::string::npos || m.name.find("released update") == std::string::npos) continue;
    ++caption_alone;
    EXPECT_GT(m.distance / m.bound, 1.0 - 1e-3) << m.name;  // clipped: the caption's gradient reached C
  }
  EXPECT_GE(caption_alone, 4);
}

TEST(RecordReplayModels, TextToImageEachCaptionWithinCAsDpLdmTrains) {
  // DP-LDM's selection: the SpatialTransformers and the whole text encoder.
  expect_each_caption_at_the_bound("txt2img, transformers and text encoder", txt2img(), "attention");
}

TEST(RecordReplayModels, StableDiffusionLoraEachCaptionWithinC) {
  // DP-LoRA on SD's layout: only the adapters train; the caption reaches them through the frozen text
  // encoder and the cross-attention.
  expect_each_caption_at_the_bound("SD layout + LoRA on attention", stable_diffusion_lora(), "adapter");
}

TEST(RecordReplayModels, ReportsATextEncoderTrainedOutsideTheClipping) {
  ModelSpec model = txt2img();
  model.trains = preset("attention");
  const engine::DpSgdOptions options = dpsgd_stage({{"train", ConfigValue{std::string("attention")}},
                                                    {"max_grad_norm", ConfigValue{1e-3}}});
  const Report r = run_text_audit(audit_of<TrainsTheTextEncoderUnclipped>("planted: txt2img, text encoder unclipped", model, options));
  bool caption = false;
  for (const auto& v : r.violations) {
    caption |= v.find("a typical image, its caption") != std::string::npos && v.find("more than the declared sensitivity") != std::string::npos;
  }
  EXPECT_TRUE(caption) << r.describe();
  EXPECT_GT(r.worst_ratio(), 2.0);
}

// ---- Planted bugs on a real model --------------------------------------------------------------

TEST(RecordReplayModels, ReportsAPlantedSensitivityOf2COnThePixelUnet) {
  const Report r = run_audit(audit_of<ClipsAtTwiceC>("planted: pixel_unet clipped at 2C", pixel_unet(), dpsgd_stage()));
  ASSERT_FALSE(r.violations.empty());
  EXPECT_NE(r.violations.front().find("more than the declared sensitivity"), std::string::npos) << r.violations.front();
  EXPECT_NEAR(r.worst_ratio(), 2.0, 1e-6);  // an extreme x contributes 2C
}

TEST(RecordReplayModels, ReportsAPlantedSelectionThatTrainsFrozenParameters) {
  ModelSpec model = pixel_unet();
  model.trains = preset("attention");
  const Report r = run_audit(audit_of<TrainsEverything>("planted: pixel_unet, attention-only stage training everything",
                                                        model, dpsgd_stage({{"train", ConfigValue{std::string("attention")}}})));
  bool frozen = false;
  for (const auto& v : r.violations) frozen |= v.find("moved, though the stage does not train them") != std::string::npos;
  EXPECT_TRUE(frozen) << r.describe();
  EXPECT_LE(r.worst_ratio(), 1.0 + 1e-9);  // its clipped sums are right: only the frozen check sees it
}
