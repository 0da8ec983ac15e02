#pragma once
/// @file
/// Record-replay sensitivity check: runs a mechanism on neighbouring datasets D and D ∪ {x}
/// (add/remove adjacency, x appended last) with identical randomness — seeds chosen so that every
/// record of D has the same Poisson membership in both runs and x is in the audited batch — and
/// reports where
///   1. sensitivity: the releases differ by more than the mechanism's declared sensitivity (the
///      noise is the same draw in both runs, so it cancels; what remains is x's clipped contribution);
///   2. structure: something released or public (ledger, step reports, engine plan, noise draws
///      consumed, released shapes) depends on x's presence, or an internal decision (physical
///      chunks, forward calls, collectives) depends on x's content: a run with an extreme x and one
///      with a typical reference record x_ref must decide alike. (The realised batch size is secret
///      and its chunks follow it; that is allowed, so chunk counts are compared between x and x_ref,
///      which are both in the batch.)
///   3. replay fidelity: the records of D do not contribute the same in both runs (their
///      per-example norms, where the engine shows them), so the replay did not isolate x.
/// Each DP-SGD check replays three versions of a logical step k (the first by default): x among D's
/// sampled records, x alone (D's batch empty: D's release is pure noise), and x in the data but not
/// in the batch (only the public N changed: the release must not move). For k > 1, x is in none of
/// the batches before k: both runs reach step k from the same state, bit for bit (checked: the
/// earlier releases are equal), so the k-th release differs by x's clipped contribution alone. The
/// bound is the clip norm step k reports (StepReport::sensitivity: C, or an adaptive C_k), and each
/// of the step's declared releases (DpSgdMechanism::release_statistic) is held to its own sensitivity.
/// Then the next steps (DpSgdAudit::next_steps, audit_next_steps): x in batch k and in none of the
/// next two, and the run on D handed D ∪ {x}'s released state after step k (weights and declared
/// releases, ModelSpec::imposed). Both then take steps k+1 and k+2 from the same public state, so
/// their updates, declared releases, clip norms and metrics must be equal: a difference is x reaching
/// a later step through state the mechanism did not release with noise.
///
/// Any sdk::Mechanism with DP-SGD's recipe keys can be checked (MechanismFactory: a plugin built
/// from its config, check/mechanism_under_test.hpp): the release is read from the weights (SGD with
/// lr 1, no momentum, decay or EMA: the update is the noised gradient). RecordingMechanism (the
/// built-in engine) also shows each chunk's norms and clipped sum. Models: the stand-in ReplayModel
/// (conv, group norm and linear layers) or any sdk::Model (ModelSpec::make); the parameters the
/// stage must not train are checked bit-identical after every run. A real denoising loss draws its
/// noise for a whole chunk at once, so adding x to a chunk changes D's draws:
/// DpSgdAudit::x_alone_in_chunk picks batches where x is alone in the last physical chunk.
///
/// Not replayable, so not covered: secure noise (fresh OS randomness in each run: the check runs
/// reproducible streams, whose arithmetic is the same) and RandAugment (it draws its ops for a
/// whole chunk at once). The noise itself cancels in a replay: its scale is the noise check's
/// (check/noise_calibration.hpp). privdiff's own tests add planted bugs and stopped-and-resumed
/// runs (tests/sdk/engine/record_replay.hpp); DP-FETA's central images have their own replay
/// (tests/sdk/engine/record_replay_central.hpp).

#include <privdiff/check/recording_mechanism.hpp>
#include <privdiff/check/replay_models.hpp>
#include <privdiff/check/replay_report.hpp>
#include <privdiff/check/replay_stage.hpp>
#include <privdiff/engine/dp_sgd_mechanism.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace privdiff::sdk::check {

namespace engine = privdiff::sdk::engine;

// ---------------------------------------------------------------------------------------------
// The DP-SGD audit

struct DpSgdAudit {
  std::string name;
  MechanismFactory mechanism;
  ModelSpec model;
  std::int64_t batch_size = 7;  ///< B: q = B / N, and the divisor q N = B of the release
  double lr = 1.0;              ///< the optimizer's (SGD, no momentum): the release is the update / lr
  double max_grad_norm = 1.0;   ///< C, the declared sensitivity of the clipped sum
  double relative_slack = 1e-9;  ///< for rounding, on the bound
  double fidelity = 1e-9;        ///< relative: how closely D's records must replay
  bool check_alone = true;       ///< also replay a step whose batch holds x alone (D's batch empty)
  /// k: the logical step audited (the mechanism must take at least k). x is in no batch before it,
  /// so both runs reach it from the same state; the releases before it must be equal.
  std::int64_t step = 1;
  /// P > 0: D's k-th batch is a non-empty multiple of P, so that with the mechanism's physical chunks
  /// of P examples x is alone in the last chunk. For a loss that draws its randomness for a whole
  /// chunk at once (the diffusion models' denoising loss on the vectorised path): with x in their
  /// chunk, D's records draw other noise levels, and the fidelity check fails (the guarantee holds
  /// for any such draws; an identical-seed replay just cannot isolate x). 0: x joins the last chunk.
  std::int64_t x_alone_in_chunk = 0;
  /// The steps after k replayed from the same released state (audit_next_steps; the mechanism must
  /// take k + next_steps steps). 0: not replayed.
  std::int64_t next_steps = 2;
  Runner runner = one_process;
};

namespace detail {

inline std::vector<at::Tensor> summed_over_ranks(const std::vector<StageRun>& ranks, std::size_t step) {
  std::vector<at::Tensor> sum;
  for (const StageRun& r : ranks) {
    if (r.recorded.size() <= step) continue;
    const auto& s = r.recorded[step].clipped_sum;
    if (sum.empty()) {
      for (const auto& t : s) sum.push_back(t.clone());
    } else {
      for (std::size_t j = 0; j < s.size(); ++j) sum[j] += s[j];
    }
  }
  return sum;
}

// D's records replayed: every per-example norm of D is found again on D ∪ {x}, which has exactly one
// more: x's. First in order, rank by rank (x comes last in the batch, so each rank's norms on D are
// a prefix of its norms on D ∪ {x}); failing that, as a multiset over all ranks (with one chunk per
// rank, x's presence moves records of D to the other rank). Returns x's norm.
inline double ordered_fidelity(const std::vector<StageRun>& d, const std::vector<StageRun>& dx, std::size_t step,
                               double tolerance, double& worst) {
  double x_norm = std::nan("");
  int extra = 0;
  worst = 0;
  for (std::size_t r = 0; r < d.size(); ++r) {
    const at::Tensor a = d[r].recorded[step].norms, b = dx[r].recorded[step].norms;
    const std::int64_t grown = b.numel() - a.numel();
    if (grown < 0 || grown > 1) return std::nan("");
    const at::Tensor shared = b.narrow(0, 0, a.numel());
    if (a.numel() > 0) {
      if (!at::allclose(shared, a, tolerance, 1e-12)) return std::nan("");
      worst = std::max(worst, ((shared - a).abs() / (a.abs() + 1e-300)).max().item<double>());
    }
    if (grown == 1) {
      x_norm = b[-1].item<double>();
      ++extra;
    }
  }
  return extra == 1 ? x_norm : std::nan("");
}

inline double check_fidelity(const std::string& what, const std::vector<StageRun>& d, const std::vector<StageRun>& dx,
                             std::size_t step, double tolerance, Report& report) {
  std::vector<at::Tensor> parts, parts_x;
  for (const StageRun& r : d) {
    if (r.recorded.size() <= step) return std::nan("");
    parts.push_back(r.recorded[step].norms);
  }
  for (const StageRun& r : dx) {
    if (r.recorded.size() <= step) return std::nan("");
    parts_x.push_back(r.recorded[step].norms);
  }
  double worst = 0;
  const double in_order = ordered_fidelity(d, dx, step, tolerance, worst);
  if (!std::isnan(in_order)) {
    report.fidelity = std::max(report.fidelity, worst);
    return in_order;
  }
  const at::Tensor a = std::get<0>(at::cat(parts).sort()), b = std::get<0>(at::cat(parts_x).sort());
  if (b.numel() != a.numel() + 1) {
    report.add(what + ": " + std::to_string(a.numel()) + " examples clipped on D but " + std::to_string(b.numel()) +
               " on D + x (the replay did not keep D's batch plus x)");
    return std::nan("");
  }
  auto close = [&](std::int64_t i, std::int64_t j) {
    const double u = a[i].item<double>(), v = b[j].item<double>();
    return std::abs(u - v) <= tolerance * std::abs(u) + 1e-12;
  };
  std::int64_t x_at = -1, j = 0;
  auto note = [&](std::int64_t i, std::int64_t k) {
    const double u = a[i].item<double>(), v = b[k].item<double>();
    report.fidelity = std::max(report.fidelity, std::abs(u - v) / (std::abs(u) + 1e-300));
  };
  for (std::int64_t i = 0; i < a.numel(); ++i, ++j) {
    if (close(i, j)) {
      note(i, j);
      continue;
    }
    if (x_at < 0 && j + 1 < b.numel() && close(i, j + 1)) {
      x_at = j++;
      note(i, j);
      continue;
    }
    char text[200];
    std::snprintf(text, sizeof text, ": a record of D has gradient norm %.9g on D but none such on D + x (nearest "
                  "%.9g): its contribution depends on x", a[i].item<double>(), b[j].item<double>());
    report.add(what + text);
    return std::nan("");
  }
  return b[x_at < 0 ? b.numel() - 1 : x_at].item<double>();
}

// Both runs took step k (else the audit proved nothing), and every step before it released the same
// update: x was in none of their batches, so they must be equal bit for bit.
inline bool check_earlier_steps(const std::string& what, const std::vector<StageRun>& d,
                                const std::vector<StageRun>& dx, std::size_t k, Report& report) {
  if (d[0].releases.size() <= k || dx[0].releases.size() <= k) {
    report.add(what + ": the stage took " + std::to_string(std::min(d[0].releases.size(), dx[0].releases.size())) +
               " steps, but the audit replays step " + std::to_string(k + 1));
    return false;
  }
  for (std::size_t j = 0; j < k; ++j) {
    Report same;
    distance_between("", d[0].releases[j], dx[0].releases[j], 1.0, 0.0, 0.0, 0.0, same);
    if (!same.violations.empty()) {
      report.add(what + ": step " + std::to_string(j + 1) + " released different updates, though x was in no batch yet");
    }
  }
  return true;
}

inline std::vector<at::Tensor> statistic_values(const StageRun& run, std::size_t step) {
  std::vector<at::Tensor> values;
  if (step < run.statistics.size()) {
    for (const auto& s : run.statistics[step]) values.push_back(s.value);
  }
  return values;
}

// The mechanism's declared releases of step k (DpSgdMechanism::release_statistic): the same ones on D
// and D + x, each within its declared sensitivity (the noise is the same draw in both runs and cancels).
inline void check_statistics(const std::string& what, const StageRun& d, const StageRun& dx, std::size_t k,
                             double relative_slack, Report& report) {
  const auto& a = k < d.statistics.size() ? d.statistics[k] : std::vector<sdk::ReleasedStatistic>{};
  const auto& b = k < dx.statistics.size() ? dx.statistics[k] : std::vector<sdk::ReleasedStatistic>{};
  if (a.size() != b.size()) {
    report.add(what + ": step " + std::to_string(k + 1) + " made " + std::to_string(a.size()) +
               " declared releases on D but " + std::to_string(b.size()) + " on D + x");
    return;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    distance_between(what + ", declared release '" + b[i].name + "'", {a[i].value}, {b[i].value}, 1.0,
                     b[i].sensitivity, relative_slack, 0.0, report);
  }
}

// The structure checks of one neighbour: released and public things as on D, internal decisions as
// with the reference record, the ledger as planned.
inline void check_structure(const std::string& what, const std::vector<StageRun>& d, const std::vector<StageRun>& dx,
                            const std::vector<StageRun>& dref, Report& report) {
  for (std::size_t r = 0; r < dx.size(); ++r) {
    const std::string rank = dx.size() > 1 ? " (rank " + std::to_string(r) + ")" : "";
    std::string f = first_difference(what + ": a released count, shape or decision depends on x's presence" + rank,
                                     d[r].trace.released, dx[r].trace.released);
    report.add(f);
    report.add(first_difference(what + ": a released count, shape or decision depends on x's content" + rank,
                                dref[r].trace.released, dx[r].trace.released));
    report.add(first_difference(what + ": an internal count or decision depends on x's content" + rank,
                                dref[r].trace.internal, dx[r].trace.internal));
    if (dx[r].ledger != dx[r].planned) {
      report.add(what + ": the ledger (" + dx[r].ledger + ") is not the plan (" + dx[r].planned + ")" + rank);
    }
    if (r > 0) {
      Report ranks_agree;
      distance_between("ranks", dx[0].releases.front(), dx[r].releases.front(), 1.0, 0.0, 0.0, 0.0, ranks_agree);
      if (!ranks_agree.violations.empty()) report.add(what + ": the ranks released different updates");
    }
  }
}

inline double release_scale(const DpSgdAudit& a) { return static_cast<double>(a.batch_size) / a.lr; }  // q N / lr

// The sensitivity step k states: the clip norm it reported (StepReport::sensitivity, what its noise is
// scaled by: an adaptive mechanism's C_k), else the recipe's max_grad_norm.
inline double stated_sensitivity(const DpSgdAudit& a, const StageRun& run, std::size_t k) {
  return k < run.sensitivities.size() && run.sensitivities[k] > 0 ? run.sensitivities[k] : a.max_grad_norm;
}

// x among D's sampled records at step k: D's records replayed, the k-th release and clipped sum
// within C, the earlier steps equal, and the structure checks.
inline void audit_in_batch(const DpSgdAudit& a, const ReplayData& d, std::uint64_t seed, const Neighbour& x,
                           const std::vector<StageRun>& on_d, const std::vector<StageRun>& on_ref, Report& report) {
  const std::string what = a.name + ", x = " + x.name;
  const auto k = static_cast<std::size_t>(a.step - 1);
  const std::vector<StageRun> on_x = a.runner(a.mechanism, seed, a.model, d.with(x.image, x.label, x.caption));
  check_frozen(what, on_x, report);
  if (!check_earlier_steps(what, on_d, on_x, k, report)) return;
  const double x_norm = check_fidelity(what, on_d, on_x, k, a.fidelity, report);
  const double c = stated_sensitivity(a, on_d[0], k);
  distance_between(what + ", released update", on_d[0].releases[k], on_x[0].releases[k], release_scale(a), c,
                   a.relative_slack, 0.0, report, x_norm);
  const auto sum_d = summed_over_ranks(on_d, k), sum_x = summed_over_ranks(on_x, k);
  if (!sum_d.empty()) {
    distance_between(what + ", clipped sum before noise", sum_d, sum_x, 1.0, c, a.relative_slack, 0.0, report);
  }
  check_statistics(what, on_d[0], on_x[0], k, a.relative_slack, report);
  check_structure(what, on_d, on_x, on_ref, report);
}

// The audit's seed for batches arranged as `plan` at its step k.
inline std::uint64_t audit_seed(const DpSgdAudit& a, std::int64_t n, BatchPlan plan) {
  plan.step = a.step;
  return replay_seed(n, sampling_rate(a.batch_size, n), sampling_rate(a.batch_size, n + 1), plan);
}

// Runs on D and on D ∪ {x} with the seed of `plan`, for the check named `what`.
struct ReplayPair {
  std::string what;
  std::size_t k;  // the audited step, from 0
  std::vector<StageRun> on_d, on_x;
};
inline ReplayPair replay_pair(const DpSgdAudit& a, const ReplayData& d, const Neighbour& x, const BatchPlan& plan,
                              const std::string& label) {
  const std::uint64_t seed = audit_seed(a, d.size(), plan);
  return {a.name + ", x = " + x.name + label, static_cast<std::size_t>(a.step - 1),
          a.runner(a.mechanism, seed, a.model, d), a.runner(a.mechanism, seed, a.model, d.with(x.image, x.label, x.caption))};
}

// x alone in the k-th batch: D's step is pure noise (an empty batch), D ∪ {x}'s is x's clipped
// gradient plus the same noise.
inline void audit_alone(const DpSgdAudit& a, const ReplayData& d, const Neighbour& x, Report& report) {
  const ReplayPair p = replay_pair(a, d, x, BatchPlan{1, true, true, 0}, " alone in the batch");
  check_frozen(p.what, p.on_x, report);
  if (!check_earlier_steps(p.what, p.on_d, p.on_x, p.k, report)) return;
  const double x_norm = check_fidelity(p.what, p.on_d, p.on_x, p.k, a.fidelity, report);
  distance_between(p.what + ", released update", p.on_d[0].releases[p.k], p.on_x[0].releases[p.k], release_scale(a),
                   stated_sensitivity(a, p.on_d[0], p.k), a.relative_slack, 0.0, report, x_norm);
  check_statistics(p.what, p.on_d[0], p.on_x[0], p.k, a.relative_slack, report);
  for (std::size_t r = 0; r < p.on_x.size(); ++r) {
    report.add(first_difference(p.what + ": a released count, shape or decision depends on x's presence",
                                p.on_d[r].trace.released, p.on_x[r].trace.released));
  }
}

// Steps k+1 .. k+next of two runs that began them from the same released state: their updates,
// declared releases, reported clip norms and metrics must be equal. One finding, at the first step
// where something differs, listing what.
// The noise bases two runs stated at one step (StepReport::noise_bases) are the same.
inline bool same_bases(const std::vector<sdk::StepReport::NoiseBasis>& a, const std::vector<sdk::StepReport::NoiseBasis>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].release != b[i].release || a[i].noise_std != b[i].noise_std || !a[i].basis.sizes().equals(b[i].basis.sizes()) ||
        (a[i].basis - b[i].basis).abs().max().item<double>() > 1e-9) {
      return false;
    }
  }
  return true;
}

inline void compare_next_steps(const std::string& what, const DpSgdAudit& a, const StageRun& d, const StageRun& dx,
                               Report& report) {
  const auto k = static_cast<std::size_t>(a.step - 1);
  if (!same_bases(d.noise_bases[k], dx.noise_bases[k])) {  // both runs began step k from the same state
    report.add(what + ", step " + std::to_string(k + 1) + ": the noise bases the mechanism stated differ on D and on " +
               "D + x: a basis must come from public data and released values (GEP's from public gradients, never " +
               "from the batch's)");
    return;
  }
  for (std::size_t j = k + 1; j <= k + static_cast<std::size_t>(a.next_steps); ++j) {
    std::vector<std::string> differ;
    Report scratch;
    distance_between("", d.releases[j], dx.releases[j], release_scale(a), 0.0, 0.0, 1e-9 * a.max_grad_norm, scratch);
    if (!scratch.violations.empty()) differ.push_back("update");
    Report stats;
    distance_between("", statistic_values(d, j), statistic_values(dx, j), 1.0, 0.0, 0.0, 1e-9, stats);
    if (!stats.violations.empty()) differ.push_back("declared releases");
    if (d.sensitivities[j] != dx.sensitivities[j]) differ.push_back("clip norm");
    if (d.metrics[j] != dx.metrics[j]) differ.push_back("metrics");
    if (!same_bases(d.noise_bases[j], dx.noise_bases[j])) differ.push_back("stated noise bases");
    if (differ.empty()) continue;
    std::string list;
    for (const auto& part : differ) list += (list.empty() ? "" : ", ") + part;
    report.add(what + ", step " + std::to_string(j + 1) + ": its " + list + " differ on D and on D + x, though both " +
               "runs began from the same released state after step " + std::to_string(a.step) + " and x is in " +
               "neither batch: x reaches a later step through something the mechanism did not release with noise " +
               "(a clip norm or count kept from raw values; release statistics with release_statistic)");
    return;
  }
}

// x in the k-th batch, in none of the next `next_steps`, whose batches are D's in both runs. The run
// on D is given the released state of the run on D + x after step k (its weights and its declared
// releases of step k, ModelSpec::imposed), so both take the next steps from the same public state: a
// mechanism whose later steps depend on x only through what it released (with noise) releases the
// same there; one that keeps something of x (non-private adaptive clipping, a count used raw) does not.
inline void audit_next_steps(const DpSgdAudit& a, const ReplayData& d, const Neighbour& x, Report& report) {
  const auto k = static_cast<std::size_t>(a.step - 1);
  const std::uint64_t seed = audit_seed(a, d.size(), BatchPlan{1, true, false, a.x_alone_in_chunk, a.next_steps});
  const std::string what = a.name + ", x = " + x.name + ", next steps";
  const std::vector<StageRun> on_x = a.runner(a.mechanism, seed, a.model, d.with(x.image, x.label, x.caption));
  const std::size_t need = k + 1 + static_cast<std::size_t>(a.next_steps);
  if (on_x[0].releases.size() < need) {
    report.add(what + ": the stage took " + std::to_string(on_x[0].releases.size()) + " steps, but the audit replays " +
               "step " + std::to_string(need));
    return;
  }
  auto imposed = std::make_shared<ImposedState>();
  imposed->step = a.step;
  imposed->weights = on_x[0].weights_after[k];
  imposed->statistics = statistic_values(on_x[0], k);
  ModelSpec forced = a.model;
  forced.imposed = imposed;
  const std::vector<StageRun> on_d = a.runner(a.mechanism, seed, forced, d);
  if (on_d[0].releases.size() < need) return;  // the ledger and step count: the structure checks' findings
  for (std::size_t r = 0; r < on_d.size() && r < on_x.size(); ++r) {
    compare_next_steps(what + (on_d.size() > 1 ? " (rank " + std::to_string(r) + ")" : ""), a, on_d[r], on_x[r], report);
  }
}

// x in the data set but in no batch up to step k: only the public N has changed, so the releases
// must not move.
inline void audit_out_of_batch(const DpSgdAudit& a, const ReplayData& d, const Neighbour& x, Report& report) {
  const ReplayPair p = replay_pair(a, d, x, BatchPlan{1, false, false, 0}, " not in the batch");
  if (!check_earlier_steps(p.what, p.on_d, p.on_x, p.k, report)) return;
  distance_between(p.what + ", released update", p.on_d[0].releases[p.k], p.on_x[0].releases[p.k], release_scale(a),
                   0.0, 0.0, 1e-9 * a.max_grad_norm, report);
  distance_between(p.what + ", declared releases", statistic_values(p.on_d[0], p.k), statistic_values(p.on_x[0], p.k),
                   1.0, 0.0, 0.0, 1e-9, report);
}

}  // namespace detail

/// Runs the audit of logical step k = a.step: D, D ∪ {x_ref} and D ∪ {x} for each neighbour with
/// identical randomness (x in the k-th batch and in none before), then x alone in that batch (D's
/// empty), then x in no batch (the release must then be the same). Returns every finding and the
/// measured distances (in units of C).
inline Report audit_dp_sgd(const DpSgdAudit& a, const ReplayData& d, const std::vector<Neighbour>& neighbours,
                           const Neighbour& reference) {
  Report report;
  const std::uint64_t seed = detail::audit_seed(a, d.size(), BatchPlan{1, true, false, a.x_alone_in_chunk});
  const std::vector<StageRun> on_d = a.runner(a.mechanism, seed, a.model, d);
  const std::vector<StageRun> on_ref = a.runner(a.mechanism, seed, a.model, d.with(reference.image, reference.label, reference.caption));
  detail::check_frozen(a.name + ", on D", on_d, report);
  for (const Neighbour& x : neighbours) detail::audit_in_batch(a, d, seed, x, on_d, on_ref, report);
  if (!neighbours.empty() && a.check_alone) detail::audit_alone(a, d, neighbours.front(), report);
  if (!neighbours.empty()) detail::audit_out_of_batch(a, d, neighbours.front(), report);
  if (a.next_steps > 0) {
    for (const Neighbour& x : neighbours) detail::audit_next_steps(a, d, x, report);
  }
  return report;
}

/// audit_dp_sgd on unlabelled images (every label 0).
inline Report audit_dp_sgd(const DpSgdAudit& a, const at::Tensor& images, const std::vector<Neighbour>& neighbours,
                           const Neighbour& reference) {
  return audit_dp_sgd(a, ReplayData(images), neighbours, reference);
}

/// DpSgdOptions for an audit: one or two logical steps of plain SGD (lr 1, no momentum, no EMA)
/// whose update is the released gradient; reproducible streams (the seed is the replay's).
inline engine::DpSgdOptions audit_options(std::int64_t batch_size, double max_grad_norm, double sigma) {
  engine::DpSgdOptions o;
  o.batch_size = batch_size;
  o.steps = 4;  // step k <= 2, and the two steps after it (audit_next_steps)
  o.max_grad_norm = max_grad_norm;
  o.noise_multiplier = sigma;
  o.optimizer = "sgd";
  o.lr = 1.0;
  o.momentum = 0;
  o.ema = 0;
  o.secure_noise = false;
  // DpSgdOptions{} augments (RandAugmentOptions' default is 2 ops; a recipe's is 0). Augmentation
  // draws its ops for the whole chunk at once, so adding x changes the draws of D's records: the
  // identical-seed replay needs it off.
  o.augment.ops_per_image = 0;
  return o;
}

/// A factory of T (a RecordingMechanism or a planted bug) with `options` and the replay's seed.
template <class T>
MechanismFactory recording(engine::DpSgdOptions options) {
  return [options](std::uint64_t seed) {
    engine::DpSgdOptions o = options;
    o.seed = seed;
    return std::unique_ptr<sdk::Mechanism>(std::make_unique<T>(o));
  };
}


}  // namespace privdiff::sdk::check
