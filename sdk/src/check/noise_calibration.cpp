#include <privdiff/check/noise_calibration.hpp>
#include <privdiff/check/replay_models.hpp>
#include <privdiff/check/replay_stage.hpp>
#include <privdiff/privacy/ledger.hpp>


#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace privdiff::sdk::check {

namespace {

// z with P(Z > z) = tail for a standard normal Z (bisection on erfc: tails down to 1e-300).
double normal_quantile_above(double tail) {
  double lo = 0, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(mid / std::sqrt(2.0)) > tail ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// The noise multiplier a release's ledger event states.
double multiplier_of(const sdk::ReleasedStatistic& s) {
  return s.noise_multiplier > 0 ? s.noise_multiplier : s.noise_std / s.sensitivity;
}

// The multiplier of the declared release `name` made at this step (its ReleasedStatistic).
double release_multiplier(const std::string& name, const std::vector<sdk::ReleasedStatistic>& statistics) {
  for (const auto& s : statistics) {
    if (s.name.rfind(name + ", step ", 0) == 0) return multiplier_of(s);
  }
  throw std::runtime_error("noise check: a noise basis is stated for '" + name + "', which the step did not release");
}

// A step's release (flattened per tensor) with its part in each basis the mechanism stated
// (StepReport::noise_bases) rescaled by sigma / sigma_e: the gradient's part in a basis has the
// gradient's sensitivity C_t, so where the mechanism's noise there is the release's multiplier sigma_e
// times C_t, as it states, the result is isotropic at the gradient's std sigma C_t again and every test
// below applies unchanged. The bases, revalidated here, must be orthonormal and not overlap.
void whiten(std::vector<at::Tensor>& release, const std::vector<sdk::StepReport::NoiseBasis>& bases,
            const std::vector<sdk::ReleasedStatistic>& statistics, double sigma) {
  if (bases.empty()) return;
  std::vector<std::int64_t> sizes;
  for (const auto& t : release) sizes.push_back(t.numel());
  at::Tensor u = at::cat(release);
  std::vector<at::Tensor> all;
  for (const auto& b : bases) {
    if (b.basis.dim() != 2 || b.basis.size(0) != u.numel()) {
      throw std::runtime_error("noise check: the noise basis stated for '" + b.release + "' does not have the " +
                               std::to_string(u.numel()) + " rows of the update (the entries of the tensors the stage trains, in module order)");
    }
    all.push_back(b.basis);
  }
  const at::Tensor stacked = at::cat(all, 1);
  if ((at::matmul(stacked.t(), stacked) - at::eye(stacked.size(1), stacked.options())).abs().max().item<double>() > 1e-6) {
    throw std::runtime_error("noise check: the stated noise bases are not orthonormal, or overlap (one basis per "
                             "release, its directions apart from every other's)");
  }
  for (const auto& b : bases) {
    const double factor = sigma / release_multiplier(b.release, statistics) - 1.0;
    u = u + at::matmul(b.basis, at::matmul(b.basis.t(), u) * factor);
  }
  release = at::split_with_sizes(u, sizes);
}

// One replay: the stage run by the record-replay harness on the deterministic stand-in (or the
// options' model, its loss drawing the same noise in every replay) for
// settings.steps steps, each step's update divided by the learning rate (plain SGD: the noised
// gradient), flattened per tensor it trains, with the ledger it wrote. `imposed` (replays after the first): the
// first replay's released state after step 1 (weights, declared releases), so that the second step's
// clipped sum, and its clip norm where the mechanism adapts one, are the same in every replay and its
// releases differ by their noise alone.
StageRun replay(const MechanismUnderTest& make, MechanismSettings settings, const ReplayData& data,
                const NoiseCheckOptions& o, std::shared_ptr<const ImposedState> imposed) {
  ModelSpec spec = o.model;
  spec.loss_noise = 0.0;
  spec.same_loss_draws = static_cast<bool>(spec.make);
  spec.imposed = std::move(imposed);
  spec.public_data = o.public_data ? o.public_data : o.model.public_data;
  const MechanismFactory factory = [&](std::uint64_t seed) {
    settings.seed = seed;
    return make(settings);
  };
  StageRun run = run_stage(factory, *settings.seed, spec, data);
  if (static_cast<std::int64_t>(run.releases.size()) != settings.steps) {
    throw std::runtime_error("noise check: the mechanism took " + std::to_string(run.releases.size()) +
                             " steps where it was configured for " + std::to_string(settings.steps));
  }
  for (std::size_t i = 0; i < run.releases.size(); ++i) {
    std::vector<at::Tensor> trained;  // a model's frozen part (an autoencoder beside its UNet) releases nothing
    for (std::size_t j = 0; j < run.releases[i].size(); ++j) {
      if (j >= run.trains.size() || run.trains[j]) trained.push_back(run.releases[i][j].flatten().to(at::kDouble) / settings.lr);
    }
    run.releases[i] = std::move(trained);
    whiten(run.releases[i], run.noise_bases[i], run.statistics[i], settings.noise_multiplier.value_or(1.0));
  }
  return run;
}

// The first replay's state after step 1, for the others.
std::shared_ptr<const ImposedState> state_after_first_step(const StageRun& run) {
  auto state = std::make_shared<ImposedState>();
  state->step = 1;
  state->weights = run.weights_after.front();
  for (const auto& s : run.statistics.front()) state->statistics.push_back(s.value);
  return state;
}

// The two steps' ledger a mechanism with these declared releases (of the first step) must write.
std::string expected_ledger(double sigma, const std::vector<sdk::ReleasedStatistic>& releases) {
  std::vector<PrivacyEvent> parts{PrivacyEvent::gaussian(sigma)};
  for (const auto& r : releases) parts.push_back(PrivacyEvent::gaussian(multiplier_of(r)));
  const PrivacyEvent step = releases.empty() ? PrivacyEvent::poisson_sampled(1.0, parts.front())
                                             : PrivacyEvent::poisson_sampled(1.0, PrivacyEvent::composed(parts));
  sdk::PrivacyLedger ledger;
  for (int k = 0; k < 2; ++k) ledger.record(step);
  return ledger.total().to_string();
}

// The names of the parameters a run trained, in module order (and so of its releases' tensors).
std::vector<std::string> parameter_names(const NoiseCheckOptions& o, const StageRun& run) {
  ModelSpec spec = o.model;
  spec.loss_noise = 0.0;
  std::vector<std::string> names;
  std::size_t j = 0;
  for (const auto& item : build_model(spec, nullptr)->module().named_parameters()) {
    if (j >= run.trains.size() || run.trains[j]) names.push_back(item.key());
    ++j;
  }
  return names;
}

// The std of the rows of `values` ([R, d]) around their mean, with d (R - 1) degrees of freedom.
double pooled_std(const at::Tensor& values) {
  const double dof = static_cast<double>(values.size(1) * (values.size(0) - 1));
  return std::sqrt((values - values.mean(0, true)).pow(2).sum().item<double>() / dof);
}

// One noise measurement against its band: a violation (empty: none). More noise than stated is no
// privacy violation: it goes to `notes` (it costs utility, and may be a mechanism's choice).
std::string outside_band(const std::string& what, double measured, double stated, std::int64_t dof, double false_alarm,
                         std::vector<std::string>* notes = nullptr) {
  if (!std::isfinite(measured)) return what + " is not finite";
  if (measured <= 1e-9 * stated) {  // the same in every replay, up to rounding
    return what + " is the same in every replay: it receives no noise from the seeded noise stream (is its noise "
                  "missing, or seeded from the data?)";
  }
  const auto [low, high] = chi_ratio_band(dof, false_alarm);
  const double ratio = measured / stated;
  if (ratio >= low && ratio <= high) return {};
  char text[400];
  std::snprintf(text, sizeof text,
                "%s: the noise's std is %.4g times the %.6g the ledger states (a correct mechanism is within "
                "[%.4f, %.4f] but with probability %.0e)",
                what.c_str(), ratio, stated, low, high, false_alarm);
  if (ratio > high && notes) {
    notes->push_back(std::string(text) + ": more noise than the ledger states is private, but costs utility");
    return {};
  }
  return text;
}

}  // namespace

std::pair<double, double> chi_ratio_band(std::int64_t k, double false_alarm) {
  if (k < 1 || !(false_alarm > 0 && false_alarm < 1)) throw std::invalid_argument("chi_ratio_band: bad arguments");
  const double z = normal_quantile_above(false_alarm / 2), v = 2.0 / (9.0 * static_cast<double>(k));
  auto quantile = [&](double sign) { return std::pow(std::max(0.0, 1 - v + sign * z * std::sqrt(v)), 1.5); };
  return {quantile(-1), quantile(+1)};  // sqrt of (chi2_k / k)'s Wilson-Hilferty quantiles
}

namespace {

// [R, d_j] of tensor j of every replay's release; j = the tensor count: all of them, concatenated.
at::Tensor stacked(const std::vector<std::vector<at::Tensor>>& replays, std::size_t j) {
  std::vector<at::Tensor> rows;
  for (const auto& r : replays) rows.push_back(j == replays.front().size() ? at::cat(r) : r[j]);
  return at::stack(rows);
}

// Each tensor on its own (noise missing on a few tensors hides in the pooled figure), each band at
// `false_alarm` (the check's, divided among its bands, so a correct mechanism still fails with at most it).
void check_each_tensor(const std::vector<std::vector<at::Tensor>>& first, const NoiseCheckOptions& o,
                       const std::vector<std::string>& names, double false_alarm, NoiseCheck& out) {
  std::vector<std::string> excess;  // more noise than stated: the pooled figure's note says it once
  out.worst_tensor_ratio = 1;
  for (std::size_t j = 0; j < first.front().size(); ++j) {
    const at::Tensor values = stacked(first, j);
    const std::string name = j < names.size() ? names[j] : "tensor " + std::to_string(j);
    const double measured = pooled_std(values);
    const double ratio = measured / out.configured_std;
    if (std::fabs(std::log(std::max(ratio, 1e-300))) > std::fabs(std::log(out.worst_tensor_ratio))) {
      out.worst_tensor_ratio = ratio, out.worst_tensor = name;
    }
    const std::string v = outside_band("tensor " + name + " (" + std::to_string(values.size(1)) + " values)", measured,
                                       out.configured_std, values.size(1) * (o.replays - 1), false_alarm, &excess);
    if (!v.empty()) out.violations.push_back(v);
  }
}

// The next step: its noise at the stated std, and drawn afresh. The difference of the two steps'
// releases holds both steps' noise, sqrt(2) times the stated std; noise reused leaves none in it.
void check_next_step(const at::Tensor& first, const at::Tensor& second, std::int64_t replays, double false_alarm,
                     NoiseCheck& out) {
  std::vector<std::string> excess;  // noted once, by the pooled figure
  out.second_step_std = pooled_std(second);
  out.step_difference_std = pooled_std(second - first) / std::sqrt(2.0);
  const std::int64_t dof = first.size(1) * (replays - 1);
  if (auto v = outside_band("the second step's update", out.second_step_std, out.configured_std, dof, false_alarm,
                            &excess);
      !v.empty()) {
    out.violations.push_back(v);
  }
  // Two-sided: too much here is the two steps' noise anti-correlated (their sum then carries none).
  if (auto v = outside_band("the difference of two consecutive steps' updates, over sqrt(2)", out.step_difference_std,
                            out.configured_std, dof, false_alarm);
      !v.empty()) {
    out.violations.push_back(v + (out.step_difference_std < out.configured_std / 2
                                      ? ": the second step's noise repeats the first's (noise must be drawn afresh "
                                        "at every step)"
                                      : ""));
  }
}

// Each declared release of the first step (DpSgdMechanism::release_statistic): its noise at the std it
// states, over the replays (its value before noise is the same in every replay: q = 1, fixed data).
void check_declared_releases(const std::vector<StageRun>& runs, double false_alarm, NoiseCheck& out) {
  const auto& declared = runs.front().statistics.front();
  for (std::size_t i = 0; i < declared.size(); ++i) {
    std::vector<at::Tensor> rows;
    for (const StageRun& r : runs) {
      if (r.statistics.front().size() != declared.size()) {
        out.violations.push_back("the first step makes " + std::to_string(declared.size()) + " declared releases in "
                                 "one replay and " + std::to_string(r.statistics.front().size()) + " in another");
        return;
      }
      rows.push_back(r.statistics.front()[i].value.flatten().to(at::kDouble));
    }
    const at::Tensor values = at::stack(rows);
    const double measured = pooled_std(values), stated = declared[i].noise_std;
    out.releases.push_back({declared[i].name, measured, stated});
    const std::string v = outside_band("declared release '" + declared[i].name + "'", measured, stated,
                                       values.size(1) * (values.size(0) - 1), false_alarm, &out.notes);
    if (!v.empty()) out.violations.push_back(v);
  }
}

// The bases a mechanism states at step 1 (state_noise_basis): every replay states the same one (from
// public data and the released state, not from the noise drawn); in the replays handed replay 0's
// releases, the update's part in it is replay 0's (that part is the release, with no other noise); and
// the noise there, rescaled, has the gradient's std (a band on k (R - 1) degrees of freedom).
void check_stated_bases(const std::vector<StageRun>& runs, const std::vector<std::vector<at::Tensor>>& first,
                        double false_alarm, NoiseCheck& out) {
  const auto& bases = runs.front().noise_bases.front();
  for (std::size_t i = 0; i < bases.size(); ++i) {
    const at::Tensor& u = bases[i].basis;
    const std::string name = "'" + bases[i].release + "'";
    const at::Tensor part0 = at::matmul(u.t(), at::cat(runs.front().releases[0]));
    std::vector<at::Tensor> rows;
    for (std::size_t r = 0; r < runs.size(); ++r) {
      const auto& theirs = runs[r].noise_bases.front();
      if (theirs.size() != bases.size() || !theirs[i].basis.sizes().equals(u.sizes()) ||
          (theirs[i].basis - u).abs().max().item<double>() > 1e-9) {
        out.violations.push_back("the noise basis stated for " + name + " differs between replays of one step from "
                                 "one state: it must follow public data and released values, not the noise drawn");
        return;
      }
      const at::Tensor part = at::matmul(u.t(), at::cat(runs[r].releases[0]));
      if (r > 0 && (part - part0).abs().max().item<double>() > 1e-9 * (1 + part0.abs().max().item<double>())) {
        out.violations.push_back("the update's part in the basis stated for " + name + " is not that release: "
                                 "replays handed replay 0's release still differ there (other noise added there)");
        return;
      }
      rows.push_back(at::matmul(u.t(), at::cat(first[r])));
    }
    const at::Tensor values = at::stack(rows);
    const double measured = pooled_std(values);
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.4f", measured / out.configured_std);
    out.notes.push_back("measured in the basis the mechanism states (state_noise_basis): the update's noise in the " +
                        std::to_string(u.size(1)) + " directions of " + name + " at that release's multiplier, " +
                        "rescaled to the gradient's: ratio " + ratio);
    const std::string v = outside_band("the update in the " + std::to_string(u.size(1)) + " directions stated for " + name,
                                       measured, out.configured_std, values.size(1) * (values.size(0) - 1), false_alarm,
                                       &out.notes);
    if (!v.empty()) out.violations.push_back(v);
  }
}

// The first step's noise in every direction of the parameter space, not only per tensor: with R - 1 =
// 2 d centred releases of d coordinates, isotropic noise of std s has a sample covariance whose smallest
// eigenvalue is near the Marchenko-Pastur edge s^2 (1 - sqrt(d / (R - 1)))^2 (0.086 s^2; its
// fluctuations are a few percent). A direction that gets no noise (a subspace that crosses tensors, as
// GEP's public-gradient subspace) has an eigenvalue of rounding only. Flagged below a quarter of the
// edge, the direction named by the tensors it lies in.
void check_every_direction(const MechanismUnderTest& make, MechanismSettings settings, const ReplayData& data,
                           const NoiseCheckOptions& o, NoiseCheck& out) {
  settings.steps = 1;
  std::vector<std::string> names;
  std::vector<at::Tensor> rows;
  std::vector<std::int64_t> sizes;
  for (std::int64_t r = 0;; ++r) {
    settings.seed = o.seed + 1000003 + static_cast<std::uint64_t>(r);
    const StageRun run = replay(make, settings, data, o, nullptr);
    if (names.empty()) names = parameter_names(o, run);
    if (sizes.empty()) {
      for (const auto& t : run.releases[0]) sizes.push_back(t.numel());
    }
    rows.push_back(at::cat(run.releases[0]));
    const std::int64_t d = rows.front().numel();
    if (d > o.max_directions) {
      out.notes.push_back("the noise in every direction was not checked: " + std::to_string(d) + " coordinates");
      return;
    }
    if (static_cast<std::int64_t>(rows.size()) >= 2 * d + 1) break;
  }
  const at::Tensor x = at::stack(rows);
  const at::Tensor centred = x - x.mean(0, true);
  const auto R = static_cast<double>(x.size(0)), d = static_cast<double>(x.size(1));
  const auto svd = at::linalg_svd(centred, false);
  const at::Tensor singular = std::get<1>(svd), directions = std::get<2>(svd);  // V^H: [k, d]
  const std::int64_t last = singular.numel() - 1;
  const double smallest = std::pow(singular[last].item<double>(), 2) / (R - 1);
  const double edge = std::pow(1 - std::sqrt(d / (R - 1)), 2) * out.configured_std * out.configured_std;
  out.smallest_direction_ratio = smallest / edge;
  out.directions_checked = x.size(1);
  if (out.smallest_direction_ratio >= 0.25) return;
  // Where the direction lies: its weight per tensor.
  const at::Tensor v = directions[last].pow(2);
  std::string where;
  std::int64_t offset = 0;
  std::vector<std::pair<double, std::string>> parts;
  for (std::size_t j = 0; j < sizes.size(); ++j) {
    parts.push_back({v.narrow(0, offset, sizes[j]).sum().item<double>(), j < names.size() ? names[j] : "tensor"});
    offset += sizes[j];
  }
  std::sort(parts.rbegin(), parts.rend());
  for (std::size_t j = 0; j < parts.size() && j < 3; ++j) {
    char part[96];
    std::snprintf(part, sizeof part, "%s%s %.0f%%", j ? ", " : "", parts[j].second.c_str(), 100 * parts[j].first);
    where += part;
  }
  char text[400];
  std::snprintf(text, sizeof text,
                "a direction of the parameter space gets almost no noise: its variance over %lld replays is %.3g of "
                "what isotropic noise of the stated std leaves at the least (the Marchenko-Pastur edge); it lies in %s "
                "(noise missing on a subspace that crosses tensors)",
                static_cast<long long>(x.size(0)), out.smallest_direction_ratio, where.c_str());
  out.violations.push_back(text);
}

}  // namespace

NoiseCheck check_noise_calibration(const MechanismUnderTest& make, const NoiseCheckOptions& o) {
  if (o.replays < 2 || o.records < 1) throw std::invalid_argument("noise check: need >= 2 replays and >= 1 record");
  const ReplayData data = replay_records(random_images(o.records, 5, o.shape), reads_text(o.model));
  MechanismSettings settings;
  settings.batch_size = o.records;  // q = 1
  settings.steps = 2;
  settings.noise_multiplier = o.noise_multiplier;
  settings.physical_batch_size = o.physical_batch_size;
  // A small step: the second step's gradient is then the first's to ~1e-3, and what differs between the
  // two steps' releases is their noise (reused noise shows as a difference without noise).
  settings.lr = 1e-3;
  NoiseCheck out;
  std::vector<StageRun> runs;
  std::vector<std::vector<at::Tensor>> first, own_first, second;  // [replay][tensor]
  for (std::int64_t r = 0; r < o.replays; ++r) {
    settings.seed = o.seed + static_cast<std::uint64_t>(r);
    runs.push_back(replay(make, settings, data, o, r == 0 ? nullptr : state_after_first_step(runs.front())));
    own_first.push_back(runs.back().releases[0]);
    if (r > 0 && !runs.front().noise_bases.front().empty()) {
      // The first step's figures from a run of its own, not handed the first replay's releases: a
      // mechanism that folds a release into the step's own gradient (GEP, with its stated basis) would
      // otherwise show replay 0's noise there in every replay. (The difference of the two steps stays
      // within each run: own_first.)
      MechanismSettings one = settings;
      one.steps = 1;
      first.push_back(replay(make, one, data, o, nullptr).releases[0]);
    } else {
      first.push_back(own_first.back());
    }
    second.push_back(runs.back().releases[1]);
    const std::string expected = expected_ledger(o.noise_multiplier, runs.front().statistics.front());
    if (r == 0) out.ledger = runs.back().ledger;
    if (runs.back().ledger != expected && out.violations.empty()) {
      out.violations.push_back("the ledger records " + runs.back().ledger + " for two steps configured as " + expected);
    }
  }
  const std::size_t tensors = first.front().size();
  const at::Tensor all = stacked(first, tensors);  // every coordinate
  const std::int64_t d = all.size(1);
  out.degrees_of_freedom = d * (o.replays - 1);
  // The sensitivity the first step reports (its clip norm: max_grad_norm, or a mechanism's own C_1).
  const double clip = runs.front().sensitivities.front() > 0 ? runs.front().sensitivities.front() : o.max_grad_norm;
  out.configured_std = o.noise_multiplier * clip / static_cast<double>(o.records);
  const double second_clip = runs.back().sensitivities.back() > 0 ? runs.back().sensitivities.back() : clip;
  if (second_clip != clip) {
    // The second step's noise against its own clip norm (the same in every replay after the first: the
    // first replay's state after step 1 is theirs): rescaled to the first step's.
    for (auto& r : second) {
      for (auto& t : r) t = t * (clip / second_clip);
    }
  }
  out.measured_std = pooled_std(all);
  std::tie(out.low, out.high) = chi_ratio_band(out.degrees_of_freedom, o.false_alarm);
  if (auto v = outside_band("the update", out.measured_std, out.configured_std, out.degrees_of_freedom, o.false_alarm,
                            &out.notes);
      !v.empty()) {
    out.violations.push_back(v);
  }
  const double each = o.false_alarm / static_cast<double>(tensors + 2 + runs.front().statistics.front().size() +
                                                         runs.front().noise_bases.front().size());
  check_each_tensor(first, o, parameter_names(o, runs.front()), each, out);
  check_next_step(stacked(own_first, tensors), stacked(second, tensors), o.replays, each, out);
  check_stated_bases(runs, first, each, out);
  check_declared_releases(runs, each, out);
  if (o.every_direction && !o.model.make) check_every_direction(make, settings, data, o, out);
  if (o.every_direction && o.model.make) {
    out.notes.push_back("every direction: not checked on this model (2 d + 1 replays of its " + std::to_string(d) +
                        " coordinates are out of reach; the stand-in's check covers the mechanism's rules)");
  }
  return out;
}

std::string NoiseCheck::describe() const {
  std::ostringstream s;
  char line[320];
  std::snprintf(line, sizeof line, "  noise std per coordinate: measured %.6g, stated %.6g (ratio %.4f; band [%.4f, %.4f], %lld degrees of freedom)\n",
                measured_std, configured_std, ratio(), low, high, static_cast<long long>(degrees_of_freedom));
  s << line;
  std::snprintf(line, sizeof line, "  worst tensor: %s (ratio %.4f); second step: ratio %.4f; two steps' difference / sqrt 2: ratio %.4f\n",
                worst_tensor.c_str(), worst_tensor_ratio, configured_std > 0 ? second_step_std / configured_std : 0.0,
                configured_std > 0 ? step_difference_std / configured_std : 0.0);
  s << line;
  for (const auto& r : releases) {
    std::snprintf(line, sizeof line, "  declared release '%s': noise std measured %.6g, stated %.6g (ratio %.4f)\n",
                  r.name.c_str(), r.measured_std, r.stated_std, r.stated_std > 0 ? r.measured_std / r.stated_std : 0.0);
    s << line;
  }
  if (directions_checked > 0) {
    std::snprintf(line, sizeof line, "  every direction (%lld coordinates): smallest noise variance %.3g of the isotropic edge\n",
                  static_cast<long long>(directions_checked), smallest_direction_ratio);
    s << line;
  }
  s << "  ledger of two steps: " << ledger << "\n";
  for (const auto& n : notes) s << "  note: " << n << "\n";
  for (const auto& v : violations) s << "  VIOLATION: " << v << "\n";
  return s.str();
}

}  // namespace privdiff::sdk::check
