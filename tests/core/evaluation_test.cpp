// Evaluation building blocks: Fréchet distance against closed forms, k-NN precision/recall,
// the IDX sample pair reader's checks, and the sample-set writer/reader round trip.
#include <privdiff/data/idx_file.hpp>
#include "evaluate/evaluation.hpp"
#include "evaluate/feature_statistics.hpp"
#include "sample/sample_set.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <filesystem>

using namespace privdiff::core;
namespace sdk = privdiff::sdk;
namespace fs = std::filesystem;

namespace {

GaussianFit fit(Eigen::VectorXd mean, Eigen::MatrixXd covariance) {
  GaussianFit f;
  f.mean = std::move(mean);
  f.covariance = std::move(covariance);
  return f;
}

fs::path temp_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("privdiff-eval-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST(FrechetDistance, ZeroForEqualGaussians) {
  Eigen::MatrixXd a = Eigen::MatrixXd::Random(6, 6);
  const Eigen::MatrixXd cov = a * a.transpose() + Eigen::MatrixXd::Identity(6, 6);
  EXPECT_NEAR(frechet_distance(fit(Eigen::VectorXd::Ones(6), cov), fit(Eigen::VectorXd::Ones(6), cov)), 0.0, 1e-9);
}

TEST(FrechetDistance, MatchesClosedFormForCommutingCovariances) {
  // Diagonal covariances: d = |m1 - m2|^2 + sum (sqrt(a_i) - sqrt(b_i))^2.
  Eigen::VectorXd a(3), b(3), m1(3), m2(3);
  a << 1, 4, 9;
  b << 4, 1, 0.25;
  m1 << 0, 1, 2;
  m2 << 1, 1, 0;
  const double expected = 1 + 0 + 4 + (1 - 2) * (1 - 2) + (2 - 1) * (2 - 1) + (3 - 0.5) * (3 - 0.5);
  EXPECT_NEAR(frechet_distance(fit(m1, a.asDiagonal()), fit(m2, b.asDiagonal())), expected, 1e-9);
  // Symmetric in its arguments even for non-commuting covariances.
  Eigen::MatrixXd r = Eigen::MatrixXd::Random(4, 4), s = Eigen::MatrixXd::Random(4, 4);
  const GaussianFit x = fit(Eigen::VectorXd::Zero(4), r * r.transpose()), y = fit(Eigen::VectorXd::Ones(4), s * s.transpose());
  EXPECT_NEAR(frechet_distance(x, y), frechet_distance(y, x), 1e-8);
}

TEST(FrechetDistance, GaussianFitOfSamples) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(1);
  const at::Tensor x = at::randn({20000, 3}, g, at::kDouble) * 2 + 1;
  const GaussianFit f = fit_gaussian(x);
  EXPECT_NEAR(f.mean(0), 1.0, 0.05);
  EXPECT_NEAR(f.covariance(1, 1), 4.0, 0.15);
  EXPECT_NEAR(f.covariance(0, 1), 0.0, 0.1);
}

TEST(PrecisionRecall, ASetAgainstItselfIsOne) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(2);
  const at::Tensor x = at::randn({500, 8}, g);
  const PrecisionRecall pr = precision_recall(x, x);
  EXPECT_DOUBLE_EQ(pr.precision, 1.0);
  EXPECT_DOUBLE_EQ(pr.recall, 1.0);
}

TEST(PrecisionRecall, FarApartSetsAreZeroAndACollapsedSetHasNoRecall) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(3);
  const at::Tensor real = at::randn({400, 4}, g);
  const PrecisionRecall far = precision_recall(real, at::randn({400, 4}, g) + 100);
  EXPECT_EQ(far.precision, 0.0);
  EXPECT_EQ(far.recall, 0.0);
  // Mode collapse: every generated point near the mean is precise but covers little of the data.
  const PrecisionRecall collapsed = precision_recall(real, at::randn({400, 4}, g) * 0.01);
  EXPECT_GT(collapsed.precision, 0.99);
  EXPECT_LT(collapsed.recall, 0.2);
}

TEST(SampleSet, WritesAnIdxPairThatReadsBack) {
  const fs::path dir = temp_dir("pair");
  SampleSet set;
  set.images = at::randint(0, 256, {40, 1, 28, 28}, at::kLong).to(at::kByte);
  set.labels = at::arange(40, at::kLong).floor_divide(4);
  const fs::path images = write_sample_set(dir / "s", set, true, 10);
  EXPECT_EQ(images.filename(), "s-images-idx3-ubyte.gz");
  EXPECT_EQ(labels_file_beside(images).filename(), "s-labels-idx1-ubyte.gz");
  EXPECT_TRUE(fs::is_regular_file(dir / "s-grid.png"));
  const LabelledImages back = read_labelled_images(images, labels_file_beside(images), 10);
  EXPECT_TRUE(back.labels.equal(set.labels));
  EXPECT_TRUE(((back.images + 1) * 127.5).round().to(at::kByte).equal(set.images));
  fs::remove_all(dir);
}

TEST(SampleSet, MismatchedOrCorruptFilesAreRefusedWithTheFileNamed) {
  const fs::path dir = temp_dir("bad");
  sdk::write_idx(dir / "a-images-idx3-ubyte", sdk::IdxArray{{3, 28, 28}, std::vector<std::uint8_t>(3 * 28 * 28, 7)});
  sdk::write_idx(dir / "a-labels-idx1-ubyte", sdk::IdxArray{{2}, {1, 2}});
  try {
    read_labelled_images(dir / "a-images-idx3-ubyte", dir / "a-labels-idx1-ubyte", 10);
    FAIL() << "a label count mismatch was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("has 2 labels for the 3 images"), std::string::npos) << e.what();
  }
  sdk::write_idx(dir / "a-labels-idx1-ubyte", sdk::IdxArray{{3}, {1, 12, 2}});
  try {
    read_labelled_images(dir / "a-images-idx3-ubyte", dir / "a-labels-idx1-ubyte", 10);
    FAIL() << "label 12 of 10 classes was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("label 12 at index 1 is not a class (0..9)"), std::string::npos) << e.what();
  }
  fs::resize_file(dir / "a-images-idx3-ubyte", 100);
  try {
    read_labelled_images(dir / "a-images-idx3-ubyte", dir / "a-labels-idx1-ubyte", 10);
    FAIL() << "a truncated images file was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("a-images-idx3-ubyte"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}
