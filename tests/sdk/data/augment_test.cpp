// The RandAugment op set on known images: each op's effect, level 0 = identity where the op has a
// magnitude, and rand_augment deterministic per seed.
#include <privdiff/data/augment.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

using namespace privdiff::sdk::data;

namespace {

// A grey 8 x 8 image in [-1, 1]: a bright 2 x 2 square at rows 2-3, columns 4-5 on a mid background.
at::Tensor square() {
  at::Tensor x = at::full({1, 8, 8}, -0.5);
  x.slice(1, 2, 4).slice(2, 4, 6).fill_(1.0);
  return x;
}

at::Tensor op(AugmentOp o, double m, bool negative = false) { return apply_augment_op(square(), o, m, negative); }

}  // namespace

TEST(Augment, FourteenOps) { EXPECT_EQ(augment_ops().size(), 14u); }

TEST(Augment, LevelZeroIsTheIdentityForOpsWithAMagnitude) {
  for (const AugmentOp o : augment_ops()) {
    if (o == AugmentOp::autocontrast || o == AugmentOp::equalize) continue;
    EXPECT_TRUE(at::allclose(op(o, 0), square(), 1e-6, 1e-6)) << to_string(o);
  }
}

TEST(Augment, EachOpDoesWhatItSays) {
  // autocontrast: the darkest pixel becomes -1, the brightest +1.
  const at::Tensor ac = apply_augment_op(square() * 0.5, AugmentOp::autocontrast, 0, false);
  EXPECT_NEAR(ac.min().item<double>(), -1, 1e-6);
  EXPECT_NEAR(ac.max().item<double>(), 1, 1e-6);
  // equalize: two levels spread to the ends of the range.
  const at::Tensor eq = op(AugmentOp::equalize, 0);
  EXPECT_NEAR(eq.min().item<double>(), -1, 1e-6);
  EXPECT_NEAR(eq.max().item<double>(), 1, 1e-6);
  // solarize at the top level inverts every pixel above 0 (in [0, 1]): the square becomes black.
  EXPECT_NEAR(op(AugmentOp::solarize, 30)[0][2][4].item<double>(), -1, 1e-6);
  // brightness down by 0.9 at the top level: p -> 0.1 p.
  EXPECT_NEAR(op(AugmentOp::brightness, 30, true)[0][2][4].item<double>(), 0.1 * 2 - 1, 1e-5);
  // contrast down: pixels move towards the mean.
  const at::Tensor lo = op(AugmentOp::contrast, 30, true);
  EXPECT_LT(lo.max().item<double>() - lo.min().item<double>(), 0.5);
  // posterize at the top level keeps 4 bits: 0.25 in [0, 1] (pixel -0.5) -> 64/255 -> 64 & 0xF0 = 64.
  EXPECT_NEAR(op(AugmentOp::posterize, 30)[0][0][0].item<double>(), 64.0 / 255 * 2 - 1, 1e-5);
  // color on a grey image: unchanged.
  EXPECT_TRUE(at::allclose(op(AugmentOp::color, 30), square(), 1e-6, 1e-6));
  // sharpness changes only the interior.
  const at::Tensor sharp = op(AugmentOp::sharpness, 30);
  EXPECT_TRUE(at::equal(sharp[0][0], square()[0][0]));
  EXPECT_FALSE(at::allclose(sharp, square()));
  // translation moves the square by 0.45 * 8 = 3.6 -> about 4 pixels along x; translate_y along y.
  const at::Tensor tx = op(AugmentOp::translate_x, 30);
  EXPECT_NEAR(tx.gt(0.9).sum().item<double>(), 4, 2);  // the square (partly) survives, moved
  EXPECT_FALSE(at::allclose(tx, square()));
  EXPECT_FALSE(at::allclose(op(AugmentOp::translate_y, 30), op(AugmentOp::translate_x, 30)));
  // shear and rotation keep the image size and the value range, and move pixels.
  for (const AugmentOp o : {AugmentOp::shear_x, AugmentOp::shear_y, AugmentOp::rotate}) {
    const at::Tensor y = op(o, 30);
    EXPECT_EQ(y.sizes(), square().sizes()) << to_string(o);
    EXPECT_FALSE(at::allclose(y, square())) << to_string(o);
    EXPECT_LE(y.max().item<double>(), 1.0);
  }
}

TEST(Augment, RandAugmentIsDeterministicPerSeed) {
  const at::Tensor batch = at::rand({6, 1, 8, 8}) * 2 - 1;
  RandAugmentOptions o;
  auto g1 = at::make_generator<at::CPUGeneratorImpl>(9), g2 = at::make_generator<at::CPUGeneratorImpl>(9),
       g3 = at::make_generator<at::CPUGeneratorImpl>(10);
  const at::Tensor a = rand_augment(batch, o, g1), b = rand_augment(batch, o, g2), c = rand_augment(batch, o, g3);
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_FALSE(at::equal(a, c));
  o.ops_per_image = 0;
  EXPECT_TRUE(at::equal(rand_augment(batch, o, g1), batch));
}
