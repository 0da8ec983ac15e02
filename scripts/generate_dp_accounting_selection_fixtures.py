#!/usr/bin/env python3
"""Writes Google dp-accounting's own numbers for private selection (Papernot & Steinke, ICLR 2022),
for tests/sdk/private_selection_reference_test.cpp:

    python3 -m venv /tmp/dpsel
    /tmp/dpsel/bin/pip install dp-accounting==0.6.0 mpmath==1.4.1
    /tmp/dpsel/bin/python scripts/generate_dp_accounting_selection_fixtures.py tests/fixtures/accountants

(numpy and scipy come with dp-accounting; the versions found are written into the fixture.) Runs in
about ten seconds and writes selection_dp_accounting.csv. The script only calls dp-accounting; none of its
code is copied into privdiff.

What dp-accounting 0.6.0 computes (read from its installed rdp/rdp_privacy_accountant.py,
`_compute_rdp_repeat_and_select`, reached by composing a `RepeatAndSelectDpEvent(event, mean, shape)`
into an `RdpAccountant(orders)`):
  * the count K is given by its mean and a shape: shape = inf is Poisson(mean) (Theorem 6), shape in
    [0, inf) the truncated negative binomial D(eta = shape, gamma) (Theorem 2). It refuses shape < 0
    (privdiff's eta in (-1, 0)) and mean < 1, so those have no rows here (the script checks that it
    refuses them). gamma is found from the mean by bisection to 1e-9 relative and rounded down
    (`_gamma_truncated_negative_binomial`; exactly 1/mean at shape 1). The `gamma` column is that
    value, called here with the same arguments, so privdiff is given the very gamma dp-accounting
    used; `gamma_exact` is the root of E[K] = mean by mpmath, for the record.
  * Theorem 2: at each order lambda of the accountant's grid,
        rdp[lambda] + log(mean) / (lambda - 1) + (1 + eta) min_{lambda_hat in grid} ((1 - 1/lambda_hat) rdp[lambda_hat] + log(1/gamma) / lambda_hat),
    then the running minimum from above (RDP is non-decreasing in the order, so a bound at a higher order
    holds at a lower one). privdiff's selection_rdp is the same formula at one pair (lambda,
    lambda_hat) with log(E[K]) for the gamma given instead of log(mean): with dp-accounting's
    rounded-down gamma E[K] is above the mean by at most ~5e-10 relative (log_mean_offset below).
    The minimum runs over every order of the grid, orders below 1 too, where Theorem 2 does not hold
    (it needs lambda_hat >= 1): with orders [0.5, 2, 4], a Gaussian of sigma 0.3 and the geometric of
    mean 4, dp-accounting gives 12.49 at order 2, 24.99 without the 0.5. privdiff refuses lambda_hat < 1;
    the grids here start above 1.
  * Theorem 6: rdp[lambda] + mean * delta_hat + log(mean) / (lambda - 1), delta_hat the candidate's delta
    at eps_hat = log1p(1/(lambda - 1)) from its own RDP over the same grid (`compute_delta`: the
    improved conversion and the KL bound, as privdiff's rdp::delta); no running minimum.
  * epsilon at delta = 1e-5: `get_epsilon_and_optimal_order` (Canonne, Kamath & Steinke 2020 / Balle
    et al. 2020, as privdiff's rdp::Conversion::improved) over the selection's curve.
The candidate's own RDP is written too, dp-accounting's and the exact one (mpmath: the binomial sum at
integer orders, quadrature of A_alpha's integral at fractional ones). At fractional orders dp-accounting's
series sums |C(alpha, i)|: an upper bound on the exact value (which privdiff computes), 0.0005 % above it
at order 4.5 but 21 % above at order 1.25 for q = 0.05, sigma = 2. So the test feeds dp-accounting's
candidate curve into privdiff's theorem to compare the theorems at every order, and compares end to end
(privdiff's own candidate curve) only on the integer grid.

dp-accounting's own tests of these closed forms (rdp/rdp_privacy_accountant_test.py):
  test_repeat_select_gaussian_negative_binomial  Corollary 4: a Gaussian with rho-zCDP (sigma =
      sqrt(1/(2 rho))) selected under D(eta, gamma) is (lambda, rho (lambda - 1) + log(mean)/(lambda - 1)
      + 2 (1 + eta) sqrt(rho log(1/gamma)) - eta rho)-RDP for lambda >= lambda* = 1 + sqrt(log(mean)/rho),
      and below lambda* its value at lambda*; exact on a grid holding lambda_hat* = sqrt(log(1/gamma)/rho)
      and lambda*.
      The `corollary4` column is that closed form by mpmath (with log E[K] of the gamma used) for the
      Gaussian candidates on the mixed grid, where both orders are added to the grid.
  test_repeat_select_pure_negative_binomial  Corollary 3: Laplace (pure eps-DP) at order 1e10 gives
      eps (2 + eta); test_repeat_and_select_pure_poisson: its Theorem 6 analogue; neither is here
      (privdiff has no Laplace event).
  test_repeat_select_trivial  mean 1 gives back the candidate's RDP (needs order 1 in the grid; privdiff
      requires gamma < 1, i.e. mean > 1, and orders > 1).
  test_repeat_and_select_gaussian_poisson  only a lower bound (with the Gaussian's exact delta_hat).

Columns: candidate (poisson_sampled: `steps` steps of the Gaussian with noise multiplier `sigma` on a
Poisson sample of rate `q`; gaussian: the plain Gaussian, q = 1), distribution (truncated_negative_binomial
or poisson), mean, shape (eta; inf for Poisson), gamma, gamma_exact, log_mean_offset (log E[K] at
`gamma` minus log(mean), mpmath), grid (integer or mixed; a block's grid is the orders of its rows, in
order), order, candidate_rdp (dp-accounting's), candidate_rdp_exact (mpmath), selection_rdp, corollary4
(empty where it does not apply), delta, epsilon and epsilon_order (dp-accounting's, repeated on each row
of a block). Floats are written with repr(), so C++'s stod reads back the very doubles.
"""
import csv
import functools
import importlib.metadata as metadata
import math
import os
import sys

PINNED = {"dp-accounting": "0.6.0", "mpmath": "1.4.1"}


def check_versions():
    found = {name: metadata.version(name) for name in PINNED}
    if found != PINNED:
        sys.exit(f"pinned versions {PINNED}, found {found}: install the pinned ones (see the docstring)")
    for extra in ("numpy", "scipy"):
        found[extra] = metadata.version(extra)
    return found


VERSIONS = check_versions()

import dp_accounting  # noqa: E402
from dp_accounting import dp_event  # noqa: E402  (RepeatAndSelectDpEvent is not re-exported at the top)
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib  # noqa: E402
import mpmath as mp  # noqa: E402

mp.mp.dps = 50

DELTA = 1e-5
# q, sigma, steps: the shapes of generate_selection_fixtures.py, then the plain Gaussian.
CANDIDATES = [("poisson_sampled", 0.01, 1.1, 1000), ("poisson_sampled", 0.05, 2.0, 400),
              ("poisson_sampled", 1.0, 20.0, 1), ("gaussian", 1.0, 2.0, 1)]
# (distribution, mean, shape): dp-accounting's parameters; privdiff's eta = shape, gamma from the mean.
COUNTS = [("truncated_negative_binomial", 4.0, 1.0), ("truncated_negative_binomial", 10.0, 0.0),
          ("truncated_negative_binomial", 8.0, 0.5), ("truncated_negative_binomial", 5.0, 2.0),
          ("poisson", 4.0, math.inf), ("poisson", 32.0, math.inf)]
GRIDS = {
    "integer": [float(a) for a in list(range(2, 17)) + [20, 24, 32, 48, 64, 128, 256]],
    "mixed": [1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 16.0, 20.0,
              24.0, 32.0, 48.0, 64.0, 128.0, 256.0],
}


def dp_candidate(kind, q, sigma, steps):
    if kind == "gaussian":
        return dp_accounting.GaussianDpEvent(sigma)
    return dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)


def tnb_mean(eta, gamma):
    eta, gamma = mp.mpf(eta), mp.mpf(gamma)
    if eta == 0:
        return (1 / gamma - 1) / mp.log(1 / gamma)
    return eta * (1 - gamma) / (gamma * (1 - gamma**eta))


@functools.lru_cache(maxsize=None)
def exact_candidate_rdp(q, sigma, steps, alpha):
    """The candidate's exact RDP (mpmath): T alpha / (2 sigma^2) unsampled; else T log(A_alpha) / (alpha - 1),
    A_alpha by the binomial sum at integer orders and by quadrature of its defining integral
    E_{z ~ N(0, s^2)} [((1 - q) + q exp((2z - 1) / (2 s^2)))^alpha] at fractional ones."""
    q, s, a = mp.mpf(q), mp.mpf(sigma), mp.mpf(alpha)
    if q == 1:
        return steps * a / (2 * s * s)
    if float(alpha).is_integer():
        n = int(alpha)
        log_a = mp.log(mp.fsum(mp.binomial(n, i) * q**i * (1 - q) ** (n - i) * mp.exp((i * i - i) / (2 * s * s))
                               for i in range(n + 1)))
    else:
        def integrand(z):
            return mp.npdf(z, 0, s) * ((1 - q) + q * mp.exp((2 * z - 1) / (2 * s * s))) ** a

        points = sorted(set([mp.mpf(0), a, mp.mpf("0.5")] + [c + k * s for c in (0, a) for k in (-40, -10, -3, 3, 10, 40)]))
        log_a = mp.log(mp.quad(integrand, [-mp.inf] + points + [mp.inf]))
    return steps * log_a / (a - 1)


def check_refusals():
    """dp-accounting 0.6.0 has no eta < 0 and no mean < 1: say so, and stop if that ever changes."""
    for mean, shape in ((4.0, -0.5), (0.5, 1.0), (0.5, math.inf)):
        try:
            rdp_lib.RdpAccountant(orders=[2.0]).compose(
                dp_event.RepeatAndSelectDpEvent(dp_accounting.GaussianDpEvent(2.0), mean, shape))
        except ValueError:
            continue
        sys.exit(f"dp-accounting now accepts mean {mean}, shape {shape}: add rows for it")


def corollary4(rho, eta, gamma, log_mean, order):
    """Papernot & Steinke's Corollary 4 (a rho-zCDP Gaussian under D(eta, gamma)), minimised over all
    real lambda_hat and made non-increasing downwards, at `order` (mpmath)."""
    rho, eta, gamma, order = mp.mpf(rho), mp.mpf(eta), mp.mpf(gamma), mp.mpf(order)
    lam_star = 1 + mp.sqrt(log_mean / rho)
    hat = 2 * (1 + eta) * mp.sqrt(rho * mp.log(1 / gamma)) - eta * rho
    if order <= lam_star:
        return 2 * mp.sqrt(rho * log_mean) + hat
    return rho * (order - 1) + log_mean / (order - 1) + hat


def main(out):
    check_refusals()
    rows = []
    for kind, q, sigma, steps in CANDIDATES:
        event = dp_candidate(kind, q, sigma, steps)
        rho = steps / (2 * mp.mpf(sigma) ** 2) if q == 1.0 else None  # an unsampled Gaussian is rho-zCDP
        for distribution, mean, shape in COUNTS:
            tnb = distribution == "truncated_negative_binomial"
            gamma = rdp_lib._gamma_truncated_negative_binomial(shape, mean) if tnb else None
            gamma_exact = mp.findroot(lambda g: tnb_mean(shape, g) - mean, gamma) if tnb else None
            log_mean = mp.log(tnb_mean(shape, gamma)) if tnb else mp.log(mean)
            for grid_name, base in GRIDS.items():
                grid = list(base)
                closed_form = tnb and rho is not None and grid_name == "mixed"
                if closed_form:  # lambda_hat* and lambda*, so that the grid's minimum is the closed form's
                    hat_star = float(mp.sqrt(mp.log(1 / mp.mpf(gamma)) / rho))
                    lam_star = float(1 + mp.sqrt(log_mean / rho))
                    assert hat_star > 1 and lam_star < grid[-1]
                    grid = sorted(set(grid + [hat_star, lam_star]))
                candidate = rdp_lib.RdpAccountant(orders=grid)
                candidate.compose(event)
                accountant = rdp_lib.RdpAccountant(orders=grid)
                accountant.compose(dp_event.RepeatAndSelectDpEvent(event, mean, shape))
                epsilon, epsilon_order = accountant.get_epsilon_and_optimal_order(DELTA)
                for order, c_rdp, s_rdp in zip(grid, candidate._rdp, accountant._rdp):
                    rows.append({
                        "candidate": kind, "q": repr(q), "sigma": repr(sigma), "steps": steps,
                        "distribution": distribution, "mean": repr(mean), "shape": repr(shape),
                        "gamma": repr(gamma) if tnb else "", "gamma_exact": mp.nstr(gamma_exact, 20) if tnb else "",
                        "log_mean_offset": mp.nstr(log_mean - mp.log(mean), 6) if tnb else "0",
                        "grid": grid_name, "order": repr(float(order)),
                        "candidate_rdp": repr(float(c_rdp)),
                        "candidate_rdp_exact": mp.nstr(exact_candidate_rdp(q, sigma, steps, float(order)), 20),
                        "selection_rdp": repr(float(s_rdp)),
                        "corollary4": mp.nstr(corollary4(rho, shape, gamma, log_mean, order), 20) if closed_form else "",
                        "delta": repr(DELTA), "epsilon": repr(float(epsilon)), "epsilon_order": repr(float(epsilon_order)),
                    })
            print(kind, q, sigma, steps, distribution, mean, shape, gamma, "epsilon", epsilon, "at", epsilon_order,
                  flush=True)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "selection_dp_accounting.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        f.write("# selection RDP (RepeatAndSelectDpEvent in an RdpAccountant over the block's grid) and epsilon at delta, "
                "by dp-accounting; corollary4 = Papernot & Steinke's closed form by mpmath\n")
        f.write("# generated by scripts/generate_dp_accounting_selection_fixtures.py with "
                + " ".join(f"{k}=={v}" for k, v in VERSIONS.items()) + "\n")
        w.writerows(rows)


if __name__ == "__main__":
    main(sys.argv[1])
