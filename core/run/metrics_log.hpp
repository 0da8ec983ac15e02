#pragma once
// A run's metrics.jsonl (one JSON object per line: a logical step's figures, an evaluation) and,
// beside it, the same figures as TensorBoard scalars in RUN/events.out.tfevents.privdiff, so that
// `tensorboard --logdir runs/` shows every run's loss and epsilon curves. The event file is a
// function of metrics.jsonl: rewritten from it when the log is opened (a resumed run's metrics.jsonl
// is cut back to its checkpoint first, so TensorBoard never shows steps that were redone).
//
// Scalars: a step line of stage S gives S/loss, S/epsilon, S/examples and S/<name> for each released
// mechanism figure it holds (what metrics.jsonl holds: a private stage's loss and batch size only with
// [run] private_diagnostics); an evaluation gives eval/<evaluator>/<metric>. The step is the run's
// logical step (counted over its stages, so curves continue from one stage to the next); the wall
// time is the line's `seconds` where it has them (a private step's time is secret: 0).

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>

namespace privdiff::core {

inline constexpr const char* tensorboard_events_file = "events.out.tfevents.privdiff";

class MetricsLog {
 public:
  enum class Events { rebuild, append };
  /// Opens RUN/metrics.jsonl for appending and rewrites RUN/events.out.tfevents.privdiff from the
  /// lines it holds, or (`append`: privdiff eval, perhaps while the run still trains and appends to
  /// the same file) appends to the event file as it is, when there is one. Throws
  /// std::runtime_error naming a file that cannot be written.
  void open(const std::filesystem::path& run_dir, Events events = Events::rebuild);
  bool is_open() const { return jsonl_.is_open(); }
  /// Appends `line` to metrics.jsonl and its scalars to the event file (buffered: see flush).
  void write(const nlohmann::json& line);
  /// Both files to the disk as far as written.
  void flush();

 private:
  std::string events_of(const nlohmann::json& line);

  std::ofstream jsonl_, events_;
  std::int64_t step_ = 0;  // logical steps so far, over the stages
};

}  // namespace privdiff::core
