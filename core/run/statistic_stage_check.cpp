#include "run/statistic_stage_check.hpp"

#include "run/check_models.hpp"
#include "run/composed_run.hpp"
#include "util/usage_error.hpp"

#include <privdiff/check/statistic_replay.hpp>
#include <privdiff/components/mechanism.hpp>
#include <privdiff/components/model.hpp>
#include <privdiff/config/config.hpp>

#include <ATen/ATen.h>

#include <iostream>
#include <memory>
#include <sstream>
#include <string>

namespace privdiff::core {

namespace {

constexpr std::int64_t stand_in_records = 23;

// Builds the stage's mechanism from the recipe's values with reproducible noise from `noise_seed`,
// and every record in its Poisson subsamples (see below).
sdk::check::StatisticMechanism mechanism_with_seeded_noise(const Recipe& recipe, const ComponentRegistry& registry,
                                                           std::size_t stage, std::ostream& log) {
  const StageSection& section = recipe.stages[stage];
  const auto found = registry.find(sdk::ComponentKind::mechanism, section.mechanism.id);
  const sdk::Schema& schema = found->registration->schema;
  if (!schema.find("secure_noise") || !schema.find("seed")) {
    throw UsageError(recipe.file + ": stage '" + section.name + "' (" + section.mechanism.id +
                     "): the replay runs the mechanism twice with the same noise, and it has no secure_noise and seed "
                     "keys to make its noise reproducible (engine::add_release_noise_keys adds them)");
  }
  const std::string id = section.mechanism.id, path = section.mechanism.config.path();
  auto values = section.mechanism.config.values();
  // A subsample's rate (central_images' q_c) set to 1: x is then in every subsample, so its part is
  // always compared (at the recipe's 0.1, 9 replays in 10 would not include it), and the noise check
  // sees noise alone. Subsampling only lowers what a record can change; its amplification is the
  // accountant's, from the ledger.
  if (const double rate = schema.find("sampling_rate") ? section.mechanism.config.get_double("sampling_rate") : 1.0;
      rate != 1.0) {
    log << "sampling_rate " << rate << " set to 1 for the replay: every record, x included, in every subsample\n";
    values["sampling_rate"] = sdk::ConfigValue{1.0};
  }
  // A generator fitted to the released statistic (rff_embedding) is post-processing: the statistic the
  // replay compares is released before it, so one step and one image per class keep each run short.
  if (id == "rff_embedding") {  // its generator reads nothing but the released sums (rff_embedding.hpp)
    log << "generator_steps and images_per_class set to 1 for the replay: the generator post-processes the "
           "released statistic\n";
    values["generator_steps"] = sdk::ConfigValue{std::int64_t{1}};
    if (schema.find("images_per_class")) values["images_per_class"] = sdk::ConfigValue{std::int64_t{1}};
  }
  return [&registry, &schema, id, path, values](std::uint64_t noise_seed) {
    auto v = values;
    v["secure_noise"] = sdk::ConfigValue{false};
    v["seed"] = sdk::ConfigValue{static_cast<std::int64_t>(noise_seed)};
    return create_component<sdk::Mechanism>(registry, id, sdk::make_config(schema, path, v));
  };
}

// Extreme (every pixel at -1 or +1, a checkerboard, one hot pixel), blank and typical records of `shape`,
// spread over the classes.
std::vector<sdk::check::Neighbour> neighbours(const std::vector<std::int64_t>& shape, std::int64_t classes) {
  auto xs = sdk::check::adversarial_neighbours(1.0, 2, shape);  // the extremes of a dataset's [-1, 1]
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i].label = classes > 0 ? static_cast<std::int64_t>(i) % classes : 0;
  return xs;
}

// The stage prints its own progress to std::cout once per run; the check's output is its findings.
class QuietStdout {
 public:
  QuietStdout() : saved_(std::cout.rdbuf(sink_.rdbuf())) {}
  ~QuietStdout() { std::cout.rdbuf(saved_); }
  QuietStdout(const QuietStdout&) = delete;
  QuietStdout& operator=(const QuietStdout&) = delete;

 private:
  std::ostringstream sink_;
  std::streambuf* saved_;
};

}  // namespace

sdk::check::Report check_statistic_stage(const Recipe& recipe, const ComponentRegistry& registry, std::size_t stage,
                                         std::uint64_t seed, std::ostream& log) {
  if (!recipe.model) throw UsageError(recipe.file + ": the check runs the stage with the recipe's [model], and it has none");
  const auto make = mechanism_with_seeded_noise(recipe, registry, stage, log);
  at::manual_seed(seed);
  const std::unique_ptr<sdk::Model> model = create_model(recipe, registry);
  const auto asked = make(1);
  const auto public_name = asked->public_data_name();
  const std::unique_ptr<sdk::Dataset> public_data = open_public_data(recipe, registry, *asked);
  const std::int64_t classes = recipe.model->config.has("num_classes") ? recipe.model->config.get_int("num_classes") : 0;
  const std::vector<std::int64_t> shape = model->image_shape();
  const at::Tensor images = sdk::check::random_images(stand_in_records, 7 + seed, shape).to(at::kFloat);
  const sdk::check::ReplayData d = classes > 0 ? sdk::check::ReplayData::in_classes(images, classes)
                                               : sdk::check::ReplayData(images);
  const auto xs = neighbours(shape, classes);
  log << "replaying on " << stand_in_records << " stand-in records and D + x for " << xs.size()
      << " neighbours x, and twice on D with two noise seeds" << (public_name ? ", public data '" + *public_name + "'" : "")
      << " (the stage's own output is not shown)" << std::endl;
  sdk::check::StatisticReplayOptions options;
  options.noise_seed = 1 + 2 * seed;
  const auto one_run = sdk::check::statistic_stage(make, *model, public_data.get(), classes, seed);
  const std::size_t runs = xs.size() + 2;
  std::size_t done = 0;
  auto counted = [&](const sdk::Dataset& data, std::uint64_t noise_seed) {  // progress, on stderr
    std::cerr << "  run " << ++done << "/" << runs << " of the stage\n";
    return one_run(data, noise_seed);
  };
  const QuietStdout quiet;
  return sdk::check::check_statistic_releases(counted, d, xs, options);
}

}  // namespace privdiff::core
