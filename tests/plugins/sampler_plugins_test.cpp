// The sampler plugins on data whose ideal denoiser is known in closed form: x ~ N(mu_y, s^2) per
// pixel, D(x; sigma, y) = (s^2 x + sigma^2 mu_y) / (s^2 + sigma^2). With the ideal denoiser every
// sampler must reproduce the data mean and variance.
#include "installed_plugins.hpp"

#include <privdiff/components/model.hpp>
#include <privdiff/components/sampler.hpp>
#include <privdiff/diffusion/preconditioning.hpp>
#include <privdiff/diffusion/sampling.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

using namespace privdiff;
using namespace privdiff::sdk;

namespace {

constexpr double s = 0.5;

class GaussianData : public Model {
 public:
  // Class y has mean mu_y = 0.3 * (y + 1); "no label" (-1) or no labels at all: mean 0.3.
  torch::nn::Module& module() override { return module_; }
  at::Tensor denoise(const at::Tensor& x, const at::Tensor& sigma, const Conditioning& cond) override {
    at::Tensor mu = at::full({x.size(0)}, 0.3, x.options());
    if (cond.labels.defined()) mu = 0.3 * (cond.labels.clamp_min(0).to(x.options()) + 1) * (cond.labels >= 0).to(x.options()) + 0.3 * (cond.labels < 0).to(x.options());
    const at::Tensor s2 = at::full({1}, s * s, x.options());
    const at::Tensor sg2 = sigma.to(x.options()).pow(2).view({-1, 1, 1, 1});
    return (s2 * x + sg2 * mu.view({-1, 1, 1, 1})) / (s2 + sg2);
  }
  std::vector<ParameterInfo> parameters_with_roles() override { return {}; }
  std::vector<std::int64_t> sample_shape() const override { return {1, 2, 2}; }
  at::Tensor training_loss(const at::Tensor&, const Conditioning&, std::int64_t, at::Generator&) override {
    throw std::logic_error("analytic model: nothing to train");
  }

 private:
  torch::nn::Module module_;
};

void expect_gaussian(const at::Tensor& samples, double mean, const std::string& what) {
  const double n = static_cast<double>(samples.numel());
  EXPECT_NEAR(samples.mean().item<double>(), mean, 5 * s / std::sqrt(n) + 0.01) << what;
  EXPECT_NEAR(samples.to(at::kDouble).std().item<double>(), s, 0.03 * s) << what;
}

}  // namespace

TEST(Samplers, EveryPluginReproducesTheDataDistribution) {
  GaussianData model;
  const std::vector<std::pair<std::string, std::map<std::string, ConfigValue>>> cases = {
      {"edm_heun", {{"steps", ConfigValue{std::int64_t{32}}}}},
      {"edm_churn", {{"steps", ConfigValue{std::int64_t{64}}}, {"s_churn", ConfigValue{10.0}}}},
      // DDIM and the ancestral samplers are first order (Euler in sigma): they need more steps than Heun.
      {"ddim", {{"steps", ConfigValue{std::int64_t{256}}}}},
      {"ddim", {{"steps", ConfigValue{std::int64_t{256}}}, {"eta", ConfigValue{1.0}}}},
      // DP-LDM's sampling: CompVis's uniform DDIM timesteps on LDM's schedule, 200 of them.
      {"ddim", {{"steps", ConfigValue{std::int64_t{200}}}, {"schedule", ConfigValue{std::string("ldm")}}}},
      {"ddpm", {{"steps", ConfigValue{std::int64_t{256}}}}},
  };
  for (const auto& [id, values] : cases) {
    auto sampler = privdiff::testing::make_installed<Sampler>(id, values);
    SampleRequest request;
    request.count = 4000;
    request.seed = 11;
    const at::Tensor x = sampler->sample(model, request);
    EXPECT_EQ(x.sizes(), (std::vector<std::int64_t>{4000, 1, 2, 2})) << id;
    expect_gaussian(x, 0.3, id);
  }
}

TEST(Samplers, ClassConditionalSamplingAndSeeds) {
  GaussianData model;
  auto sampler = privdiff::testing::make_installed<Sampler>("edm_heun", {{"steps", ConfigValue{std::int64_t{32}}}});
  SampleRequest request;
  request.count = 2000;
  request.labels = at::full({2000}, 2, at::kLong);  // mean 0.9
  request.seed = 3;
  const at::Tensor x = sampler->sample(model, request);
  expect_gaussian(x, 0.9, "class 2");
  EXPECT_TRUE(at::equal(sampler->sample(model, request), x));  // same seed, same samples
  request.seed = 4;
  EXPECT_FALSE(at::equal(sampler->sample(model, request), x));
}

TEST(Guidance, ZeroIsConditionalAndWeightsFollowTheConvention) {
  GaussianData model;
  const at::Tensor x = at::randn({5, 1, 2, 2});
  const at::Tensor y = at::tensor({0, 1, 2, 3, 4}, at::kLong);
  const at::Tensor conditional = model.denoise(x, at::full({5}, 1.5), Conditioning{y});
  const at::Tensor unconditional = model.denoise(x, at::full({5}, 1.5), Conditioning{at::full({5}, -1, at::kLong)});
  EXPECT_TRUE(at::allclose(diffusion::guided_denoise(model, x, 1.5, y, 0.0), conditional));
  EXPECT_TRUE(at::allclose(diffusion::guided_denoise(model, x, 1.5, y, 0.25), 1.25 * conditional - 0.25 * unconditional));
}

// Denoises to a caption's length (its mean), and remembers the captions it was given.
class CaptionLengthModel : public GaussianData {
 public:
  at::Tensor denoise(const at::Tensor& x, const at::Tensor&, const Conditioning& cond) override {
    seen.push_back(cond.captions);
    at::Tensor out = at::zeros_like(x);
    for (std::size_t i = 0; i < cond.captions.size(); ++i) out[static_cast<std::int64_t>(i)].fill_(static_cast<double>(cond.captions[i].size()));
    return out;
  }
  bool conditions_on_text() const override { return true; }
  std::vector<std::vector<std::string>> seen;
};

TEST(Guidance, OnTextTheUnconditionalBranchHasTheEmptyCaption) {
  CaptionLengthModel model;
  const at::Tensor x = at::randn({2, 1, 2, 2});
  const at::Tensor d = diffusion::guided_denoise(model, x, 1.5, Conditioning{{}, {"abcd", "ab"}}, 0.5);
  ASSERT_EQ(model.seen.size(), 1u);  // one call for both branches
  EXPECT_EQ(model.seen[0], (std::vector<std::string>{"abcd", "ab", "", ""}));
  EXPECT_TRUE(at::allclose(d[0], at::full_like(d[0], 1.5 * 4)));  // (1 + w) D(x|c) - w D(x|"")
  EXPECT_TRUE(at::allclose(d[1], at::full_like(d[1], 1.5 * 2)));
  // A sampler hands each sample its own prompt, on every step.
  auto sampler = privdiff::testing::make_installed<Sampler>("ddim", {{"steps", ConfigValue{std::int64_t{3}}}});
  SampleRequest request;
  request.count = 3;
  request.captions = {"x", "yy", "zzz"};
  model.seen.clear();
  (void)sampler->sample(model, request);
  ASSERT_EQ(model.seen.size(), 3u);
  for (const auto& step : model.seen) EXPECT_EQ(step, request.captions);  // guidance 0: the conditional rows only
  request.captions.pop_back();
  EXPECT_THROW((void)sampler->sample(model, request), std::invalid_argument);  // one prompt per sample
}

TEST(KarrasSchedule, EndpointsAndOrder) {
  const at::Tensor sig = diffusion::karras_sigmas(10, 0.002, 80, 7);
  ASSERT_EQ(sig.numel(), 11);
  EXPECT_NEAR(sig[0].item<double>(), 80, 1e-9);
  EXPECT_NEAR(sig[9].item<double>(), 0.002, 1e-12);
  EXPECT_EQ(sig[10].item<double>(), 0.0);
  EXPECT_TRUE((sig.slice(0, 0, 10) > sig.slice(0, 1, 11)).all().item<bool>());
  EXPECT_THROW(diffusion::karras_sigmas(0), std::invalid_argument);
}

// CompVis's DDIMSampler levels (make_ddim_timesteps, "uniform"), against the values of its formulas in
// plain Python (scripts/text_fixtures/ldm_ddim_levels.py): betas between the square roots of 0.00085
// and 0.012 over 1000 levels, timesteps 1, 6, ..., 996, sigma_t = sqrt((1 - abar_t) / abar_t).
TEST(Samplers, LdmUniformDdimLevelsAreCompVisOwn) {
  const std::vector<double> abar = diffusion::ddpm_alphas_cumprod("scaled_linear", 0.00085, 0.012, 1000);
  const at::Tensor sigmas = diffusion::ldm_uniform_sigmas(abar, 200);
  ASSERT_EQ(sigmas.numel(), 201);
  EXPECT_NEAR(sigmas[0].item<double>(), 14.351515007476964, 1e-12 * 14.35);    // t = 996
  EXPECT_NEAR(sigmas[99].item<double>(), 1.623692081515863, 1e-12);            // t = 501
  EXPECT_NEAR(sigmas[199].item<double>(), 0.04131441199678309, 1e-13);          // t = 1
  EXPECT_NEAR(sigmas[200].item<double>(), 0.029167158151720367, 1e-13);         // abar_0: the last step's target
  EXPECT_THROW(diffusion::ldm_uniform_sigmas(abar, 3), std::invalid_argument);  // t = 1000: past the schedule
  EXPECT_THROW(diffusion::ldm_uniform_sigmas(abar, 1001), std::invalid_argument);
}
