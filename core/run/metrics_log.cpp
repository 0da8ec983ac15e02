#include "run/metrics_log.hpp"

#include "run/tensorboard_events.hpp"
#include "util/atomic_file.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace privdiff::core {

namespace fs = std::filesystem;

std::string MetricsLog::events_of(const nlohmann::json& line) {
  std::vector<std::pair<std::string, float>> scalars;
  // (A non-finite value, a diverged loss, is null in metrics.jsonl: left out here too, so that the
  // events rebuilt from metrics.jsonl are the events written live.)
  auto add = [&](const std::string& tag, const nlohmann::json& v) {
    if (v.is_number() && std::isfinite(v.get<double>())) scalars.emplace_back(tag, v.get<float>());
  };
  double wall_time = 0;
  if (line.contains("stage") && line.contains("step")) {
    ++step_;
    const std::string stage = line["stage"].is_string() ? line["stage"].get<std::string>() : "stage";
    for (const char* key : {"loss", "epsilon", "examples"}) {
      if (line.contains(key)) add(stage + "/" + key, line[key]);
    }
    const nlohmann::json figures = line.value("mechanism", nlohmann::json::object());  // (kept: items() refers to it)
    for (const auto& [name, value] : figures.items()) add(stage + "/" + name, value);
    if (line.contains("seconds") && line["seconds"].is_number()) wall_time = line["seconds"].get<double>();
  } else if (line.contains("eval") && line["eval"].is_object()) {
    const nlohmann::json evaluators = line["eval"].value("evaluators", nlohmann::json::object());
    for (const auto& [id, result] : evaluators.items()) {
      if (!result.is_object()) continue;
      const nlohmann::json metrics = result.value("metrics", nlohmann::json::object());
      for (const auto& [metric, value] : metrics.items()) add("eval/" + id + "/" + metric, value);
    }
  }
  return scalars.empty() ? std::string() : tfrecord(scalars_event(wall_time, step_, scalars));
}

void MetricsLog::open(const fs::path& run_dir, Events mode) {
  const fs::path jsonl = run_dir / "metrics.jsonl", events = run_dir / tensorboard_events_file;
  step_ = 0;
  std::string bytes = tfrecord(file_version_event(0));
  std::ifstream in(jsonl);
  for (std::string text; std::getline(in, text);) {
    const nlohmann::json line = nlohmann::json::parse(text, nullptr, false);
    if (line.is_object()) bytes += events_of(line);  // (a damaged line: in metrics.jsonl only)
  }
  std::error_code ec;
  if (mode == Events::rebuild || !fs::is_regular_file(events, ec)) write_file_atomically(events, bytes);
  jsonl_.open(jsonl, std::ios::app);
  events_.open(events, std::ios::app | std::ios::binary);
  if (!jsonl_ || !events_) throw std::runtime_error("cannot open " + jsonl.string() + " or " + events.string() + " for writing");
}

void MetricsLog::write(const nlohmann::json& line) {
  jsonl_ << line.dump() << "\n";
  events_ << events_of(line);
}

void MetricsLog::flush() {
  jsonl_.flush();
  events_.flush();
}

}  // namespace privdiff::core
