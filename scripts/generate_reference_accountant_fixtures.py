#!/usr/bin/env python3
"""Generates the accountant fixtures computed by the reference libraries themselves.

    python3 -m venv /tmp/refacct
    /tmp/refacct/bin/pip install dp-accounting==0.6.0 prv-accountant==0.2.0 mpmath==1.4.1
    /tmp/refacct/bin/pip install --no-deps opacus==1.6.0
    /tmp/refacct/bin/python scripts/generate_reference_accountant_fixtures.py tests/fixtures/accountants

(numpy 2.4.6 and scipy 1.17.1 came with dp-accounting; their versions are recorded too.) Runs in
about three and a half minutes on one core and writes, for tests/plugins/accountant_references_test.cpp:

  reference_accountants.csv  epsilon(delta) of the same events from Google's dp-accounting (its RDP
                             accountant and its PLD accountant), Microsoft's prv-accountant and
                             Opacus (its RDP and PRV accountants), with each library's error bounds;
                             RDP rows also carry the exact epsilon at the library's optimal order,
                             computed with mpmath (as scripts/generate_accountant_fixtures.py does).
  reference_calibration.csv  noise multipliers each library's calibration returns for a target
                             epsilon, and the epsilon the library itself gives at that multiplier.
  reference_rdp_orders.csv   the default RDP orders of dp-accounting and Opacus, as the libraries
                             define them.

The grid covers DPDM's, DP-LDM's and DP-FETA's schedules (../shared/papers/*-digest.md) plus a few
generic points. Events are written `q:sigma:steps` (Poisson rate, noise multiplier, count), several
joined by `+` for a composition (DP-FETA: central-image queries first, then DP-SGD); in the
calibration table the calibrated multiplier is `*`. Floats are written with repr(), so C++'s stod
reads back the very doubles the libraries were given.

Opacus is imported without torch: `opacus/__init__.py` imports the whole training stack, but its
accountants need only numpy and scipy, save for one type annotation (DPOptimizer) in
accountants/accountant.py. So `opacus` is registered as a bare package (its __init__ not run) and
`opacus.optimizers` as a stub holding that one name; the accountant modules run unchanged.
Nothing of the libraries' code is copied into privdiff: only their outputs are.
"""
import csv
import importlib.metadata as metadata
import importlib.util
import logging
import os
import sys
import time
import types
import warnings

PINNED = {
    "dp-accounting": "0.6.0",
    "prv-accountant": "0.2.0",
    "opacus": "1.6.0",
    "mpmath": "1.4.1",
}


def check_versions():
    found = {name: metadata.version(name) for name in PINNED}
    wrong = {name: v for name, v in found.items() if v != PINNED[name]}
    if wrong:
        sys.exit(f"pinned versions {PINNED}, found {found}: install the pinned ones (see the docstring)")
    for extra in ("numpy", "scipy"):
        found[extra] = metadata.version(extra)
    return found


VERSIONS = check_versions()


def import_opacus_accountants():
    spec = importlib.util.find_spec("opacus")
    package = types.ModuleType("opacus")
    package.__path__ = list(spec.submodule_search_locations)
    sys.modules["opacus"] = package
    optimizers = types.ModuleType("opacus.optimizers")
    optimizers.DPOptimizer = object  # only a type annotation in accountants/accountant.py
    sys.modules["opacus.optimizers"] = optimizers
    import opacus.accountants as accountants
    import opacus.accountants.utils as utils
    return accountants, utils


opacus_accountants, opacus_utils = import_opacus_accountants()
import dp_accounting  # noqa: E402
from dp_accounting import mechanism_calibration  # noqa: E402
from dp_accounting.pld import privacy_loss_distribution as pld_lib  # noqa: E402
from dp_accounting.rdp import rdp_privacy_accountant  # noqa: E402
import mpmath as mp  # noqa: E402
import prv_accountant  # noqa: E402
from prv_accountant.dpsgd import find_noise_multiplier  # noqa: E402

logging.getLogger().setLevel(logging.ERROR)  # dp-accounting logs every privacy-buckets fallback
warnings.filterwarnings("ignore")  # "optimal order is the largest alpha" and the like; see the order column

DELTA_ERROR_RATIO = 1e-3  # delta_error = delta / 1000: Opacus's default, also used for prv-accountant
EPS_ERROR = 0.01          # Opacus PRVAccountant's default eps_error (prv-accountant's docstring: "typically around 0.1")
PLD_INTERVAL = 1e-4       # dp-accounting PLDAccountant's default value_discretization_interval

# ---------------------------------------------------------------------------------------------
# The grid. Each scenario: name, parts [(q, sigma, steps)], delta.

MNIST_N, CELEBA_TRAIN_N = 60000, 162770
SCENARIOS = [
    # DPDM (Dockhorn et al.), Table 9 under Opacus's conventions: q = 1/len(loader), 300 epochs.
    ("dpdm_mnist_eps10", [(1 / 15, 2.48779, 4500)], 1e-5),
    ("dpdm_mnist_eps1", [(1 / 15, 18.28125, 4500)], 1e-5),
    ("dpdm_mnist_eps0.2", [(1 / 15, 82.5, 4500)], 1e-5),
    ("dpdm_mnist_q_b_over_n", [(4096 / MNIST_N, 2.48779, 4394)], 1e-5),
    ("dpdm_celeba_eps10", [(1 / 80, 1.30371, 24000)], 1e-6),
    ("dpdm_celeba_eps1", [(1 / 80, 8.82812, 24000)], 1e-6),
    # DP-LDM (Lyu et al.): fine-tuning, fewer steps.
    ("dpldm_mnist_eps10", [(2000 / MNIST_N, 1.47, 6000)], 1e-5),
    ("dpldm_mnist_eps1", [(2000 / MNIST_N, 9.78, 6000)], 1e-5),
    ("dpldm_t2i_eps10", [(256 / 30000, 0.55, 1172)], 1e-5),
    ("dpldm_t2i_eps1", [(256 / 30000, 1.46, 1172)], 1e-5),
    ("dpldm_cifar10", [(2000 / 50000, 1.0, 750)], 1e-5),
    ("dpldm_celeba64", [(8192 / CELEBA_TRAIN_N, 2.0, 1391)], 1e-6),
    # DP-FETA (Li et al.): central images alone, and composed with DP-SGD (central queries first).
    ("dpfeta_central_mnist", [(0.1, 5.0, 5)], 1e-5),
    ("dpfeta_central_celeba", [(0.0657, 10.0, 250)], 1e-6),
    ("dpfeta_central_camelyon", [(0.04, 10.0, 250)], 1e-6),
    ("dpfeta_mnist_eps1", [(0.1, 5.0, 5), (4096 / MNIST_N, 13.28, 2197)], 1e-5),
    ("dpfeta_mnist_eps10", [(0.1, 5.0, 5), (4096 / MNIST_N, 1.86, 2197)], 1e-5),
    ("dpfeta_celeba_eps10", [(0.0657, 10.0, 250), (2048 / 182637, 1.0, 13376)], 1e-6),
    ("dpfeta_camelyon_eps1", [(0.04, 10.0, 250), (2048 / 302436, 1.91, 2953)], 1e-6),
    ("dpfeta_camelyon_eps10", [(0.04, 10.0, 250), (2048 / 302436, 0.61, 2953)], 1e-6),
    # PrivImage (Li et al.): one semantic query on all records (q = 1; DP-ImaGen's account_history
    # (484, 1.0, 1)), then DP-SGD; privdiff's PrivImage recipe (sigma 20, then 719 steps at 256 / 60,000).
    ("privimage_query_cifar10", [(1.0, 484.0, 1)], 1e-5),
    ("privimage_fmnist_eps10", [(1.0, 20.0, 1), (256 / MNIST_N, 0.9, 719)], 1e-5),
    ("privimage_fmnist_eps1", [(1.0, 20.0, 1), (256 / MNIST_N, 4.0, 719)], 1e-5),
    # Generic points: small and large q, sigma below 1, few and many steps, other deltas.
    ("generic_q0.001_s0.8", [(0.001, 0.8, 10000)], 1e-5),
    ("generic_q0.01_s1.1", [(0.01, 1.1, 10000)], 1e-5),
    ("generic_q0.04_s1.5", [(0.04, 1.5, 2249)], 1e-5),
    ("generic_q0.01_s0.8_d1e-8", [(0.01, 0.8, 1000)], 1e-8),
    ("generic_q0.2_s2", [(0.2, 2.0, 100)], 1e-5),
    ("generic_q0.5_s4", [(0.5, 4.0, 50)], 1e-6),
    ("generic_q0.1_s20", [(0.1, 20.0, 10)], 1e-4),
    ("generic_hetero", [(0.01, 1.0, 500), (0.02, 2.0, 2000), (0.005, 0.7, 300)], 1e-5),
]

CALIBRATIONS = [
    # Calibration: name, fixed parts, (q, steps) of the calibrated part, target epsilon, delta, and
    # whether prv-accountant's find_noise_multiplier runs too (it takes 30-80 s per target here).
    ("dpdm_mnist", [], (1 / 15, 4500), 10.0, 1e-5, True),
    ("dpdm_mnist", [], (1 / 15, 4500), 1.0, 1e-5, False),
    ("dpdm_mnist", [], (1 / 15, 4500), 0.2, 1e-5, False),
    ("dpdm_celeba", [], (1 / 80, 24000), 10.0, 1e-6, False),
    ("dpldm_mnist", [], (2000 / MNIST_N, 6000), 10.0, 1e-5, False),
    ("dpldm_mnist", [], (2000 / MNIST_N, 6000), 1.0, 1e-5, False),
    ("dpldm_t2i", [], (256 / 30000, 1172), 10.0, 1e-5, False),
    ("dpldm_t2i", [], (256 / 30000, 1172), 1.0, 1e-5, True),
    ("generic_q0.01", [], (0.01, 3000), 8.0, 1e-5, True),
    ("dpfeta_mnist", [(0.1, 5.0, 5)], (4096 / MNIST_N, 2197), 1.0, 1e-5, False),
    ("dpfeta_mnist", [(0.1, 5.0, 5)], (4096 / MNIST_N, 2197), 10.0, 1e-5, False),
    ("dpfeta_celeba", [(0.0657, 10.0, 250)], (2048 / 182637, 13376), 10.0, 1e-6, False),
    ("privimage_cifar10", [(1.0, 484.0, 1)], (19384 / 50000, 129), 10.0, 1e-5, False),
    ("privimage_fmnist", [(1.0, 20.0, 1)], (256 / MNIST_N, 719), 10.0, 1e-5, False),
]


def encode(parts):
    return "+".join(f"{q!r}:{s!r}:{n}" for q, s, n in parts)


def encode_calibration(fixed, q, steps):
    return "+".join([f"{a!r}:{b!r}:{c}" for a, b, c in fixed] + [f"{q!r}:*:{steps}"])


def dp_event(parts):
    events = [dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(s)), n) for q, s, n in parts]
    return events[0] if len(events) == 1 else dp_accounting.ComposedDpEvent(events)


# ---------------------------------------------------------------------------------------------
# Exact RDP at one order (mpmath, 50 digits), to tell which library is right where they differ.

mp.mp.dps = 50


def exact_log_a(q, s, alpha):
    q, s = mp.mpf(q), mp.mpf(s)
    if float(alpha).is_integer():
        a = int(alpha)
        return mp.log(mp.fsum(mp.binomial(a, i) * q**i * (1 - q) ** (a - i) * mp.exp((i * i - i) / (2 * s * s))
                              for i in range(a + 1)))
    alpha = mp.mpf(alpha)

    def integrand(z):
        return mp.npdf(z, 0, s) * ((1 - q) + q * mp.exp((2 * z - 1) / (2 * s * s))) ** alpha

    points = sorted(set([mp.mpf(0), alpha, mp.mpf("0.5")] + [c + k * s for c in (0, alpha) for k in (-40, -10, -3, 3, 10, 40)]))
    return mp.log(mp.quad(integrand, [-mp.inf] + points + [mp.inf]))


def exact_epsilon_at_order(parts, alpha, delta, conversion):
    """epsilon at one RDP order: `improved` = Balle et al. 2020 Thm 21 (both libraries' formula)."""
    rdp = mp.fsum(n * exact_log_a(q, s, alpha) / (mp.mpf(alpha) - 1) for q, s, n in parts)
    a, d = mp.mpf(alpha), mp.mpf(delta)
    assert conversion == "improved"
    return rdp + mp.log((a - 1) / a) - (mp.log(d) + mp.log(a)) / (a - 1)


# ---------------------------------------------------------------------------------------------
# Each library's epsilon(delta).

NAN = float("nan")


def row(scenario, library, accountant, parts, delta, epsilon, lower=NAN, estimate=NAN, eps_error=NAN,
        delta_error=NAN, order=NAN, exact_at_order=NAN, epsilon_remove=NAN, epsilon_add=NAN):
    return {"scenario": scenario, "library": library, "version": VERSIONS[library], "accountant": accountant,
            "events": encode(parts), "delta": repr(delta), "epsilon": repr(float(epsilon)),
            "epsilon_lower": repr(float(lower)), "epsilon_estimate": repr(float(estimate)),
            "eps_error": repr(float(eps_error)), "delta_error": repr(float(delta_error)), "order": repr(float(order)),
            "epsilon_exact_at_order": repr(float(exact_at_order)), "epsilon_remove": repr(float(epsilon_remove)),
            "epsilon_add": repr(float(epsilon_add))}


def dp_accounting_rdp(name, parts, delta):
    acc = dp_accounting.rdp.RdpAccountant()  # DEFAULT_RDP_ORDERS, add-or-remove
    acc.compose(dp_event(parts))
    eps, order = acc.get_epsilon_and_optimal_order(delta)
    exact = exact_epsilon_at_order(parts, order, delta, "improved")
    return row(name, "dp-accounting", "rdp", parts, delta, eps, order=order, exact_at_order=exact)


def opacus_rdp(name, parts, delta):
    acc = opacus_accountants.RDPAccountant()  # DEFAULT_ALPHAS
    acc.history = [(s, q, n) for q, s, n in parts]
    eps, order = acc.get_privacy_spent(delta=delta)
    exact = exact_epsilon_at_order(parts, order, delta, "improved")
    return row(name, "opacus", "rdp", parts, delta, eps, order=order, exact_at_order=exact)


def dp_accounting_pld(name, parts, delta):
    acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=PLD_INTERVAL)
    acc.compose(dp_event(parts))
    eps = acc.get_epsilon(delta)  # pessimistic connect-the-dots: an upper bound
    # The same PLD's two directions, and the optimistic (privacy-buckets) estimate: a lower bound,
    # off by at most one discretisation interval per composition.
    pessimistic = optimistic = None
    for q, s, n in parts:
        for pess in (True, False):
            p = pld_lib.from_gaussian_mechanism(standard_deviation=s, sampling_prob=q, pessimistic_estimate=pess,
                                                value_discretization_interval=PLD_INTERVAL,
                                                use_connect_dots=pess).self_compose(n)
            if pess:
                pessimistic = p if pessimistic is None else pessimistic.compose(p)
            else:
                optimistic = p if optimistic is None else optimistic.compose(p)
    remove = pessimistic._pmf_remove.get_epsilon_for_delta(delta)
    add = pessimistic._pmf_add.get_epsilon_for_delta(delta)
    assert abs(max(remove, add) - eps) <= 1e-9 * eps, (name, remove, add, eps)
    lower = optimistic.get_epsilon_for_delta(delta)
    return row(name, "dp-accounting", "pld", parts, delta, eps, lower=lower, eps_error=PLD_INTERVAL,
               epsilon_remove=remove, epsilon_add=add)


def microsoft_prv(name, parts, delta):
    acc = prv_accountant.PRVAccountant(
        prvs=[prv_accountant.PoissonSubsampledGaussianMechanism(sampling_probability=q, noise_multiplier=s)
              for q, s, _ in parts],
        max_self_compositions=[n for _, _, n in parts], eps_error=EPS_ERROR, delta_error=delta * DELTA_ERROR_RATIO)
    lower, estimate, upper = acc.compute_epsilon(delta, [n for _, _, n in parts])
    return row(name, "prv-accountant", "prv", parts, delta, upper, lower, estimate, EPS_ERROR,
               delta * DELTA_ERROR_RATIO)


def opacus_prv(name, parts, delta):
    acc = opacus_accountants.PRVAccountant()
    acc.history = [(s, q, n) for q, s, n in parts]
    delta_error = delta * DELTA_ERROR_RATIO
    upper_public = acc.get_epsilon(delta, eps_error=EPS_ERROR, delta_error=delta_error)
    # get_epsilon returns the upper bound only; its discrete PRV gives all three.
    lower, estimate, upper = acc._get_dprv(eps_error=EPS_ERROR, delta_error=delta_error).compute_epsilon(
        delta, delta_error, EPS_ERROR)
    assert upper == upper_public
    return row(name, "opacus", "prv", parts, delta, upper, lower, estimate, EPS_ERROR, delta_error)


ACCOUNTANTS = [dp_accounting_rdp, opacus_rdp, dp_accounting_pld, microsoft_prv, opacus_prv]


# ---------------------------------------------------------------------------------------------
# Calibration: each library's noise multiplier for a target epsilon.

def calibration_row(name, library, method, fixed, q, steps, target, delta, sigma, eps_at_sigma, tolerance,
                    tolerance_unit):
    return {"scenario": name, "library": library, "version": VERSIONS[library], "method": method,
            "events": encode_calibration(fixed, q, steps), "target_epsilon": repr(target), "delta": repr(delta),
            "sigma": repr(float(sigma)), "epsilon_at_sigma": repr(float(eps_at_sigma)),
            "tolerance": repr(float(tolerance)), "tolerance_unit": tolerance_unit}


def calibrate_all(name, fixed, q_steps, target, delta, with_prv_accountant):
    q, steps = q_steps
    rows = []
    parts_of = lambda s: list(fixed) + [(q, s, steps)]  # noqa: E731
    # dp-accounting: calibrate_dp_mechanism (Brent, then a step to the safe side), tol 1e-6 in sigma.
    for method, make in (("rdp", lambda: dp_accounting.rdp.RdpAccountant()),
                         ("pld", lambda: dp_accounting.pld.PLDAccountant(value_discretization_interval=PLD_INTERVAL))):
        if method == "pld" and target < 0.5:
            continue  # sigma ~ 80: the PLD grid is fine but adds nothing the RDP row does not show
        sigma = mechanism_calibration.calibrate_dp_mechanism(make, lambda s: dp_event(parts_of(s)), target, delta)
        eps = make().compose(dp_event(parts_of(sigma))).get_epsilon(delta)
        rows.append(calibration_row(name, "dp-accounting", method, fixed, q, steps, target, delta, sigma, eps, 1e-6,
                                    "sigma"))
    if fixed:
        return rows  # Opacus's get_noise_multiplier and prv-accountant's find_noise_multiplier take one (q, steps)
    # Opacus get_noise_multiplier: bisection until target - eps <= epsilon_tolerance (0.01), returns sigma_high.
    for method in ("rdp", "prv"):
        kwargs = {"eps_error": EPS_ERROR, "delta_error": delta * DELTA_ERROR_RATIO} if method == "prv" else {}
        sigma = opacus_utils.get_noise_multiplier(target_epsilon=target, target_delta=delta, sample_rate=q,
                                                  steps=steps, accountant=method, epsilon_tolerance=0.01, **kwargs)
        acc = opacus_accountants.create_accountant(mechanism=method)
        acc.history = [(sigma, q, steps)]
        rows.append(calibration_row(name, "opacus", method, fixed, q, steps, target, delta, sigma,
                                    acc.get_epsilon(delta=delta, **kwargs), 0.01, "epsilon"))
    # prv-accountant find_noise_multiplier: eps_error 2 * EPS_ERROR, of which it uses half (EPS_ERROR) for the
    # PRV grid; it stops when the epsilon bracket is below 2 eps_error wide and asserts only
    # upper(sigma) < target + eps_error.
    if with_prv_accountant:
        sigma = find_noise_multiplier(sampling_probability=q, num_steps=steps, target_epsilon=target,
                                      target_delta=delta, eps_error=2 * EPS_ERROR)
        acc = prv_accountant.PRVAccountant(
            prvs=[prv_accountant.PoissonSubsampledGaussianMechanism(sampling_probability=q, noise_multiplier=sigma)],
            max_self_compositions=[steps], eps_error=EPS_ERROR, delta_error=delta * DELTA_ERROR_RATIO)
        rows.append(calibration_row(name, "prv-accountant", "prv", fixed, q, steps, target, delta, sigma,
                                    acc.compute_epsilon(delta, [steps])[2], 2 * EPS_ERROR, "epsilon"))
    return rows


# ---------------------------------------------------------------------------------------------

def header_comment(what):
    versions = " ".join(f"{k}=={v}" for k, v in VERSIONS.items())
    return [f"# {what}", "# generated by scripts/generate_reference_accountant_fixtures.py with " + versions]


def write(path, rows, comment):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(list(rows[0].keys()))
        for line in comment:
            f.write(line + "\n")
        for r in rows:
            assert all("," not in v for v in r.values()), r
            w.writerow(list(r.values()))


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    start = time.time()

    orders = [{"library": "dp-accounting", "version": VERSIONS["dp-accounting"],
               "orders": " ".join(repr(float(a)) for a in rdp_privacy_accountant.DEFAULT_RDP_ORDERS)},
              {"library": "opacus", "version": VERSIONS["opacus"],
               "orders": " ".join(repr(float(a)) for a in opacus_accountants.RDPAccountant.DEFAULT_ALPHAS)}]
    write(os.path.join(out_dir, "reference_rdp_orders.csv"), orders,
          header_comment("default RDP orders: dp_accounting.rdp DEFAULT_RDP_ORDERS, opacus RDPAccountant.DEFAULT_ALPHAS"))

    rows = []
    for name, parts, delta in SCENARIOS:
        for accountant in ACCOUNTANTS:
            try:
                rows.append(accountant(name, parts, delta))
            except (ValueError, RuntimeError, OverflowError) as e:  # a library that cannot: left out, said here
                print(f"{name}: {accountant.__name__} failed: {e}", file=sys.stderr)
        print(f"{time.time() - start:6.1f}s {name}", file=sys.stderr)
    write(os.path.join(out_dir, "reference_accountants.csv"), rows, header_comment(
        "epsilon(delta) by each library; prv: delta_error = delta/1000, eps_error 0.01; pld: interval 1e-4, "
        "epsilon = pessimistic (connect the dots), epsilon_lower = optimistic (privacy buckets); rdp: "
        "epsilon_exact_at_order = mpmath at the library's optimal order"))

    calibration = []
    for name, fixed, q_steps, target, delta, with_prv_accountant in CALIBRATIONS:
        calibration += calibrate_all(name, fixed, q_steps, target, delta, with_prv_accountant)
        print(f"{time.time() - start:6.1f}s calibration {name} {target}", file=sys.stderr)
    write(os.path.join(out_dir, "reference_calibration.csv"), calibration, header_comment(
        "noise multiplier each library's calibration returns; epsilon_at_sigma = that library's own epsilon "
        "there (the upper bound for PRV and the pessimistic estimate for PLD)"))
    print(f"done in {time.time() - start:.0f}s: {len(rows)} epsilon rows, {len(calibration)} calibration rows",
          file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/accountants")
