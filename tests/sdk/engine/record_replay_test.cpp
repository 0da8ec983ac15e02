// Record-replay sensitivity audit of every private mechanism and path (issue #36 item 7; the harness
// is record_replay.hpp): DP-SGD on the vectorised and micro-batch paths, whole and chunked batches,
// flat and per-layer clipping, DPDM's noise multiplicity K > 1, bf16 autocast, two c10d ranks, later
// steps (x in no earlier batch) and a run stopped and resumed from its checkpoint;
// DP-FETA's central images (mean and mode queries, whole releases). Each runs the mechanism on D and
// D ∪ {x} with identical randomness for extreme and random x, and checks the release moved by at
// most the declared sensitivity and that nothing released or decided depends on x. The planted-bug
// tests show that the harness reports a sensitivity of 2C (at the first step and a later one) and
// chunking that depends on x. The real networks and adapters: tests/plugins/record_replay_models_test.cpp.
#include "record_replay.hpp"
#include "record_replay_central.hpp"

#include "parallel/local_launcher.hpp"
#include "parallel/process_group.hpp"

#include <privdiff/engine/central_images.hpp>
#include <privdiff/engine/dp_sgd_mechanism.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <thread>

using namespace privdiff::testing::replay;
namespace engine = privdiff::sdk::engine;

namespace {

constexpr std::int64_t records = 21;  // N (not a multiple of 8: N and N + 1 records take the same sampling blocks)
constexpr std::int64_t batch = 7;     // B: q = 1/3
constexpr double clip = 1.0, sigma = 0.5;

// One configuration of the engine.
struct Path {
  std::string name;
  engine::EnginePath path = engine::EnginePath::vectorised;
  std::int64_t physical = 0;
  std::int64_t k = 1;
  engine::ClipMode clipping = engine::ClipMode::flat;
  engine::Precision precision = engine::Precision::float32;
  at::ScalarType dtype = at::kDouble;
  double clip = ::clip;  // C
  std::int64_t step = 1;  // k, the audited step (the stage takes k + 2: the next-steps replay)
};

DpSgdAudit audit_of(const Path& p) {
  engine::DpSgdOptions o = audit_options(batch, p.clip, sigma);
  o.steps = p.step + 2;
  o.engine_path = p.path;
  o.physical_batch_size = p.physical;
  o.noise_multiplicity = p.k;
  o.clipping = p.clipping;
  o.precision = p.precision;
  DpSgdAudit a;
  a.name = p.name;
  a.mechanism = recording<RecordingMechanism>(o);
  a.model.dtype = p.dtype;
  a.batch_size = batch;
  a.max_grad_norm = p.clip;
  a.step = p.step;
  if (p.dtype == at::kFloat) {  // float32 sums and updates: rounding of order 1e-7 relative
    a.relative_slack = 1e-4;
    a.fidelity = p.precision == engine::Precision::bf16 ? 1e-2 : 1e-5;
  }
  return a;
}

// Runs the audit, prints what it measured, and expects no finding.
Report expect_clean(const DpSgdAudit& a, double magnitude) {
  const Report r = audit_dp_sgd(a, random_images(records), adversarial_neighbours(magnitude), typical_reference());
  std::cout << a.name << ":\n" << r.describe();
  EXPECT_TRUE(r.violations.empty()) << r.describe();
  EXPECT_FALSE(r.measurements.empty());
  EXPECT_LE(r.worst_ratio(), 1.0 + a.relative_slack);
  return r;
}

// Two ranks of one run over Gloo on loopback, each a thread of this process (as
// tests/core/multi_process_engine_test.cpp), kept for every run of an audit.
class TwoRanks {
 public:
  TwoRanks() {
    const int port = privdiff::core::free_loopback_port();
    groups_.resize(2);
    on_both([&](int rank) {
      privdiff::core::ProcessPlace place{rank, 2, rank, 2, "127.0.0.1", port};
      groups_[static_cast<std::size_t>(rank)] =
          privdiff::core::connect_processes(place, "gloo", c10::Device(c10::kCPU), std::chrono::seconds(60));
    });
  }
  Runner runner() {
    return [this](const MechanismFactory& make, std::uint64_t seed, const ModelSpec& spec, const privdiff::sdk::Dataset& data) {
      std::vector<StageRun> runs(2);
      on_both([&](int rank) {
        runs[static_cast<std::size_t>(rank)] = run_stage(make, seed, spec, data, groups_[static_cast<std::size_t>(rank)].get());
      });
      return runs;
    };
  }

 private:
  void on_both(const std::function<void(int)>& f) {
    std::string errors[2];
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 2; ++rank) {
      threads.emplace_back([&, rank] {
        try {
          f(rank);
        } catch (const std::exception& e) {
          errors[rank] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& e : errors) {
      if (!e.empty()) throw std::runtime_error(e);
    }
  }
  std::vector<std::unique_ptr<privdiff::sdk::Collective>> groups_;
};

}  // namespace

// ---- DP-SGD, one process: every path the engine takes --------------------------------------

TEST(RecordReplay, DpSgdVectorisedAndMicroBatchPathsWholeAndChunked) {
  for (const Path& p : {Path{"dpsgd vectorised, whole batch", engine::EnginePath::vectorised, 0},
                        Path{"dpsgd auto (reproducible: vectorised), whole batch", engine::EnginePath::automatic, 0},
                        Path{"dpsgd vectorised, chunks of 2", engine::EnginePath::vectorised, 2},
                        Path{"dpsgd micro-batch, whole batch", engine::EnginePath::micro_batch, 0},
                        Path{"dpsgd micro-batch, chunks of 3", engine::EnginePath::micro_batch, 3}}) {
    expect_clean(audit_of(p), 1e6);
  }
  // C = 5: the random records' gradients (norms 1 to 5) are not clipped; the release moves by x's
  // whole gradient.
  Path unclipped{"dpsgd vectorised, C = 5", engine::EnginePath::vectorised, 2};
  unclipped.clip = 5.0;
  expect_clean(audit_of(unclipped), 1e6);
}

TEST(RecordReplay, DpSgdPerLayerClippingKeepsTheTotalBoundC) {
  for (const auto path : {engine::EnginePath::vectorised, engine::EnginePath::micro_batch}) {
    Path p{"dpsgd per-layer clipping, " + engine::to_string(path), path, 2};
    p.clipping = engine::ClipMode::per_layer;
    expect_clean(audit_of(p), 1e6);
  }
}

TEST(RecordReplay, DpdmNoiseMultiplicityKeepsSensitivityC) {
  for (const auto path : {engine::EnginePath::vectorised, engine::EnginePath::micro_batch}) {
    for (const std::int64_t physical : {0, 2}) {
      Path p{"dpdm K = 4, " + engine::to_string(path) + ", chunks " + std::to_string(physical), path, physical, 4};
      expect_clean(audit_of(p), 1e6);
    }
  }
}

TEST(RecordReplay, Bf16AutocastAndFloat32KeepSensitivityC) {
  for (const auto precision : {engine::Precision::float32, engine::Precision::bf16}) {
    for (const auto path : {engine::EnginePath::vectorised, engine::EnginePath::micro_batch}) {
      Path p{"dpsgd float32 model, " + engine::to_string(precision) + ", " + engine::to_string(path), path, 2, 2};
      p.precision = precision;
      p.dtype = at::kFloat;
      expect_clean(audit_of(p), 1e4);  // float32: pixels of 1e4 give gradient norms near 3e8
    }
  }
}

// ---- DP-SGD, two c10d ranks ------------------------------------------------------------------

TEST(RecordReplay, TwoGlooRanksKeepSensitivityCAndTheirDecisionsIndependentOfX) {
  if (!privdiff::core::has_backend("gloo")) GTEST_SKIP() << "built without Gloo (libgloo-dev)";
  TwoRanks ranks;
  // Fixed chunks: chunk c goes to rank c mod 2, x joins the last one (or opens one more).
  for (const Path& p : {Path{"two ranks, vectorised, chunks of 2", engine::EnginePath::vectorised, 2},
                        Path{"two ranks, micro-batch, chunks of 2, K = 3", engine::EnginePath::micro_batch, 2, 3}}) {
    DpSgdAudit a = audit_of(p);
    a.runner = ranks.runner();
    expect_clean(a, 1e6);
  }
  // Without a physical batch size each rank takes ceil(b / 2) examples: x's presence moves a record
  // of D to the other rank and chunk, and with it the loss's own draws (seeded per chunk). The
  // guarantee holds for any such draws; replaying them needs a deterministic loss.
  DpSgdAudit a = audit_of(Path{"two ranks, vectorised, one chunk per rank (deterministic loss)",
                               engine::EnginePath::vectorised, 0, 2});
  a.model.loss_noise = 0;
  a.runner = ranks.runner();
  expect_clean(a, 1e6);
}

// ---- Later steps and resumed runs -------------------------------------------------------------

// Step k > 1 with x in no earlier batch: the runs reach step k from the same state (the earlier
// releases are checked equal), so the k-th release differs by x's clipped gradient alone.
TEST(RecordReplay, LaterStepsWithFixedMembershipKeepSensitivityC) {
  for (const std::int64_t k : {2, 4}) {
    for (const auto path : {engine::EnginePath::vectorised, engine::EnginePath::micro_batch}) {
      Path p{"dpsgd step " + std::to_string(k) + ", " + engine::to_string(path) + ", chunks of 2", path, 2};
      p.step = k;
      expect_clean(audit_of(p), 1e6);
    }
  }
}

// A run stopped after 2 of 4 steps, its checkpoint written and read back by the host's own
// save_checkpoint / load_checkpoint: with Adam, EMA and K = 2 it releases what the uninterrupted run
// does and ends with the same weights and ledger; with SGD its first step after the resume keeps C.
TEST(RecordReplay, AResumedRunEqualsTheUninterruptedOneAndKeepsC) {
  engine::DpSgdOptions o = audit_options(batch, clip, sigma);
  o.steps = 4;
  o.optimizer = "adam";
  o.lr = 1e-2;
  o.ema = 0.9;
  o.noise_multiplicity = 2;
  o.physical_batch_size = 3;
  const MechanismFactory make = recording<RecordingMechanism>(o);
  const Report same = audit_resume("Adam + EMA, K = 2, resumed after step 2", make, make, 3, ModelSpec{},
                                   ReplayData(random_images(records)), 2);
  std::cout << same.describe();
  EXPECT_TRUE(same.violations.empty()) << same.describe();
  EXPECT_EQ(same.measurements.size(), 5u);  // four steps and the final weights, each at distance 0

  Path p{"dpsgd step 3, resumed after step 2", engine::EnginePath::vectorised, 2};
  p.step = 3;
  DpSgdAudit a = audit_of(p);
  a.model.resume_after = 2;
  a.model.stop_and_resume = checkpointed_stop_and_resume;
  expect_clean(a, 1e6);
}

// ---- A finding of the audit: the first step's engine report -----------------------------------

// The engine description a private stage reports on its first step (StepReport::engine, which the
// host writes to metrics.jsonl as "engine") must not depend on the records. Where the engine is not
// calibrated on synthetic chunks (a fixed engine_path, or reproducible noise), the norm planner
// plans each layer when it first meets it in a private chunk, so the report lists "norm_strategies"
// only when the first logical batch held an example: the published metrics tell whether the first
// Poisson batch was empty (for D with an empty batch and D ∪ {x}: whether x is in the data).
// Checked with secure noise (the default) and a fixed path: 3 records, q = 1/3, 40 one-step runs:
// the batch is empty in about 30% of them.
TEST(RecordReplay, TheFirstStepsEngineReportDoesNotDependOnTheBatch) {
  for (const auto path : {engine::EnginePath::vectorised, engine::EnginePath::automatic}) {
    engine::DpSgdOptions o = audit_options(1, clip, sigma);
    o.steps = 1;
    o.engine_path = path;
    o.secure_noise = path == engine::EnginePath::vectorised;  // auto with secure noise calibrates instead
    const MechanismFactory make = [o](std::uint64_t seed) {
      engine::DpSgdOptions with_seed = o;
      if (!o.secure_noise) with_seed.seed = seed;
      return std::unique_ptr<privdiff::sdk::Mechanism>(std::make_unique<engine::DpSgdMechanism>(with_seed));
    };
    const ReplayData data(random_images(3));
    std::map<std::string, std::string> seen;  // engine report -> what the first batch was
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
      const StageRun run = run_stage(make, seed, ModelSpec{}, data);
      bool empty = true;
      for (const auto& line : run.trace.internal) empty &= line.rfind("loss over", 0) != 0;
      seen[run.trace.released.front()] = empty ? "an empty first batch" : "a non-empty first batch";
    }
    std::string reports;
    for (const auto& [report, batch] : seen) reports += "\n  with " + batch + ": " + report;
    EXPECT_EQ(seen.size(), 1u) << engine::to_string(path) << (o.secure_noise ? ", secure noise" : ", reproducible noise")
                               << ": the first step's engine report depends on the batch:" << reports;
  }
}

// ---- Central images -------------------------------------------------------------------------

namespace {

engine::CentralImageOptions central_options(engine::CentralStatistic statistic) {
  engine::CentralImageOptions o;
  o.statistic = statistic;
  o.sampling_rate = 0.5;
  o.noise_multiplier = 0.3;
  o.resolution = 4;
  o.bins = 4;
  o.queries = 3;
  o.post_process = false;
  return o;
}

// Query-level neighbours: [1, 4, 4] images in [0, 1] (the downsampled space), in class 0 or 1.
std::vector<Neighbour> query_neighbours() {
  const auto opt = at::TensorOptions().dtype(at::kDouble);
  std::vector<Neighbour> xs{{"all ones (norm Delta), class 0", at::ones({1, 4, 4}, opt), 0},
                            {"all ones, class 1", at::ones({1, 4, 4}, opt), 1},
                            {"all zeros, class 0", at::zeros({1, 4, 4}, opt), 0},
                            {"checkerboard 0/1, class 1", at::arange(16, opt).remainder(2).reshape({1, 4, 4}), 1},
                            {"bin 2 everywhere, class 0", at::full({1, 4, 4}, 0.6, opt), 0}};
  for (int i = 0; i < 3; ++i) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(500 + i);
    xs.push_back({"random " + std::to_string(i + 1), at::rand({1, 4, 4}, gen, opt), i % 2});
  }
  return xs;
}

// Class 0: per pixel two records in bin 1 and two in bin 2 (a tie x can break) and one in bin 0;
// class 1: random. Labels 0 0 0 0 0 1 1 1 1 1 1.
struct Subsample {
  at::Tensor sampled, labels;
};
Subsample central_subsample() {
  const auto opt = at::TensorOptions().dtype(at::kDouble);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(31);
  const at::Tensor class0 = at::cat({at::full({2, 1, 4, 4}, 0.3, opt), at::full({2, 1, 4, 4}, 0.6, opt),
                                     at::full({1, 1, 4, 4}, 0.1, opt)});
  const at::Tensor class1 = at::rand({6, 1, 4, 4}, gen, opt);
  return {at::cat({class0, class1}), at::cat({at::zeros({5}, at::kLong), at::ones({6}, at::kLong)})};
}

}  // namespace

TEST(RecordReplay, CentralMeanQueryMovesOneClassByAtMostDelta) {
  const auto o = central_options(engine::CentralStatistic::mean);
  const Subsample s = central_subsample();
  const Report r = audit_central_mean(engine::central_mean, o, s.sampled, s.labels, {10.0, 12.0}, query_neighbours(), 3);
  std::cout << "central mean query:\n" << r.describe();
  EXPECT_TRUE(r.violations.empty()) << r.describe();
  EXPECT_NEAR(r.worst_ratio(), 1.0, 1e-9);  // the all-ones x is exactly Delta away
}

TEST(RecordReplay, CentralModeQueryMovesOnlyTowardsXByOneCount) {
  const auto o = central_options(engine::CentralStatistic::mode);
  const Subsample s = central_subsample();
  const Report r = audit_central_mode(engine::central_mode, o, s.sampled, s.labels, 2, query_neighbours(), 4);
  std::cout << "central mode query:\n" << r.describe();
  EXPECT_TRUE(r.violations.empty()) << r.describe();
  std::int64_t flipped = 0;  // the audit saw x win somewhere (else it proved nothing)
  for (const auto& m : r.measurements) flipped += m.distance > 0;
  EXPECT_GT(flipped, 0);
}

// release_central_images, as the central_images mechanism calls it, on D (N = 23 images) and D ∪ {x},
// with x in the first query's subsample and D's records sampled alike in every query. The mean's
// images lie in [-1, -0.9] (p in [0, 0.05]: no class mean reaches 1, so nothing is clamped); the
// mode's are uniform, so that x's one count can move a pixel's mode.
TEST(RecordReplay, CentralImagesReleasesOnNeighbouringDatasets) {
  CentralReplayData d;
  constexpr std::int64_t n = CentralReplayData::n, classes = CentralReplayData::classes;
  auto& gen = d.gen;
  const at::Tensor &dark = d.dark, &uniform = d.uniform, &labels = d.labels;
  const std::vector<Neighbour> xs{{"all +1, class 0", at::ones({1, 4, 4}), 0},
                                  {"all -1, class 1", -at::ones({1, 4, 4}), 1},
                                  {"checkerboard +-1, class 1", (at::arange(16).remainder(2) * 2 - 1).reshape({1, 4, 4}).to(at::kFloat), 1},
                                  {"random, class 0", at::rand({1, 4, 4}, gen) * 2 - 1, 0}};
  for (const auto statistic : {engine::CentralStatistic::mean, engine::CentralStatistic::mode}) {
    auto o = central_options(statistic);
    if (statistic == engine::CentralStatistic::mean) o.noise_multiplier = 1e-6;  // nothing clamped: the release inverts
    const at::Tensor& images = statistic == engine::CentralStatistic::mean ? dark : uniform;
    const std::uint64_t seed = replay_seed(n, o.sampling_rate, o.sampling_rate, true);
    auto release = [&](const at::Tensor& x, const at::Tensor& y) {
      engine::PoissonSampler sampler(x.size(0), o.sampling_rate,
                                     engine::RandomStream::reproducible(seed, 0, engine::StreamPurpose::sampling));
      auto noise = engine::GaussianNoise(engine::RandomStream::reproducible(seed, 0, engine::StreamPurpose::noise));
      return engine::release_central_images(x, y, classes, o, sampler, noise);
    };
    const engine::CentralImages on_d = release(images, labels);
    Report all;
    for (const Neighbour& x : xs) {
      const engine::CentralImages on_x =
          release(at::cat({images, x.image.unsqueeze(0)}), at::cat({labels, at::full({1}, x.label, at::kLong)}));
      all.merge(compare_central_releases(statistic == engine::CentralStatistic::mean ? "central images, mean"
                                                                                      : "central images, mode",
                                         o, on_d, on_x, x, n, classes));
    }
    std::cout << "central images release:\n" << all.describe();
    EXPECT_TRUE(all.violations.empty()) << all.describe();
    if (statistic == engine::CentralStatistic::mean) {
      EXPECT_NEAR(all.worst_ratio(), 1.0, 1e-4);  // x = all +1: Delta
    } else {
      EXPECT_GT(all.worst_ratio(), 0.0);  // x moved some pixel's mode (else the check proved nothing)
    }
  }
}

// ---- Planted bugs: the harness reports each ------------------------------------------------

TEST(RecordReplay, ReportsAPlantedSensitivityOf2C) {
  for (const std::int64_t step : {1, 3}) {  // the first step, and a later one
    engine::DpSgdOptions o = audit_options(batch, clip, sigma);
    o.steps = step + 2;
    DpSgdAudit a;
    a.name = "planted: clips at 2C, step " + std::to_string(step);
    a.mechanism = recording<ClipsAtTwiceC>(o);
    a.step = step;
    const Report r = audit_dp_sgd(a, random_images(records), adversarial_neighbours(1e6, 1), typical_reference());
    std::cout << r.describe();
    ASSERT_FALSE(r.violations.empty());
    EXPECT_NE(r.violations.front().find("more than the declared sensitivity"), std::string::npos) << r.violations.front();
    EXPECT_NEAR(r.worst_ratio(), 2.0, 1e-6);  // an extreme x contributes 2C
  }
}

TEST(RecordReplay, ReportsAPlantedResumeThatStartsOver) {
  engine::DpSgdOptions o = audit_options(batch, clip, sigma);
  o.steps = 4;
  const Report r = audit_resume("planted: a resume that starts over", recording<RecordingMechanism>(o),
                                recording<StartsOverOnResume>(o), 3, ModelSpec{}, ReplayData(random_images(records)), 2);
  std::cout << r.describe();
  ASSERT_FALSE(r.violations.empty());
  EXPECT_NE(r.violations.front().find("4 steps uninterrupted, 6 resumed"), std::string::npos) << r.describe();
  bool ledger = false;  // and it spent the two steps again
  for (const auto& v : r.violations) ledger |= v.find(": the ledger is ") != std::string::npos;
  EXPECT_TRUE(ledger) << r.describe();
}

TEST(RecordReplay, ReportsPlantedChunkingThatDependsOnX) {
  engine::DpSgdOptions o = audit_options(batch, clip, sigma);
  DpSgdAudit a;
  a.name = "planted: splits chunks with large gradients";
  a.mechanism = recording<SplitsChunksWithLargeGradients>(o);
  a.model.loss_noise = 0;  // the split's extra draws aside, only the chunking differs
  const Report r = audit_dp_sgd(a, random_images(records), adversarial_neighbours(1e6, 1), typical_reference());
  std::cout << r.describe();
  ASSERT_FALSE(r.violations.empty());
  bool chunking = false;
  for (const auto& v : r.violations) chunking |= v.find("internal count or decision depends on x's content") != std::string::npos;
  EXPECT_TRUE(chunking) << r.describe();
  EXPECT_LE(r.worst_ratio(), 1.0 + 1e-9);  // its sums are right: only the structure check can see it
}

TEST(RecordReplay, ReportsPlantedCentralQueriesThatCountRecordsTwice) {
  const Subsample s = central_subsample();
  const MeanQuery mean_twice = [](const at::Tensor& x, const at::Tensor& y, const std::vector<double>& sizes,
                                  const engine::CentralImageOptions& o, engine::GaussianNoise& noise) {
    return engine::central_mean(at::cat({x, x}), at::cat({y, y}), sizes, o, noise);
  };
  const Report mean = audit_central_mean(mean_twice, central_options(engine::CentralStatistic::mean), s.sampled,
                                         s.labels, {10.0, 12.0}, query_neighbours(), 3);
  std::cout << mean.describe();
  EXPECT_FALSE(mean.violations.empty());
  EXPECT_NEAR(mean.worst_ratio(), 2.0, 1e-9);
  const ModeQuery mode_twice = [](const at::Tensor& x, const at::Tensor& y, std::int64_t classes,
                                  const engine::CentralImageOptions& o, engine::GaussianNoise& noise) {
    return engine::central_mode(at::cat({x, x}), at::cat({y, y}), classes, o, noise);
  };
  const Report mode = audit_central_mode(mode_twice, central_options(engine::CentralStatistic::mode), s.sampled,
                                         s.labels, 2, query_neighbours(), 4);
  std::cout << mode.describe();
  EXPECT_FALSE(mode.violations.empty());
}
