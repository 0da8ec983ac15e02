#pragma once
/// @file
/// The models, data and neighbouring records of a record-replay check (check/record_replay.hpp): a
/// tiny stand-in denoiser of the engine's layer kinds, any sdk::Model with its forward calls logged,
/// private images held in memory, and extreme and typical records x.

#include <privdiff/components/dataset.hpp>
#include <privdiff/components/mechanism.hpp>
#include <privdiff/components/model.hpp>
#include <privdiff/parallel/collective.hpp>
#include <privdiff/privacy/ledger.hpp>
#include <privdiff/engine/parameter_selection.hpp>
#include <privdiff/engine/per_example_layers.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace privdiff::sdk::check {

namespace engine = privdiff::sdk::engine;

// ---------------------------------------------------------------------------------------------
// What a run did

/// An ordered record of a run's observable decisions, split by who may see them.
struct Trace {
  /// Released or public (ledger, step reports, engine plan, noise draws, released shapes): may
  /// depend on the public configuration and N only — the same on D and on D ∪ {x}.
  std::vector<std::string> released;
  /// Internal decisions (physical chunks, forward calls, collectives): may follow the realised
  /// batch size (x in the batch or not), never x's content — the same on D ∪ {x} and D ∪ {x_ref}.
  std::vector<std::string> internal;
};

// ---------------------------------------------------------------------------------------------
// Test doubles: a tiny model and dataset

/// A denoiser on 1x4x4 images from per-example layers of three kinds (conv, group norm, linear):
/// out = conv2(silu(norm(conv1(x)))) + lin(x). Its loss is the K-row denoising loss with the
/// loss's own noise from the engine's generator. Every loss evaluation is logged (rows and shape)
/// into `log` when set: the forward calls a step makes.
class ReplayModel : public sdk::Model {
 public:
  ReplayModel(at::ScalarType dtype, double loss_noise, std::uint64_t init_seed = 1)
      : net_(std::make_shared<torch::nn::Module>()), loss_noise_(loss_noise) {
    conv1_ = net_->register_module("conv1", std::make_shared<engine::Conv2d>(engine::Conv2dOptions{1, 4, {3, 3}, {1, 1}, {1, 1}}));
    norm_ = net_->register_module("norm", std::make_shared<engine::GroupNorm>(2, 4));
    conv2_ = net_->register_module("conv2", std::make_shared<engine::Conv2d>(engine::Conv2dOptions{4, 1, {3, 3}, {1, 1}, {1, 1}}));
    lin_ = net_->register_module("lin", std::make_shared<engine::Linear>(16, 16));
    net_->to(dtype);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(init_seed);
    torch::NoGradGuard no_grad;
    for (auto& p : net_->parameters()) p.copy_(at::randn(p.sizes(), gen, at::TensorOptions().dtype(at::kDouble)) * 0.3);
  }
  torch::nn::Module& module() override { return *net_; }
  at::Tensor denoise(const at::Tensor& x, const at::Tensor&, const sdk::Conditioning&) override { return body(x); }
  std::vector<sdk::ParameterInfo> parameters_with_roles() override { return {}; }
  std::vector<std::int64_t> sample_shape() const override { return {1, 4, 4}; }
  at::Tensor training_loss(const at::Tensor& images, const sdk::Conditioning&, std::int64_t k, at::Generator& gen) override {
    if (log) log->push_back("loss over " + std::to_string(images.size(0)) + " examples x K " + std::to_string(k));
    const at::Tensor x = images.to(lin_->weight.scalar_type()).repeat_interleave(k, 0);
    const at::Tensor noisy = loss_noise_ > 0 ? x + loss_noise_ * at::randn(x.sizes(), gen, x.options()) : x;
    return (body(noisy) - x).pow(2).flatten(1).mean(1);
  }
  at::Tensor body(const at::Tensor& x) {
    const at::Tensor h = conv2_->forward(at::silu(norm_->forward(conv1_->forward(x))));
    return h + lin_->forward(x.flatten(1)).view_as(h);
  }
  std::vector<std::string>* log = nullptr;

 private:
  std::shared_ptr<torch::nn::Module> net_;
  std::shared_ptr<engine::Conv2d> conv1_, conv2_;
  std::shared_ptr<engine::GroupNorm> norm_;
  std::shared_ptr<engine::Linear> lin_;
  double loss_noise_;
};

/// Any sdk::Model as the harness runs it (ModelSpec::make): every call goes to the model, and every
/// loss evaluation is logged (rows and shape) into `log` when set, as ReplayModel logs its own.
class LoggedModel : public sdk::Model {
 public:
  explicit LoggedModel(std::unique_ptr<sdk::Model> model) : model_(std::move(model)) {}
  torch::nn::Module& module() override { return model_->module(); }
  at::Tensor denoise(const at::Tensor& x, const at::Tensor& sigma, const sdk::Conditioning& cond) override {
    return model_->denoise(x, sigma, cond);
  }
  std::vector<sdk::ParameterInfo> parameters_with_roles() override { return model_->parameters_with_roles(); }
  std::vector<std::int64_t> sample_shape() const override { return model_->sample_shape(); }
  std::vector<std::int64_t> image_shape() const override { return model_->image_shape(); }
  bool conditions_on_text() const override { return model_->conditions_on_text(); }
  at::Tensor encode(const at::Tensor& images) override { return model_->encode(images); }
  at::Tensor decode(const at::Tensor& latents) override { return model_->decode(latents); }
  at::Tensor training_loss(const at::Tensor& images, const sdk::Conditioning& cond, std::int64_t k,
                           at::Generator& gen) override {
    if (log) log->push_back("loss over " + std::to_string(images.size(0)) + " examples x K " + std::to_string(k));
    if (!same_loss_draws) return model_->training_loss(images, cond, k, gen);
    at::Generator own = at::make_generator<at::CPUGeneratorImpl>(0x5a3e + loss_calls_++);
    return model_->training_loss(images, cond, k, own);
  }
  std::vector<std::string>* log = nullptr;
  /// The loss's noise (noise levels, diffusion noise) from a generator of its own, seeded by the count
  /// of loss calls so far, not from the engine's (seeded by the run's seed): ModelSpec::same_loss_draws.
  bool same_loss_draws = false;

 private:
  std::unique_ptr<sdk::Model> model_;
  std::uint64_t loss_calls_ = 0;
};

/// A mechanism for a run with the given seed (reproducible streams keyed by it).
using MechanismFactory = std::function<std::unique_ptr<sdk::Mechanism>(std::uint64_t seed)>;

struct ModelSpec;
struct StageRun;
namespace detail {
struct StageAttempt;
}
/// Stops `first` after ModelSpec::resume_after steps (checkpointing it) and finishes the stage in a
/// fresh model and mechanism restored from that checkpoint; returns them.
using StopAndResume = std::function<std::unique_ptr<detail::StageAttempt>(
    detail::StageAttempt& first, const MechanismFactory& make, std::uint64_t seed, const ModelSpec& spec,
    const sdk::Dataset& data, sdk::PrivacyLedger& ledger, StageRun& run, sdk::Collective* collective)>;

/// The released state one run had after a logical step, imposed on another run of the same stage
/// (the next-steps replay, record_replay.hpp): from then on both runs hold the same public state.
struct ImposedState {
  std::int64_t step = 0;               ///< after this logical step (from 1)
  std::vector<at::Tensor> weights;     ///< the weights the run had then (every parameter, module order)
  std::vector<at::Tensor> statistics;  ///< the values of its declared releases of that step, in order
};

/// The model of every run of an audit, and how each run goes.
struct ModelSpec {
  at::ScalarType dtype = at::kDouble;
  double loss_noise = 0.3;  ///< ReplayModel's loss noise; 0: a deterministic loss
  std::uint64_t init_seed = 1;  ///< ReplayModel's weights
  /// A real model instead of ReplayModel, built afresh for each run: it must give the same model,
  /// weights included, every time (seed the global generator before building it). Its module is
  /// cast to `dtype`.
  std::function<std::unique_ptr<sdk::Model>()> make;
  /// The parameters the stage trains; every other one must stay bit-identical (checked after each
  /// run). Unset: those the mechanism's select_trainable freezes must stay.
  std::optional<engine::ParameterSelection> trains;
  /// > 0: each run stops after this many logical steps and `stop_and_resume` finishes it in a fresh
  /// model and mechanism restored from a checkpoint, as `privdiff run --resume` does.
  std::int64_t resume_after = 0;
  /// Writes the checkpoint after resume_after steps and resumes from it: the host's checkpoint code
  /// (privdiff's tests give core's save_checkpoint / load_checkpoint; the SDK writes none).
  StopAndResume stop_and_resume;
  /// Set: the run's declared releases (engine::DpSgdMechanism::release_statistic) of step
  /// imposed->step return imposed->statistics, and its weights are set to imposed->weights after it.
  std::shared_ptr<const ImposedState> imposed;
  /// The public dataset every run's StageContext::public_data points to (the mechanism's
  /// public_data_name, opened by the host; records of the model's image shape); null: none.
  const sdk::Dataset* public_data = nullptr;
  /// ModelSpec::make's model draws its loss's noise the same in every run (LoggedModel::same_loss_draws):
  /// runs with different seeds then differ by the mechanism's noise alone, as with a ReplayModel of
  /// loss_noise 0 (the noise check's runs).
  bool same_loss_draws = false;
};

/// The model of one run (ModelSpec::make's, cast to spec.dtype, or a ReplayModel), its loss logged
/// into `log`.
inline std::unique_ptr<sdk::Model> build_model(const ModelSpec& spec, std::vector<std::string>* log) {
  if (!spec.make) {
    auto model = std::make_unique<ReplayModel>(spec.dtype, spec.loss_noise, spec.init_seed);
    model->log = log;
    return model;
  }
  auto model = std::make_unique<LoggedModel>(spec.make());
  model->module().to(spec.dtype);
  model->log = log;
  model->same_loss_draws = spec.same_loss_draws;
  return model;
}

/// Draws every parameter that is all zero small (N(0, 0.05^2), LibTorch's global generator), as training
/// would move it: LDM's transformers start with a zero proj_out and LoRA with a zero B, which zero the
/// gradients of the layers before them and would leave those layers' per-example gradients unchecked.
inline void move_off_zero(sdk::Model& model) {
  torch::NoGradGuard no_grad;
  for (auto& p : model.module().parameters()) {
    if (!p.any().item<bool>()) p.normal_(0, 0.05);
  }
}

/// Copies of every parameter of the model, in module order.
inline std::vector<at::Tensor> weights_of(sdk::Model& model) {
  std::vector<at::Tensor> out;
  for (const auto& p : model.module().parameters()) out.push_back(p.detach().clone());
  return out;
}

/// Private labelled images held in memory, captioned when `captions` is given (one per image: a
/// text-conditioned model's records are image and caption); with(x) appends x last (index N): D ∪ {x}.
class ReplayData : public sdk::Dataset {
 public:
  ReplayData(at::Tensor images, at::Tensor labels, std::int64_t classes = 1, std::vector<std::string> captions = {})
      : images_(std::move(images)), labels_(std::move(labels)), classes_(classes), captions_(std::move(captions)) {
    if (!captions_.empty() && static_cast<std::int64_t>(captions_.size()) != images_.size(0)) {
      throw std::invalid_argument("ReplayData: " + std::to_string(captions_.size()) + " captions for " +
                                  std::to_string(images_.size(0)) + " images");
    }
  }
  explicit ReplayData(const at::Tensor& images) : ReplayData(images, at::zeros({images.size(0)}, at::kLong)) {}
  /// The images labelled 0, 1, ..., classes - 1 in turn.
  static ReplayData in_classes(const at::Tensor& images, std::int64_t classes) {
    return ReplayData(images, at::arange(images.size(0), at::kLong).remainder(classes), classes);
  }
  /// These records, each with a caption (typical_captions: a text-conditioned model's records).
  ReplayData captioned(std::vector<std::string> captions) const {
    return ReplayData(images_, labels_, classes_, std::move(captions));
  }
  std::int64_t size() const override { return images_.size(0); }
  at::Tensor images(const at::Tensor& idx) const override { return images_.index_select(0, idx); }
  at::Tensor labels(const at::Tensor& idx) const override { return labels_.index_select(0, idx); }
  bool has_captions() const override { return !captions_.empty(); }
  std::vector<std::string> captions(const at::Tensor& idx) const override {
    if (captions_.empty()) return {};
    std::vector<std::string> out;
    const at::Tensor at = idx.to(at::kLong).contiguous();
    for (std::int64_t i = 0; i < at.numel(); ++i) out.push_back(captions_.at(static_cast<std::size_t>(at[i].item<std::int64_t>())));
    return out;
  }
  std::int64_t num_classes() const override { return classes_; }
  bool is_public() const override { return false; }
  std::string name() const override { return "record-replay images"; }
  /// D ∪ {x}: x's image, label and (when these records are captioned) caption appended last.
  ReplayData with(const at::Tensor& image, std::int64_t label = 0, const std::string& caption = {}) const {
    std::vector<std::string> captions = captions_;
    if (!captions.empty()) captions.push_back(caption);
    return ReplayData(at::cat({images_, image.to(images_.scalar_type()).unsqueeze(0)}),
                      at::cat({labels_, at::full({1}, label, at::kLong)}), classes_, std::move(captions));
  }
  const at::Tensor& all_images() const { return images_; }
  const at::Tensor& all_labels() const { return labels_; }
  const std::vector<std::string>& all_captions() const { return captions_; }

 private:
  at::Tensor images_, labels_;
  std::int64_t classes_;
  std::vector<std::string> captions_;
};

/// A public dataset's images made into the stand-in's records: each image's channels averaged, then
/// area-averaged to `side` x `side` (float64), so that a mechanism that reads public data (GEP's
/// anchor gradients) can run on ReplayModel. Labels, size and name are the dataset's.
class StandInPublicData : public sdk::Dataset {
 public:
  explicit StandInPublicData(const sdk::Dataset& data, std::int64_t side = 4) : data_(data), side_(side) {}
  std::int64_t size() const override { return data_.size(); }
  at::Tensor images(const at::Tensor& idx) const override {
    const at::Tensor x = data_.images(idx).to(at::kDouble).mean(1, /*keepdim=*/true);
    return at::adaptive_avg_pool2d(x, {side_, side_});
  }
  at::Tensor labels(const at::Tensor& idx) const override { return data_.labels(idx); }
  std::int64_t num_classes() const override { return data_.num_classes(); }
  bool is_public() const override { return data_.is_public(); }
  std::string name() const override { return data_.name() + " (as 1x" + std::to_string(side_) + "x" + std::to_string(side_) + " stand-in records)"; }

 private:
  const sdk::Dataset& data_;
  std::int64_t side_;
};

/// A neighbouring record x: an image (and its label, and its caption when the records are captioned).
struct Neighbour {
  Neighbour(std::string name_, at::Tensor image_, std::int64_t label_ = 0, std::string caption_ = {})
      : name(std::move(name_)), image(std::move(image_)), label(label_), caption(std::move(caption_)) {}
  std::string name;
  at::Tensor image;  ///< [C, H, W]
  std::int64_t label = 0;
  std::string caption;  ///< UTF-8; read only where D's records are captioned (ReplayData::has_captions)
};

// ---------------------------------------------------------------------------------------------
// Neighbours

/// The shape [C, H, W] of one record (ReplayModel's: 1x4x4).
using ImageShape = std::vector<std::int64_t>;

/// Extreme but finite records of `shape`, plus typical random ones; `magnitude` sets how far out the
/// extreme pixels go.
inline std::vector<Neighbour> adversarial_neighbours(double magnitude, int random_ones = 3,
                                                     const ImageShape& shape = {1, 4, 4}) {
  const auto opt = at::TensorOptions().dtype(at::kDouble);
  const std::string m = std::to_string(static_cast<long long>(magnitude));
  std::vector<Neighbour> xs;
  xs.push_back({"every pixel +" + m, at::full(shape, magnitude, opt)});
  xs.push_back({"every pixel -" + m, at::full(shape, -magnitude, opt)});
  std::int64_t pixels = 1;
  for (const std::int64_t side : shape) pixels *= side;
  const at::Tensor stripes = (at::arange(pixels, opt).remainder(2) * 2 - 1).reshape(shape) * magnitude;
  xs.push_back({"checkerboard +-" + m, stripes});  // on 4-wide images, alternating columns
  at::Tensor hot = at::zeros(shape, opt);
  hot[0][1][2] = magnitude;
  xs.push_back({"one hot pixel", hot});
  xs.push_back({"all zero", at::zeros(shape, opt)});
  for (int i = 0; i < random_ones; ++i) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 + i);
    xs.push_back({"random " + std::to_string(i + 1), at::rand(shape, gen, opt) * 2 - 1});
  }
  return xs;
}

/// A typical record: what the adversarial ones are compared with for content independence.
inline Neighbour typical_reference(const ImageShape& shape = {1, 4, 4}) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(99);
  return {"typical reference", at::rand(shape, gen, at::TensorOptions().dtype(at::kDouble)) * 2 - 1, 0,
          "a photo of a typical record."};
}

/// Typical captions for n records: short sentences of common words, no two alike.
inline std::vector<std::string> typical_captions(std::int64_t n) {
  static const char* const subjects[] = {"woman", "man", "child", "dog", "cat", "house", "tree"};
  static const char* const details[] = {"smiling", "with short hair", "in the sun", "wearing a hat", "by the sea"};
  std::vector<std::string> out;
  for (std::int64_t i = 0; i < n; ++i) {
    out.push_back(std::string("a photo of a ") + subjects[i % 7] + " " + details[(i / 7) % 5] + ", number " +
                  std::to_string(i) + ".");
  }
  return out;
}

/// Whether the model of `spec` conditions on text (one model built to ask; the stand-in does not).
inline bool reads_text(const ModelSpec& spec) { return spec.make && spec.make()->conditions_on_text(); }

/// D of a check: `images`, each with a typical caption when the model reads text (`text`).
inline ReplayData replay_records(const at::Tensor& images, bool text) {
  return text ? ReplayData(images).captioned(typical_captions(images.size(0))) : ReplayData(images);
}

/// The neighbours of a text-conditioned model, whose record is an image and its caption: the image
/// neighbours (adversarial_neighbours) with an extreme caption for the extreme images (past the
/// context of 77 tokens) and typical ones for the rest, then a typical image with each extreme
/// caption, so that x's caption alone is audited too: one word 200 times (every position reads one
/// embedding row), characters no vocabulary holds ([UNK] or byte pieces), punctuation only, and the
/// empty caption (the unconditional one). The reference (typical_reference) gets a typical caption.
inline std::vector<Neighbour> captioned_neighbours(std::vector<Neighbour> images, const ImageShape& shape) {
  std::string past_context, one_word;
  for (int i = 0; i < 300; ++i) past_context += (i ? " " : "") + std::string("word") + std::to_string(i);
  for (int i = 0; i < 200; ++i) one_word += i ? " face" : "face";
  const std::vector<std::string> typical = typical_captions(static_cast<std::int64_t>(images.size()) + 100);
  for (std::size_t i = 0; i < images.size(); ++i) {
    const bool extreme = images[i].name.rfind("random", 0) != 0;
    images[i].caption = extreme ? past_context : typical[100 + i];
    if (extreme) images[i].name += ", its caption 300 words";
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(4242);
  const at::Tensor image = at::rand(shape, gen, at::TensorOptions().dtype(at::kDouble)) * 2 - 1;
  const std::pair<const char*, std::string> captions[] = {
      {"one word 200 times", one_word},
      {"characters no vocabulary holds", "\xF0\x9D\x94\x98\xF0\x9D\x94\xAB \xF0\x9F\x99\x82\xF0\x9F\x99\x82 \xE2\x88\x91\xE2\x88\xAB "
                                         "\xE6\xBC\xA2\xE5\xAD\x97 \xEA\xB0\x80 \xD7\x90"},
      {"punctuation only", "!!! ??? ... ,,, ;;; ((( ))) --- ***"},
      {"the empty caption", ""}};
  for (const auto& [what, caption] : captions) images.emplace_back(std::string("a typical image, its caption ") + what, image, 0, caption);
  return images;
}

/// N records of `shape` uniform in [-1, 1].
inline at::Tensor random_images(std::int64_t n, std::uint64_t seed = 7, const ImageShape& shape = {1, 4, 4}) {
  std::vector<std::int64_t> sizes{n};
  sizes.insert(sizes.end(), shape.begin(), shape.end());
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::rand(sizes, gen, at::TensorOptions().dtype(at::kDouble)) * 2 - 1;
}


}  // namespace privdiff::sdk::check
