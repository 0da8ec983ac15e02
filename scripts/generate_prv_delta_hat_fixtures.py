#!/usr/bin/env python3
"""Writes Theorem 6's delta_hat from Microsoft's prv-accountant and the RDP bound from Google's
dp-accounting, for tests/sdk/private_selection_prv_test.cpp:

    python3 -m venv /tmp/refacct
    /tmp/refacct/bin/pip install dp-accounting==0.6.0 prv-accountant==0.2.0 mpmath==1.4.1
    /tmp/refacct/bin/python scripts/generate_prv_delta_hat_fixtures.py tests/fixtures/accountants

(numpy and scipy come with them; the versions found are written into the fixture.) Runs in about a
minute and writes selection_prv_delta_hat.csv. Only the libraries' outputs are used; none of their code
is copied into privdiff.

Papernot & Steinke (ICLR 2022), Theorem 6: with K ~ Poisson(mu) candidates, each (lambda, e)-RDP and
(e_hat, delta_hat)-DP where e_hat = log1p(1 / (lambda - 1)), the selection is (lambda, e')-RDP with
    e' = e + mu delta_hat + log(mu) / (lambda - 1).
delta_hat may come from any upper bound on the candidate's delta at e_hat. dp-accounting 0.6.0 takes it
from the candidate's RDP over its grid (`compute_delta`; generate_dp_accounting_selection_fixtures.py
checks privdiff's against it). The PRV accountant (Gopi, Lee & Wutschitz 2021) bounds it far more
tightly at such small e_hat. Per row:
  * delta_hat_lower, delta_hat_estimate, delta_hat_upper: prv-accountant's `PRVAccountant.compute_delta`
    at e_hat, with eps_error = e_hat / 100 and delta_error = 1e-12 (privdiff's prv_delta_hat uses the
    same two); the true delta_hat lies in [lower, upper].
  * delta_hat_rdp: dp-accounting's `compute_delta` over the integer grid below, at e_hat.
  * candidate_rdp: dp-accounting's RDP of the candidate at `order`.
  * selection_rdp_prv: Theorem 6 with delta_hat_upper; epsilon_prv: it converted at `order` alone
    (dp-accounting's `compute_epsilon` with one order) at delta = 1e-5.
  * selection_rdp_rdp, epsilon_rdp: the same with delta_hat_rdp (what privdiff did before).
Floats are written with repr(), so C++'s stod reads back the very doubles.
"""
import csv
import importlib.metadata as metadata
import math
import os
import sys
import warnings

PINNED = {"dp-accounting": "0.6.0", "prv-accountant": "0.2.0", "mpmath": "1.4.1"}


def check_versions():
    found = {name: metadata.version(name) for name in PINNED}
    if found != PINNED:
        sys.exit(f"pinned versions {PINNED}, found {found}: install the pinned ones (see the docstring)")
    for extra in ("numpy", "scipy"):
        found[extra] = metadata.version(extra)
    return found


VERSIONS = check_versions()

import dp_accounting  # noqa: E402
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib  # noqa: E402
from prv_accountant import PRVAccountant  # noqa: E402
from prv_accountant.privacy_random_variables import PoissonSubsampledGaussianMechanism  # noqa: E402

DELTA = 1e-5
DELTA_ERROR = 1e-12
GRID = [float(a) for a in list(range(2, 17)) + [20, 24, 32, 48, 64, 128, 256]]
# q, sigma, steps: DP-SGD shapes (the quickstart sweep's: q = 256 / 60000, ~700 steps) and two others.
CANDIDATES = [(256 / 60000, 0.53, 719), (0.01, 1.1, 1000), (0.05, 2.0, 400)]
MEANS = [4.0, 32.0]
ORDERS = [2.0, 3.0, 5.0, 8.0, 12.0, 20.0]


def candidate_rdp(q, sigma, steps, orders):
    event = dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)
    accountant = rdp_lib.RdpAccountant(orders)
    accountant.compose(event)
    return list(accountant._rdp)  # the curve at `orders` (the accountant keeps it as this array)


def prv_delta(q, sigma, steps, eps_hat):
    mechanism = PoissonSubsampledGaussianMechanism(sampling_probability=q, noise_multiplier=sigma)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        accountant = PRVAccountant(prvs=[mechanism], eps_error=eps_hat / 100, delta_error=DELTA_ERROR,
                                   max_self_compositions=[steps])
        return accountant.compute_delta(eps_hat, [steps])


def epsilon_at(order, rdp):
    return rdp_lib.compute_epsilon([order], [rdp], DELTA)[0]


def rows():
    for q, sigma, steps in CANDIDATES:
        grid_rdp = candidate_rdp(q, sigma, steps, GRID)
        for order in ORDERS:
            eps_hat = math.log1p(1 / (order - 1))
            lower, estimate, upper = prv_delta(q, sigma, steps, eps_hat)
            from_rdp = rdp_lib.compute_delta(GRID, grid_rdp, eps_hat)[0]
            rdp = candidate_rdp(q, sigma, steps, [order])[0]
            for mean in MEANS:
                sel_prv = rdp + mean * upper + math.log(mean) / (order - 1)
                sel_rdp = rdp + mean * from_rdp + math.log(mean) / (order - 1)
                yield [q, sigma, steps, mean, order, eps_hat, lower, estimate, upper, from_rdp, rdp, sel_prv,
                       epsilon_at(order, sel_prv), sel_rdp, epsilon_at(order, sel_rdp)]


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/accountants"
    path = os.path.join(out_dir, "selection_prv_delta_hat.csv")
    with open(path, "w", newline="") as f:
        f.write("q,sigma,steps,mean,order,eps_hat,delta_hat_lower,delta_hat_estimate,delta_hat_upper,delta_hat_rdp,"
                "candidate_rdp,selection_rdp_prv,epsilon_prv,selection_rdp_rdp,epsilon_rdp\n")
        f.write(f"# Theorem 6's delta_hat at eps_hat = log1p(1/(order - 1)): prv-accountant's bounds (eps_error "
                f"eps_hat/100, delta_error {DELTA_ERROR}) and dp-accounting's RDP bound over the integer grid; "
                f"epsilon at delta {DELTA} converted at the order alone\n")
        f.write("# generated by scripts/generate_prv_delta_hat_fixtures.py with " +
                " ".join(f"{k}=={v}" for k, v in VERSIONS.items()) + "\n")
        writer = csv.writer(f, lineterminator="\n")
        for row in rows():
            writer.writerow([repr(float(v)) for v in row])
    print("wrote", path)


if __name__ == "__main__":
    main()
