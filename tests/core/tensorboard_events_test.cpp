// TensorBoard's event files: the encoder against the bytes tensorboard's own RecordWriter wrote for
// the same events (tests/fixtures/tensorboard/scalars.tfevents, scripts/make_tensorboard_fixtures.sh),
// CRC-32C against its published check value, and a run's event file rebuilt from metrics.jsonl.
#include "run/metrics_log.hpp"
#include "run/tensorboard_events.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>

namespace privdiff::core {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(TensorBoardEvents, Crc32cIsCastagnolis) {
  const std::string check = "123456789";  // the CRC catalogue's check input
  EXPECT_EQ(crc32c(check.data(), check.size()), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(TensorBoardEvents, BytesEqualTensorBoardsOwnWriter) {
  // The events of scripts/tensorboard_fixtures/tensorboard_reference.py, in its order.
  std::string ours = tfrecord(file_version_event(0));
  ours += tfrecord(scalars_event(12.5, 1, {{"train/loss", 0.75f}, {"train/epsilon", 1.25f}}));
  ours += tfrecord(scalars_event(0, 2, {{"train/epsilon", 2.5f}, {"train/grad_norm", 0.0f}}));
  ours += tfrecord(scalars_event(1e9 + 0.125, 300000,
                                 {{"eval/dpdm_classifiers/accuracy.logreg", 0.7f}, {"\u00fcn\u00efcode/\u00e9", -1.5f}}));
  ours += tfrecord(scalars_event(3.0, 0, {{"query/epsilon", 0.17f}}));
  const std::string reference = read_bytes(fs::path(PRIVDIFF_TEST_FIXTURE_DIR) / "tensorboard" / "scalars.tfevents");
  ASSERT_EQ(reference.size(), 314u);
  EXPECT_EQ(ours, reference);
}

TEST(TensorBoardEvents, ARunsEventFileFollowsItsMetrics) {
  const fs::path run = fs::temp_directory_path() / "privdiff-tensorboard-test";
  fs::remove_all(run);
  fs::create_directories(run);
  const nlohmann::json step1 = {{"stage", "train"}, {"step", 1}, {"epsilon", 0.5}};
  const nlohmann::json step2 = {{"stage", "train"}, {"step", 2}, {"loss", 0.25}, {"seconds", 3.5}, {"mechanism", {{"clip_fraction", 0.125}}}};
  const nlohmann::json eval = {{"eval", {{"evaluators", {{"dpdm_classifiers", {{"metrics", {{"accuracy.logreg", 0.75}}}}}}}}}};
  {
    MetricsLog log;
    log.open(run);
    log.write(step1);
    log.write(step2);
    log.write(eval);
    log.write({{"note", "not a figure"}});
  }
  const std::string expected = tfrecord(file_version_event(0)) + tfrecord(scalars_event(0, 1, {{"train/epsilon", 0.5f}})) +
                               tfrecord(scalars_event(3.5, 2, {{"train/loss", 0.25f}, {"train/clip_fraction", 0.125f}})) +
                               tfrecord(scalars_event(0, 2, {{"eval/dpdm_classifiers/accuracy.logreg", 0.75f}}));
  const fs::path events = run / tensorboard_events_file;
  EXPECT_EQ(read_bytes(events), expected);
  // Reopened (a resumed run, its metrics.jsonl cut back to step 1): the events are rebuilt to match.
  std::ofstream(run / "metrics.jsonl", std::ios::trunc) << step1.dump() << "\n";
  {
    MetricsLog log;
    log.open(run);
    log.write(step2);
  }
  const std::string resumed = tfrecord(file_version_event(0)) + tfrecord(scalars_event(0, 1, {{"train/epsilon", 0.5f}})) +
                              tfrecord(scalars_event(3.5, 2, {{"train/loss", 0.25f}, {"train/clip_fraction", 0.125f}}));
  EXPECT_EQ(read_bytes(events), resumed);
  // privdiff eval appends (the run may still be writing the file); a diverged loss (NaN, null in
  // metrics.jsonl) is left out live as it is when rebuilt.
  {
    MetricsLog log;
    log.open(run, MetricsLog::Events::append);
    log.write(eval);
    log.write({{"stage", "train"}, {"step", 3}, {"loss", std::nan("")}, {"epsilon", 0.75}});
  }
  const std::string appended = resumed + tfrecord(scalars_event(0, 2, {{"eval/dpdm_classifiers/accuracy.logreg", 0.75f}})) +
                               tfrecord(scalars_event(0, 3, {{"train/epsilon", 0.75f}}));
  EXPECT_EQ(read_bytes(events), appended);
  {
    MetricsLog log;
    log.open(run);
  }
  EXPECT_EQ(read_bytes(events), appended);
  fs::remove_all(run);
}

}  // namespace
}  // namespace privdiff::core
