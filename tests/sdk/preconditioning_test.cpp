// DPDM Table 7's preconditionings (with the authors'-code corrections) against their formulas,
// and the training sigma distributions against their definitions.
#include <privdiff/diffusion/denoising_loss.hpp>
#include <privdiff/diffusion/preconditioning.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>

using namespace privdiff::sdk::diffusion;

namespace {
const double sd = std::sqrt(1.0 / 3);
double at_(const at::Tensor& t) { return t.item<double>(); }
}  // namespace

TEST(Preconditioning, CoefficientsFollowTable7AndTheAuthorsCode) {
  for (double s : {0.002, 0.1, 1.0, 7.5, 80.0}) {
    const at::Tensor sigma = at::full({1}, s, at::kDouble);
    const auto edm = Preconditioning(Parameterization::edm).coefficients(sigma);
    EXPECT_NEAR(at_(edm.c_skip), sd * sd / (s * s + sd * sd), 1e-15);
    EXPECT_NEAR(at_(edm.c_out), s * sd / std::sqrt(sd * sd + s * s), 1e-15);
    EXPECT_NEAR(at_(edm.c_in), 1 / std::sqrt(s * s + sd * sd), 1e-13);
    EXPECT_NEAR(at_(edm.c_noise), std::log(s) / 4, 1e-15);
    const auto ve = Preconditioning(Parameterization::ve).coefficients(sigma);
    EXPECT_EQ(at_(ve.c_skip), 1.0);
    EXPECT_NEAR(at_(ve.c_out), s, 1e-15);
    EXPECT_NEAR(at_(ve.c_noise), std::log(s / 2), 1e-15);
    // v-prediction as in the code: c_skip = 1/(1+s^2) (Table 7 prints 1/sqrt(1+s^2)), c_out = +s/sqrt(1+s^2).
    const auto v = Preconditioning(Parameterization::v).coefficients(sigma);
    EXPECT_NEAR(at_(v.c_skip), 1 / (1 + s * s), 1e-15);
    EXPECT_NEAR(at_(v.c_out), s / std::sqrt(1 + s * s), 1e-15);
    EXPECT_NEAR(at_(v.c_noise), 2 / M_PI * std::acos(1 / std::sqrt(1 + s * s)), 1e-13);
    // VP: c_out = -s, c_noise = M t with sigma(t) = sqrt(exp(beta_d t^2/2 + beta_min t) - 1), M = 1000.
    const auto vp = Preconditioning(Parameterization::vp).coefficients(sigma);
    EXPECT_NEAR(at_(vp.c_out), -s, 1e-15);
    const double t = at_(vp.c_noise) / 1000;
    EXPECT_NEAR(std::sqrt(std::expm1(0.5 * 19.9 * t * t + 0.1 * t)), s, 1e-9 * s);
    // Loss weights.
    EXPECT_NEAR(at_(Preconditioning(Parameterization::edm).loss_weight(sigma)), (s * s + sd * sd) / (s * s * sd * sd), 1e-9);
    EXPECT_NEAR(at_(Preconditioning(Parameterization::v).loss_weight(sigma)), (s * s + 1) / (s * s), 1e-9);
    EXPECT_NEAR(at_(Preconditioning(Parameterization::vp).loss_weight(sigma)), 1 / (s * s), 1e-9);
  }
  EXPECT_THROW(parameterization_from_string("eps"), std::invalid_argument);
}

TEST(Preconditioning, TrainingSigmaDistributions) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const std::int64_t n = 200000;
  const at::Tensor edm = Preconditioning(Parameterization::edm).sample_training_sigma(n, gen).log();
  EXPECT_NEAR(at_(edm.mean()), -1.2, 5 * 1.2 / std::sqrt(double(n)));
  EXPECT_NEAR(at_(edm.std()), 1.2, 5 * 1.2 / std::sqrt(2.0 * n));
  const at::Tensor ve = Preconditioning(Parameterization::ve).sample_training_sigma(n, gen);
  EXPECT_GE(at_(ve.min()), 0.002);
  EXPECT_LE(at_(ve.max()), 80.0);
  const at::Tensor v = Preconditioning(Parameterization::v).sample_training_sigma(n, gen);
  EXPECT_GE(at_(v.min()), std::exp(-13.0 / 2) * (1 - 1e-9));  // logSNR 13: sigma = e^{-6.5}
  EXPECT_LE(at_(v.max()), std::exp(9.0 / 2) * (1 + 1e-9));    // logSNR -9: sigma = e^{4.5}
  const at::Tensor vp = Preconditioning(Parameterization::vp).sample_training_sigma(n, gen);
  EXPECT_GT(at_(vp.min()), 0.0);
  EXPECT_LE(at_(vp.max()), std::sqrt(std::expm1(0.5 * 19.9 + 0.1)) * (1 + 1e-9));
}

// DDPM's discrete objective: on a level sigma_t the network sees the timestep t and the DDPM input
// sqrt(abar_t) x_0 + sqrt(1 - abar_t) eps (= c_in (x_0 + sigma_t eps)); between levels, t follows
// log sigma linearly; training levels are the T levels, uniformly.
TEST(Preconditioning, DiscreteDdpmTimestepsAndLevels) {
  const std::vector<double> abar{0.99, 0.9, 0.6, 0.2};
  const Preconditioning p = Preconditioning::discrete(abar);
  ASSERT_EQ(p.discrete_sigmas().size(), 4u);
  for (std::size_t t = 0; t < abar.size(); ++t) {
    const double s = std::sqrt((1 - abar[t]) / abar[t]);
    EXPECT_NEAR(p.discrete_sigmas()[t], s, 1e-15);
    const auto c = p.coefficients(at::full({1}, s, at::kDouble));
    EXPECT_NEAR(at_(c.c_noise), static_cast<double>(t), 1e-12);
    EXPECT_NEAR(at_(c.c_in), std::sqrt(abar[t]), 1e-15);
    EXPECT_NEAR(at_(c.c_out), -s, 1e-15);
    EXPECT_EQ(at_(c.c_skip), 1.0);
  }
  const double s1 = p.discrete_sigmas()[1], s2 = p.discrete_sigmas()[2];
  const double between = std::exp(0.25 * std::log(s1) + 0.75 * std::log(s2));
  EXPECT_NEAR(at_(p.coefficients(at::full({1}, between, at::kDouble)).c_noise), 1.75, 1e-12);
  EXPECT_NEAR(at_(p.coefficients(at::full({1}, 1e-6, at::kDouble)).c_noise), 0.0, 1e-12);  // clamped to the ends
  EXPECT_NEAR(at_(p.coefficients(at::full({1}, 1e6, at::kDouble)).c_noise), 3.0, 1e-12);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  const at::Tensor drawn = p.sample_training_sigma(4000, gen);
  for (double s : p.discrete_sigmas()) {
    const double share = at_((drawn == s).to(at::kDouble).mean());
    EXPECT_NEAR(share, 0.25, 0.03);
  }
  EXPECT_THROW(Preconditioning::discrete({0.9, 0.95}), std::invalid_argument);
  EXPECT_THROW(Preconditioning(Parameterization::discrete), std::invalid_argument);
}

TEST(DenoisingLoss, KRowsPerExampleAndLabelDropoutSharedByTheRows) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(4);
  std::vector<at::Tensor> seen_labels;
  const Network net = [&](const at::Tensor& x, const at::Tensor&, const at::Tensor& labels) {
    seen_labels.push_back(labels);
    return at::zeros_like(x);
  };
  const at::Tensor images = at::rand({50, 1, 4, 4}) * 2 - 1;
  const at::Tensor labels = at::arange(50, at::kLong).remainder(10);
  const at::Tensor rows = denoising_loss(net, Preconditioning(Parameterization::edm), images, labels, {5, 0.5, 10}, gen);
  EXPECT_EQ(rows.sizes(), std::vector<std::int64_t>{250});
  EXPECT_TRUE((rows >= 0).all().item<bool>());
  const at::Tensor y = seen_labels.at(0).view({50, 5});
  EXPECT_TRUE((y == y.select(1, 0).unsqueeze(1)).all().item<bool>());  // one draw per example
  const double dropped = (y.select(1, 0) == 10).to(at::kDouble).mean().item<double>();
  EXPECT_GT(dropped, 0.2);
  EXPECT_LT(dropped, 0.8);
  EXPECT_TRUE(((y.select(1, 0) == labels) | (y.select(1, 0) == 10)).all().item<bool>());
}
