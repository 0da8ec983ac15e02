// Time of one epsilon query and of a calibration, per accountant, on the settings the issue and
// the Python libraries' users quote. Run: build/bin/accountant_bench  (configure with
// -DPRIVDIFF_BUILD_BENCH=ON). Prints a markdown table; each time is the median of 5 runs.
#include "loader/component_registry.hpp"
#include "loader/plugin_discovery.hpp"

#include <privdiff/components/accountant.hpp>
#include <privdiff/privacy/calibration.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

using namespace privdiff;
using namespace privdiff::sdk;

namespace {

double median_seconds(const std::function<double()>& work, double& value, int repeats = 5) {
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    value = work();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

PrivacyEvent dpsgd(double sigma, double q, std::int64_t steps) {
  return PrivacyEvent::self_composed(PrivacyEvent::poisson_sampled(q, PrivacyEvent::gaussian(sigma)), steps);
}

}  // namespace

int main() {
  core::ComponentRegistry registry;
  registry.add_directory(core::default_plugin_directory());
  auto make = [&](const std::string& id) {
    auto found = registry.find(ComponentKind::accountant, id);
    if (!found) throw std::runtime_error("plugin " + id + " not found next to the benchmark");
    return core::create_component<Accountant>(registry, id, make_config(found->registration->schema, id));
  };
  auto rdp = make("rdp"), prv = make("prv");

  std::printf("| query | accountant | epsilon | time |\n|---|---|---|---|\n");
  struct Case {
    const char* name;
    Accountant* acc;
    const char* id;
    PrivacyEvent event;
  };
  const std::vector<Case> cases = {
      {"sigma 1.1, q 0.01, 2,000 steps", rdp.get(), "rdp", dpsgd(1.1, 0.01, 2000)},
      {"sigma 1.1, q 0.01, 100,000 steps", rdp.get(), "rdp", dpsgd(1.1, 0.01, 100000)},
      {"sigma 1.5, q 0.04, 2,249 steps", prv.get(), "prv", dpsgd(1.5, 0.04, 2249)},
      {"sigma 1.5, q 0.05, 50,000 steps", prv.get(), "prv", dpsgd(1.5, 0.05, 50000)},
      {"sigma 1.1, q 0.01, 2,000 steps", prv.get(), "prv", dpsgd(1.1, 0.01, 2000)},
  };
  for (const auto& c : cases) {
    double eps = 0;
    const double t = median_seconds([&] { return c.acc->epsilon(c.event, 1e-5).epsilon; }, eps);
    std::printf("| eps at delta 1e-5, %s | %s | %.4f | %.1f ms |\n", c.name, c.id, eps, t * 1e3);
  }
  // Calibration for a typical DP-SGD run: batch 256 of 60,000 for 60 epochs, eps 8, delta 1e-5.
  const double q = 256.0 / 60000;
  const std::int64_t steps = 60 * 60000 / 256;
  for (auto [acc, id, tol] : {std::tuple{rdp.get(), "rdp", 1e-10}, std::tuple{prv.get(), "prv", 1e-4}}) {
    double sigma = 0;
    const double t = median_seconds(
        [&] {
          return calibrate_noise_multiplier(*acc, [&](double s) { return dpsgd(s, q, steps); }, 8.0, 1e-5, tol)
              .noise_multiplier;
        },
        sigma, 3);
    std::printf("| calibrate sigma for eps 8, q 256/60000, %lld steps (tol %g) | %s | sigma %.6f | %.1f ms |\n",
                static_cast<long long>(steps), tol, id, sigma, t * 1e3);
  }
  return 0;
}
